#!/usr/bin/env python3
"""Loads a `regatta report` directory's index.html in headless Chromium and checks the page as a reader sees
it, after the browser has loaded every image (check_report.py reads the tables and summary.md; neither looks
at the page):

  * every <img> of a figure loaded: naturalWidth > 0, so its SVG / PNG / GIF exists and the browser can draw it;
  * a figure with an image has no "Plot not rendered" note beside it, and a figure without one has the note;
  * the figures on the page are report.json's, in its order, each shown as an image exactly when report.json
    says it was rendered;
  * every link of the page to a file of the report (tables, plots) points to a file that exists.

The page is not changed: a copy of index.html in a temporary folder, with <base href> pointing at the report
and a small script appended that reports what the browser loaded (in a <pre> read back from --dump-dom).

Usage: check_report_page.py REPORT_DIR [--screenshot FILE.png]. --screenshot also writes a picture of the
page (1200 px wide) for a person to look at. Exit 0 when every check passes, 1 when one fails, 2 for bad
arguments, 77 when no Chromium is installed (ctest reports the test as skipped; scripts/install-deps.sh
installs Debian's `chromium`). REGATTA_CHROMIUM names another Chromium-compatible browser.
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

PROBE = """
<script>
window.addEventListener("load", () => {
  const figures = [...document.querySelectorAll("figure")].map(f => ({
    images: [...f.querySelectorAll("img")].map(i => ({
      src: i.getAttribute("src"), width: i.naturalWidth, height: i.naturalHeight,
      shown: i.getBoundingClientRect().width})),
    notes: [...f.querySelectorAll(".missing")].map(p => p.textContent),
    text: f.textContent,
  }));
  const links = [...document.querySelectorAll("a[href]")].map(a => a.getAttribute("href"));
  const pre = document.createElement("pre");
  pre.id = "regatta-page-probe";
  pre.textContent = JSON.stringify({figures, links});
  document.body.appendChild(pre);
});
</script>
"""


def browser():
    for name in (os.environ.get("REGATTA_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def run_browser(exe, args, timeout=180):
    # --no-sandbox: containers and CI runners have no user namespaces; --disable-gpu: no display.
    base = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--mute-audio",
            "--allow-file-access-from-files", "--virtual-time-budget=20000"]
    with tempfile.TemporaryDirectory(prefix="regatta-chromium-") as profile:
        return subprocess.run(base + [f"--user-data-dir={profile}"] + args, capture_output=True, text=True,
                              timeout=timeout)


def main():
    args = sys.argv[1:]
    screenshot = None
    if "--screenshot" in args:
        i = args.index("--screenshot")
        if i + 1 >= len(args):
            print("check_report_page: --screenshot needs a file name", file=sys.stderr)
            return 2
        screenshot = Path(args[i + 1]).resolve()
        del args[i:i + 2]
    if len(args) != 1:
        print("usage: check_report_page.py REPORT_DIR [--screenshot FILE.png]", file=sys.stderr)
        return 2
    d = Path(args[0]).resolve()
    if not (d / "index.html").is_file() or not (d / "report.json").is_file():
        print(f"check_report_page: {d}: no index.html and report.json (not a report directory)", file=sys.stderr)
        return 2
    exe = browser()
    if exe is None:
        print("check_report_page: skipped (no chromium; scripts/install-deps.sh installs it)")
        return 77

    page = (d / "index.html").read_text(encoding="utf-8")
    base = f'<base href="{d.as_uri()}/">'
    probe_page = re.sub(r"<head>", "<head>\n" + base, page, count=1)
    probe_page = probe_page.replace("</body>", PROBE + "</body>")
    failures = []

    with tempfile.TemporaryDirectory(prefix="regatta-page-") as tmp:
        probe_file = Path(tmp) / "probe.html"
        probe_file.write_text(probe_page, encoding="utf-8")
        p = run_browser(exe, ["--dump-dom", probe_file.as_uri()])
        m = re.search(r'<pre id="regatta-page-probe">(.*?)</pre>', p.stdout, re.S)
        if m is None:
            print(f"check_report_page: chromium gave no page (exit {p.returncode}): {p.stderr[-2000:]}",
                  file=sys.stderr)
            return 1
        seen = json.loads(html.unescape(m.group(1)))
        if screenshot is not None:
            # The original page, not the probe: what a reader sees.
            s = run_browser(exe, [f"--screenshot={screenshot}", "--window-size=1200,6000", (d / "index.html").as_uri()])
            if not screenshot.is_file():
                failures.append(f"no screenshot written (chromium exit {s.returncode})")

    expected = [f for s in json.loads((d / "report.json").read_text())["sections"] if s["produced"]
                for f in s["figures"]]
    figures = seen["figures"]
    if len(figures) != len(expected):
        failures.append(f"the page shows {len(figures)} figures, report.json lists {len(expected)}")
    checks = 0
    for i, (fig, want) in enumerate(zip(figures, expected)):
        name = want["id"]
        checks += 1
        images = fig["images"]
        not_rendered = [n for n in fig["notes"] if "not rendered" in n.lower()]
        for img in images:
            checks += 1
            if img["width"] <= 0 or img["height"] <= 0:
                failures.append(f"figure {name}: <img src={img['src']}> did not load (naturalWidth "
                                f"{img['width']}): missing or not an image")
            elif img["shown"] <= 0:
                failures.append(f"figure {name}: <img src={img['src']}> loaded but is drawn 0 px wide")
        if images and not_rendered:
            failures.append(f"figure {name}: an image and the note '{not_rendered[0].strip()}' beside it")
        if not images and not not_rendered:
            failures.append(f"figure {name}: neither an image nor a 'not rendered' note")
        if bool(images) != bool(want["rendered"]):
            failures.append(f"figure {name}: report.json says rendered = {want['rendered']}, the page shows "
                            f"{len(images)} image(s)")
        for img in images:
            if not img["src"].startswith(f"plots/{name}"):
                failures.append(f"figure {name}: shows {img['src']}, not one of its own plots/{name}*")
    for href in seen["links"]:
        url = urlparse(href)
        if url.scheme or url.netloc or href.startswith("#"):
            continue
        checks += 1
        if not (d / unquote(url.path)).is_file():
            failures.append(f"the link {href} points to no file")

    for f in failures:
        print("FAIL", f)
    shown = sum(1 for f in figures if f["images"])
    print(f"check_report_page: {len(figures)} figures ({shown} with images), {len(seen['links'])} links; "
          f"{checks} checks, {len(failures)} failed" + (f"; screenshot {screenshot}" if screenshot else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
