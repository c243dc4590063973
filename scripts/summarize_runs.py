"""Tabulate finished runs in a run folder, grouped over seeds: the README's "Measured" tables.

Every table cell that ``fltutor.federation.run`` / ``sweep`` finishes leaves
``<run_root>/cells/<label>-<method>-seed<seed>-<key>/results.json``; a ``Federation`` that a
notebook keeps with an ``out_dir`` under ``<run_root>/federations/`` (notebook 02's WAFFLe) leaves
``results.json`` there, or ``results-<i>.json`` for each run of a sweep. This script reads them
all, groups runs that differ only in their seed, and prints mean ± sample std per group:

- runs whose data have subpopulations (WAFFLe's multimodal splits): the mean local accuracy and
  Table 1's majority, minority, gap and variance;
- other runs: the mean local accuracy, and where the run has a global model scored on the
  dataset's test split (GMA), the paper's metric (the mean over the last 10 rounds) and the best.

Settings that differ from the method's defaults are named in brackets.

    python scripts/summarize_runs.py runs/paper runs/paper03
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from fltutor import methods
from fltutor.metrics import fairness_summary
from fltutor.methods.base import RunConfig

SHOWN_APART = ("lr", "rounds", "local_epochs")   # printed in parentheses
NEVER_SHOWN = ("seed", "eval_every")


def method_defaults(method: str) -> dict:
    """RunConfig's defaults and the method's parameter defaults (with its name's presets)."""
    out = dataclasses.asdict(RunConfig())
    try:
        cls, preset = methods.get(method)
    except ValueError:
        return out  # a method this version does not know: name every setting
    if cls.Params is not None:
        out.update(dataclasses.asdict(cls.Params(**preset)))
    return out


def _variant(settings: dict, defaults: dict) -> str:
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(settings.items())
                    if k not in SHOWN_APART + NEVER_SHOWN and v != defaults.get(k, object()))


def _mean_std(vals: list[float]) -> str:
    return f"{np.mean(vals):.2f} ± {np.std(vals, ddof=1):.2f}" if len(vals) > 1 else f"{vals[0]:.2f}"


def cell_name(folder: str, seed: int) -> str:
    """The folder's name without its seed and its 12-hex-digit key: e.g. mnist-multimodal-fedavg."""
    name = re.sub(rf"-seed{seed}(?=-|$)", "", folder)
    return re.sub(r"-[0-9a-f]{12}$", "", name)


def result_files(root: Path) -> list[Path]:
    """The results of finished table cells and of kept Federations (not the sweeps' own copies)."""
    return sorted(root.glob("cells/*/results.json")) + sorted(root.glob("federations/*/results*.json"))


def summarize(root: Path) -> list[str]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for f in result_files(root):
        r = json.loads(f.read_text())
        s = r["settings"]
        if r.get("rounds_done") != s["rounds"]:
            continue  # unfinished: its checkpoint resumes it
        key = json.dumps({k: v for k, v in s.items() if k not in NEVER_SHOWN}, sort_keys=True, default=str)
        groups[cell_name(f.parent.name, s["seed"]), r["method"], key].append(r)
    lines = []
    for (name, method, _), runs in sorted(groups.items()):
        s = runs[0]["settings"]
        variant = _variant(s, method_defaults(method))
        seeds = sorted(r["settings"]["seed"] for r in runs)
        label = f"{name} [{variant}]" if variant else name
        if runs[0].get("groups"):
            fs = [fairness_summary(r["final"]["local_acc_per_client"], r["groups"]) for r in runs]
            cols = " | ".join(f"{k} {_mean_std([x[k] for x in fs])}"
                              for k in ("mean", "majority", "minority", "gap", "variance"))
        else:
            cols = f"mean {_mean_std([r['final']['local_acc'] for r in runs])}"
            if all(r.get("last10_global_acc") is not None for r in runs):
                cols += (f" | last-10 {_mean_std([r['last10_global_acc'] for r in runs])}"
                         f" | best {_mean_std([r['best_global_acc'] for r in runs])}")
        lines.append(f"{label} (lr {s['lr']:g}, E {s['local_epochs']}, {s['rounds']} rounds, seeds {seeds}): {cols}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", help="run folders, e.g. runs/paper runs/paper03")
    for root in map(Path, ap.parse_args().roots):
        if not root.is_dir():
            raise ValueError(f"{root} is not a folder; pass a run_root such as runs/paper")
        print(f"== {root}")
        print("\n".join(summarize(root)) or "(no finished runs)")


if __name__ == "__main__":
    main()
