"""Tabulate finished runs in a run folder, grouped over seeds: the README's "Measured" tables.

Every table cell that ``fltutor.federation.run`` / ``sweep`` finishes leaves
``<run_root>/cells/<label>-<method>-seed<seed>-<key>/results.json``; a ``Federation`` that a
notebook keeps with an ``out_dir`` under ``<run_root>/federations/`` (notebook 02's WAFFLe) leaves
``results.json`` there, or ``results-<i>.json`` for each run of a sweep. This script reads them
all, groups runs that differ only in their seed, and prints a table with one row per group
and each number as mean ± sample std over its seeds:

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
from pathlib import Path

import pandas as pd

from fltutor import methods
from fltutor.metrics import fairness_summary
from fltutor.methods.base import RunConfig

SHOWN_APART = ("lr", "rounds", "local_epochs")   # shown in columns of their own
NEVER_SHOWN = ("seed", "eval_every")
NUMBERS = ("mean", "majority", "minority", "gap", "variance", "last-10", "best")   # the table's columns of results


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


def mean_sd(values: pd.Series) -> str:
    """'mean ± sample std' over seeds (the mean alone for one seed); '' if a seed lacks the value."""
    if values.isna().any():
        return ""
    return f"{values.mean():.2f} ± {values.std(ddof=1):.2f}" if len(values) > 1 else f"{values.iloc[0]:.2f}"


def cell_name(folder: str, seed: int) -> str:
    """The folder's name without its seed and its 12-hex-digit key: e.g. mnist-multimodal-fedavg."""
    name = re.sub(rf"-seed{seed}(?=-|$)", "", folder)
    return re.sub(r"-[0-9a-f]{12}$", "", name)


def result_files(root: Path) -> list[Path]:
    """The results of finished table cells and of kept Federations (not the sweeps' own copies)."""
    return sorted(root.glob("cells/*/results.json")) + sorted(root.glob("federations/*/results*.json"))


def run_row(folder: Path, r: dict) -> dict:
    """One finished run as a table row: what identifies its group, then its numbers (NaN: not measured)."""
    s = r["settings"]
    variant = _variant(s, method_defaults(r["method"]))
    name = cell_name(folder.name, s["seed"])
    row = {"name": name, "method": r["method"],
           "settings": json.dumps({k: v for k, v in s.items() if k not in NEVER_SHOWN}, sort_keys=True, default=str),
           "cell": f"{name} [{variant}]" if variant else name,
           "lr": f"{s['lr']:g}", "E": s["local_epochs"], "rounds": s["rounds"], "seed": s["seed"]}
    if r.get("groups"):   # subpopulations: WAFFLe's Table 1 numbers
        row.update(fairness_summary(r["final"]["local_acc_per_client"], r["groups"]))
    else:
        row["mean"] = r["final"]["local_acc"]
        row["last-10"], row["best"] = r.get("last10_global_acc"), r.get("best_global_acc")
    return row


def summarize(root: Path) -> pd.DataFrame:
    """One row per group of finished runs that differ only in their seed, each number as mean ± std over seeds."""
    rows = []
    for f in result_files(root):
        r = json.loads(f.read_text())
        if r.get("rounds_done") != r["settings"]["rounds"]:
            continue  # unfinished: its checkpoint resumes it
        rows.append(run_row(f.parent, r))
    if not rows:
        return pd.DataFrame()
    runs = pd.DataFrame(rows)
    numbers = [c for c in NUMBERS if c in runs]
    table = runs.groupby(["name", "method", "settings"]).agg(
        cell=("cell", "first"), lr=("lr", "first"), E=("E", "first"), rounds=("rounds", "first"),
        seeds=("seed", lambda s: ", ".join(map(str, sorted(s)))),
        **{c: (c, mean_sd) for c in numbers})   # blank where the runs lack it (no subpopulations, no global model)
    return table.reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", help="run folders, e.g. runs/paper runs/paper03")
    for root in map(Path, ap.parse_args().roots):
        if not root.is_dir():
            raise ValueError(f"{root} is not a folder; pass a run_root such as runs/paper")
        print(f"== {root}")
        table = summarize(root)
        if len(table):   # cells as written (no reparsing of "98.00" as 98); text left, numbers right
            print(table.to_markdown(index=False, disable_numparse=True,
                                    colalign=["left"] + ["right"] * (table.shape[1] - 1)))
        else:
            print("(no finished runs)")


if __name__ == "__main__":
    main()
