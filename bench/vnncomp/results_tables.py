"""The results.csv and results.md that run_vit.py and run_official.py write: one row per instance, then the
count of each regatta verdict."""
import csv
import os


def write_tables(out_dir, results, settings):
    """results: dicts with the same keys, "regatta" the verdict; settings: what the footer says was run."""
    keys = list(results[0].keys())
    with open(os.path.join(out_dir, "results.csv"), "w") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(results)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys) + "\n")
        for res in results:
            f.write("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) and k.endswith("margin") else
                                      "–" if v is None else str(v) for k, v in res.items()) + " |\n")
        count = {}
        for res in results:
            count[res["regatta"]] = count.get(res["regatta"], 0) + 1
        f.write("\nregatta: " + ", ".join(f"{k} {v}" for k, v in sorted(count.items())) +
                f" of {len(results)} ({settings})\n")
