"""How far notebook 03's quick Table 10 lead can be trusted: its quick grid over more seeds, on each data source.

    python scripts/gma_quick_seeds.py                                  # seeds 0-7, bundled data
    python scripts/gma_quick_seeds.py --seeds 8 --sources bundled torchvision --data-root /path/to/datasets

Notebook 03's quick run compares AVG and GMA on Table 10's setting (FMNIST, 10 two-class clients, client rate
0.01, server rates 1 and 2, 10 rounds, a 3,000-image training subset) with 2 seeds, and its self-check wants GMA
ahead at both server rates. This script runs that same notebook (``python -m fltutor run 03`` with only the grid:
``-p settings [] -p extras false``) with ``--seeds`` seeds on each source: "bundled" (the subset shipped in
data/, what CI and a fresh clone use) and "torchvision" (the full datasets under ``--data-root`` or
$FLTUTOR_DATA, of which the notebook draws its own 3,000-image subset). Seeds 0-1 are the notebook's own runs.
Rows go to results/gma/quick_seeds.csv (+ .json): the notebook's table10 rows with a ``data_source`` column.
It prints, per source and server rate, in how many seeds GMA leads, GMA − AVG seed by seed (mean ± sd), and in
what share of the seed pairs a 2-seed quick run would show AVG ahead or level. Finished runs are reloaded from
``--run-root``; the JSON's ``reused`` entry then says so.
"""
from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fltutor import results
from fltutor.checks import integer
from fltutor.metrics import mean_std

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("bundled", "torchvision")


def notebook_command(seeds: list[int], results_dir: Path, run_root: Path, out: Path) -> list[str]:
    """The ``fltutor run`` command line of notebook 03's quick grid alone, for these seeds."""
    return [sys.executable, "-m", "fltutor", "run", "03", "-p", "grid_seeds", str(seeds), "-p", "settings", "[]",
            "-p", "extras", "false", "-p", "results_dir", str(results_dir), "-p", "run_root", str(run_root),
            "--out", str(out), "--no-progress"]


def source_env(source: str, data_root: str | None) -> dict:
    """The environment that makes fltutor.data load ``source``: FLTUTOR_DATA set for torchvision, unset for bundled."""
    env = {k: v for k, v in os.environ.items() if k != "FLTUTOR_DATA"}
    if source == "torchvision":
        env["FLTUTOR_DATA"] = data_root
    return env


def lead_summary(rows: list[dict], metric: str = "best_global_acc") -> list[dict]:
    """Per (data_source, server_lr): the seeds both aggregations ran, GMA − AVG seed by seed (mean, sd), how
    many seeds GMA leads in, and the share of seed pairs whose 2-seed mean of GMA − AVG is <= 0."""
    by: dict[tuple, dict] = {}
    for r in rows:
        if r["metric"] != metric or r["value"] is None:
            continue
        by.setdefault((r["data_source"], float(r["server_lr"])), {}).setdefault(int(r["seed"]), {})[r["aggregation"]] = float(r["value"])
    out = []
    for (src, g), seeds in sorted(by.items()):
        diffs = {s: v["GMA"] - v["AVG"] for s, v in sorted(seeds.items()) if {"AVG", "GMA"} <= set(v)}
        pairs = list(itertools.combinations(diffs.values(), 2))
        m, sd = mean_std(list(diffs.values()))
        out.append({"data_source": src, "server_lr": g, "seeds": list(diffs), "mean": m, "sd": sd,
                    "ahead": sum(d > 0 for d in diffs.values()),
                    "pairs_not_ahead": sum((a + b) / 2 <= 0 for a, b in pairs) / len(pairs) if pairs else None,
                    "diffs": diffs})
    return out


def print_summary(rows: list[dict], meta: dict | None = None) -> None:
    if meta:
        print(*results.provenance_comments(meta), sep="\n")
    print("| data | server lr | seeds | GMA ahead in | GMA − AVG, seed by seed | 2-seed runs with AVG ahead or level |")
    print("|---|---|---|---|---|---|")
    for s in lead_summary(rows):
        pairs = "—" if s["pairs_not_ahead"] is None else f"{s['pairs_not_ahead']:.0%}"
        sd = f" ± {s['sd']:.2f}" if len(s["seeds"]) > 1 else ""
        print(f"| {s['data_source']} | {s['server_lr']:g} | {len(s['seeds'])} | {s['ahead']} of {len(s['seeds'])} | "
              f"{s['mean']:+.2f}{sd} | {pairs} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8, help="seeds 0..N-1 per source (at least 2; the notebook's are 0-1)")
    ap.add_argument("--sources", nargs="+", default=["bundled"], help=f"data sources, of {list(SOURCES)}")
    ap.add_argument("--data-root", default=os.environ.get("FLTUTOR_DATA"),
                    help="the torchvision datasets folder for the torchvision source (default: $FLTUTOR_DATA)")
    ap.add_argument("--run-root", default=str(ROOT / "runs" / "gma_quick_seeds"), help="finished runs are kept here")
    ap.add_argument("--folder", default=str(ROOT / "results" / "gma"), help="where quick_seeds.csv goes")
    a = ap.parse_args(argv)
    n = integer("--seeds", a.seeds, low=2, hint="a lead over seeds needs at least two")
    bad = [s for s in a.sources if s not in SOURCES]
    if bad:
        raise SystemExit(f"--sources: {bad} unknown; allowed: {list(SOURCES)}")
    if "torchvision" in a.sources and not (a.data_root and Path(a.data_root, "FashionMNIST", "raw").is_dir()):
        raise SystemExit(f"--data-root: {a.data_root!r} has no FashionMNIST/raw folder; the torchvision source needs "
                         "the full datasets (pass --data-root or set FLTUTOR_DATA)")
    seeds, rows, t0, commands, reused = list(range(n)), [], time.time(), [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for src in a.sources:
            cmd = notebook_command(seeds, Path(tmp, src), Path(a.run_root, src), Path(tmp, f"nb-{src}"))
            commands.append(("FLTUTOR_DATA=... " if src == "torchvision" else "") + " ".join(cmd[1:]))
            print(f"[{src}] {' '.join(cmd[1:])}", flush=True)
            done = subprocess.run(cmd, env=source_env(src, a.data_root), cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"[{src}] the notebook failed (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
            got = results.read_table(Path(tmp, src), "table10")
            if got is None:
                raise SystemExit(f"[{src}] the notebook wrote no table10.csv")
            nb_rows, nb_meta = got
            rows += [{"data_source": src, **r} for r in nb_rows]
            for k, v in (nb_meta.get("reused") or {}).items():   # runs the notebook reloaded (--run-root)
                if isinstance(v, int):
                    reused[k] = reused.get(k, 0) + v
    meta = results.provenance(wall_s=time.time() - t0, scale="quick run: notebook 03's Table 10 defaults over more seeds",
                              notebook_commands=commands, seeds=seeds, sources=a.sources,
                              **({"reused": {**reused, "note": "wall_s leaves out the reloaded runs' training"}}
                                 if any(reused.values()) else {}))
    results.write_table(a.folder, "quick_seeds", rows, meta)
    print_summary(rows)
    print(f"wrote {Path(a.folder) / 'quick_seeds.csv'} ({len(rows)} rows, {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
