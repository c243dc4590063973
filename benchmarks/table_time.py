"""Time a whole paper table end to end: WAFFLe's MNIST Tables 1-2 as sweeps vs one run at a time.

    FLTUTOR_DATA=/path/to/datasets python benchmarks/table_time.py [--device auto] [--rounds 100] [--seeds 5]

The table (Hao et al. 2022, Tables 1-2): FedAvg, FedProx (mu = 1), q-FFL (q = 0.001) and
weight-factorization WAFFLe (notebook 02's selections: Adam at 0.1, KL weight 0.1), unimodal
and multimodal, on full MNIST with 120 clients, C = 0.1, E = 5, B = 10, lr 0.04. Each
(method, mode) cell is one sweep over the seeds (each seed its own partition); the same runs
are then done one at a time. Prints both wall times, their ratio, and the cells' mean local
accuracy (the two ways agree to float tolerance). ``--rounds`` / ``--seeds`` shrink the table
for a quick look on a CPU; ``--only sweep`` / ``--only single`` times one side.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from fltutor import data, scenarios
from fltutor.engine import resolve_device
from fltutor.federation import Federation, grid

METHODS = {"fedavg": {}, "fedprox": {"mu": 1.0}, "qffl": {"q": 0.001},
           "waffle_ibp": {"selection_optimizer": "adam", "selection_lr": 0.1, "kl_weight": 0.1}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--eval-every", type=int, default=1)
    ap.add_argument("--only", choices=["sweep", "single", "both"], default="both",
                    help="time only the sweeps, only the runs one at a time, or both")
    ap.add_argument("--single-seeds", type=int, default=None,
                    help="time only this many seeds one at a time and scale to --seeds (same work per seed)")
    ap.add_argument("--json", help="write the timings here")
    a = ap.parse_args()
    dev = resolve_device(a.device)
    train, test = data.load("mnist", train=True), data.load("mnist", train=False)
    print(f"device {dev}; MNIST from {train.source} ({len(train)} train images); {a.seeds} seeds, T = {a.rounds}")
    seeds = list(range(a.seeds))
    common = dict(rounds=a.rounds, client_fraction=0.1, local_epochs=5, batch_size=10, lr=0.04,
                  eval_every=a.eval_every)
    out = {"device": str(dev), "rounds": a.rounds, "seeds": a.seeds, "cells": []}
    t_sweep = t_single = 0.0
    for mode in ("unimodal", "multimodal"):
        feds = [scenarios.waffle_ibp_data("mnist", mode, seed=s, train_set=train, test_set=test) for s in seeds]
        for method, params in METHODS.items():
            cell = {"mode": mode, "method": method}
            if a.only != "single":
                t = time.perf_counter()
                sw = Federation("mlp", feds, method, runs=grid(seed=seeds), device=dev, progress=False,
                                **common, **params)
                sw.run()
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                cell["sweep_s"] = time.perf_counter() - t
                cell["local_acc"] = [r["final"]["local_acc"] for r in sw.results()]
                t_sweep += cell["sweep_s"]
            if a.only != "sweep":
                t = time.perf_counter()
                single = []
                timed = seeds[: a.single_seeds] if a.single_seeds else seeds
                for s in timed:
                    one = Federation("mlp", feds[s], method, device=dev, progress=False, **{**common, "seed": s},
                                     **params)
                    one.run()
                    single.append(one.results()[0]["final"]["local_acc"])
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                cell["single_s"] = (time.perf_counter() - t) * len(seeds) / len(timed)
                cell["single_scaled_from_seeds"] = len(timed)
                cell["single_local_acc"] = single
                t_single += cell["single_s"]
            out["cells"].append(cell)
            acc = cell.get("local_acc") or cell["single_local_acc"]
            times = "; ".join(f"{k.split('_')[0]} {cell[k]:6.1f} s" for k in ("sweep_s", "single_s") if k in cell)
            print(f"  {mode:10s} {method:10s} {times}; local acc {np.mean(acc):.2f} "
                  f"± {np.std(acc, ddof=1) if len(acc) > 1 else 0:.2f}", flush=True)
    out.update(sweep_s=t_sweep or None, single_s=t_single or None)
    parts = []
    if t_sweep:
        parts.append(f"as sweeps: {t_sweep / 60:.1f} min")
    if t_single:
        parts.append(f"one run at a time: {t_single / 60:.1f} min" + (
            f" (timed on {a.single_seeds} seed(s) per cell, scaled to {a.seeds})" if a.single_seeds else ""))
    if t_sweep and t_single:
        parts.append(f"ratio {t_single / t_sweep:.1f}x")
    print("\nTables 1-2 " + "; ".join(parts))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
