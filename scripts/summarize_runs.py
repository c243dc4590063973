"""Tabulate finished runs in a run folder, grouped over seeds: the README's "Measured" tables.

Every table cell that a notebook or `fltutor.experiments.run` / `fltutor.gma.run` finishes leaves
``<run_root>/<name>/results.json``. This script reads them all, groups runs that differ only in
their seed, and prints mean ± sample std per group:

- WAFFLe folders (``<dataset>-<unimodal|multimodal>-<method>-seed...``): mean local accuracy, and
  for multimodal runs the majority, minority, gap and variance of Table 1;
- GMA folders (``<dataset>-<skew><clients>-<method>-<server>-<aggregation>-seed...``): best global
  accuracy and the paper's metric, the mean over the last 10 rounds.

    python scripts/summarize_runs.py runs/paper runs/paper03
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

import numpy as np

from fltutor.gma import last_rounds_mean
from fltutor.metrics import fairness_summary
from fltutor.simulate import FedConfig

# settings worth naming when they differ from FedConfig's defaults
_SHOWN = ("mu", "selection_optimizer", "selection_lr", "kl_weight", "l1_weight",
          "alpha_ratio", "num_factors", "temperature", "server_lr", "tau")


def _variant(cfg: dict, defaults: dict) -> str:
    return " ".join(f"{k}={cfg[k]:g}" if isinstance(cfg[k], float) else f"{k}={cfg[k]}"
                    for k in _SHOWN if k in cfg and cfg[k] != defaults.get(k))


def _mean_std(vals: list[float]) -> str:
    return f"{np.mean(vals):.2f} ± {np.std(vals, ddof=1):.2f}" if len(vals) > 1 else f"{vals[0]:.2f}"


def summarize(root: Path) -> list[str]:
    defaults = asdict(FedConfig())
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for f in sorted(root.glob("*/results.json")):
        r = json.loads(f.read_text())
        cfg = r["config"]
        if r.get("rounds_done") != cfg["rounds"]:
            continue  # unfinished: its checkpoint resumes it
        name = f.parent.name.split(f"-seed{cfg['seed']}-")[0]
        shown_apart = {k: cfg[k] for k in ("lr", "rounds", "local_epochs")}  # printed in parentheses
        groups[name, _variant(cfg, {**defaults, **shown_apart}), cfg["rounds"], cfg["lr"], cfg["local_epochs"]].append(r)
    lines = []
    for (name, variant, rounds, lr, epochs), runs in sorted(groups.items()):
        seeds = sorted(r["config"]["seed"] for r in runs)
        label = f"{name} [{variant}]" if variant else name
        if "multimodal" in name or "unimodal" in name:
            if runs[0]["groups"]:
                fs = [fairness_summary(r["final"]["local_acc_per_client"], r["groups"]) for r in runs]
                cols = " | ".join(f"{k} {_mean_std([s[k] for s in fs])}"
                                  for k in ("mean", "majority", "minority", "gap", "variance"))
            else:
                cols = f"mean {_mean_std([r['final']['local_acc'] for r in runs])}"
        else:
            best = [max(h["global_acc"] for h in r["history"] if h.get("global_acc") is not None) for r in runs]
            last = [last_rounds_mean(r["history"], rounds) for r in runs]
            cols = f"last-10 {_mean_std(last)} | best {_mean_std(best)}"
        lines.append(f"{label} (lr {lr:g}, E {epochs}, {rounds} rounds, seeds {seeds}): {cols}")
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
