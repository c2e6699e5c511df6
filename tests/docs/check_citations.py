#!/usr/bin/env python3
"""Every document the repository cites must exist in the repository, with the cited anchor or section.

Usage: check_citations.py SOURCE_DIR

Scans the tracked source and documentation files (git ls-files; a directory walk when SOURCE_DIR is not a git
checkout) and fails, printing file:line and the problem, when
  * a path `docs/<page>.md` names a file that does not exist, or `docs/<page>.md#anchor` an anchor that the page
    does not define (a heading, by GitHub's slug rule, or an explicit <a id="..."> / <a name="...">);
  * a Markdown link inside a .md file ([text](target), relative to that file) names a missing file or anchor;
  * a section number is cited by page (`bounds.md §3.6`, `docs/flow.md §4`, `attention.md §4.1–§4.6`) and no
    page of that name under docs/ has a heading numbered so ("### 3.6 …", "## 4. …");
  * a page is cited by name and section title (`design.md, "Errors"`) and no tracked .md file has that name,
    or one of the team's design notes that live outside the repository is named at all;
  * anything mentions the team notes outside the repository (shared/math, shared/design.md, shared/style.md).
Exit status 0 when every citation resolves, 1 otherwise.
"""

import os
import re
import subprocess
import sys

TEXT_SUFFIXES = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".py", ".cmake", ".txt", ".sh", ".md", ".in", ".toml",
                 ".cfg", ".yml", ".yaml", ".json")
SKIP_DIRS = {".git", "build", "__pycache__"}

DOCS_PATH = re.compile(r"(?<![\w/.-])(?:\.\./)*(docs/[\w./-]*?\.md)(?:#([\w-]+))?")
MD_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
FORBIDDEN = re.compile(r"shared/(?:math\b|design\.md|style\.md)")
# A page name followed by section numbers: "bounds.md §3.6", "`attention.md` §4.1–§4.6", "docs/flow.md §4".
SECTION_CITE = re.compile(r"([\w./-]+\.md)`?\)?,?\s*((?:§\s*[\d.]*\d(?:\s*(?:[–,-]|and|to)\s*)?)+)")
SECTION_NUMBER = re.compile(r"§\s*([\d.]*\d)")
# A page cited by name and section title: `design.md, "Errors"`, `style.md, habit 5`.
TITLED_CITE = re.compile(r"(?<![\w./-])([A-Za-z][\w-]*\.md)`?,\s*(?:[\"'“‘]|habit\b)")
# The team's notes outside the repository: no page of the repository has these names.
OUTSIDE_NOTES = re.compile(r"(?<![\w./-])(design\.md|style\.md|wave2\.md)\b")
INLINE_MATH = re.compile(r"\$[^$]*\$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?(?:\s|$)")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for base, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            files += [os.path.relpath(os.path.join(base, n), root) for n in names]
    return [f for f in files if f.endswith(TEXT_SUFFIXES) or os.path.basename(f) == "CMakeLists.txt"]


def slug(text):
    """GitHub's heading anchor: links and emphasis reduced to text, lower case, punctuation dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


class Page:
    def __init__(self, path):
        self.anchors, self.sections = set(), set()
        counts = {}
        fenced = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    fenced = not fenced
                    continue
                if fenced:
                    continue
                self.anchors.update(EXPLICIT_ID.findall(line))
                m = HEADING.match(line)
                if not m:
                    continue
                title = m.group(2)
                s = slug(title)
                n = counts.get(s, 0)
                counts[s] = n + 1
                self.anchors.add(s if n == 0 else f"{s}-{n}")
                num = NUMBERED.match(re.sub(r"^[`*_]+", "", title))
                if num:
                    self.sections.add(num.group(1))


class Checker:
    def __init__(self, root):
        self.root = root
        self.pages = {}
        self.errors = []
        self.files = tracked_files(root)
        self.md_names = {os.path.basename(f) for f in self.files if f.endswith(".md")}
        self.docs_by_name = {}
        for f in self.files:
            if f.startswith("docs/") and f.endswith(".md"):
                self.docs_by_name.setdefault(os.path.basename(f), []).append(f)

    def page(self, rel):
        if rel not in self.pages:
            path = os.path.join(self.root, rel)
            self.pages[rel] = Page(path) if os.path.isfile(path) else None
        return self.pages[rel]

    def error(self, where, message):
        self.errors.append(f"{where}: {message}")

    def check_target(self, where, rel, anchor):
        rel = os.path.normpath(rel)
        if not os.path.exists(os.path.join(self.root, rel)):
            self.error(where, f"cites {rel}, which does not exist")
            return
        if anchor is None or not rel.endswith(".md"):
            return
        page = self.page(rel)
        if page is not None and anchor not in page.anchors:
            self.error(where, f"cites {rel}#{anchor}: no such heading or anchor in {rel}")

    def check_sections(self, where, name, numbers):
        base = os.path.basename(name)
        candidates = [name] if name.startswith("docs/") else self.docs_by_name.get(base, [])
        for number in numbers:
            if not any(self.page(c) is not None and number in self.page(c).sections for c in candidates):
                self.error(where, f"cites {name} §{number}: no page of that name under docs/ has a section {number}")

    def check_file(self, rel):
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                lines = f.read().split("\n")
        except (UnicodeDecodeError, OSError):
            return
        is_md = rel.endswith(".md")
        for k, line in enumerate(lines, 1):
            where = f"{rel}:{k}"
            if FORBIDDEN.search(line):
                self.error(where, "mentions notes outside the repository (shared/...); cite a page under docs/")
            for m in DOCS_PATH.finditer(line):
                self.check_target(where, m.group(1), m.group(2))
            for m in SECTION_CITE.finditer(line):
                self.check_sections(where, m.group(1).lstrip("./"), SECTION_NUMBER.findall(m.group(2)))
            for m in TITLED_CITE.finditer(line):
                if m.group(1) not in self.md_names and not OUTSIDE_NOTES.fullmatch(m.group(1)):
                    self.error(where, f"cites {m.group(1)}, which is not a page of the repository")
            for m in OUTSIDE_NOTES.finditer(line):
                if m.group(1) not in self.md_names:
                    self.error(where, f"cites {m.group(1)}, a note outside the repository; cite a page under docs/")
            if is_md:
                for m in MD_LINK.finditer(INLINE_MATH.sub("", line)):
                    target = m.group(1)
                    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or not re.search(r"[./#]", target):
                        continue
                    path, _, anchor = target.partition("#")
                    rel_target = os.path.join(os.path.dirname(rel), path) if path else rel
                    self.check_target(where, rel_target, anchor or None)

    def run(self):
        me = os.path.relpath(os.path.abspath(__file__), os.path.abspath(self.root))
        for rel in self.files:
            if rel != me:  # this script names the forbidden patterns in order to find them
                self.check_file(rel)
        return self.errors


def main():
    if len(sys.argv) != 2:
        print("usage: check_citations.py SOURCE_DIR", file=sys.stderr)
        return 2
    errors = Checker(sys.argv[1]).run()
    for e in errors:
        print(e)
    print(f"{len(errors)} unresolved citation(s)" if errors else "every cited page, anchor and section exists")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
