"""AVG and GMA at server rates above 1 on the whole data: does a higher rate close GMA's gap on Table 2's rows?

    FLTUTOR_DATA=/path/to/datasets python scripts/gma_server_rate.py                       # FMNIST-500, rates 1, 1.5, 2
    FLTUTOR_DATA=... python scripts/gma_server_rate.py --dataset mnist --server-lrs 1 2 --seeds 0 1 2 3

FedAvg on 500 label-skewed clients (2 classes each), 10 a round, at the client settings of
``configs/03_table2_cpu.yaml`` (batch 32, client lr 0.05, momentum 0.9, one local epoch, 200 rounds), with
plain averaging (AVG) and GMA (tau 0.4) at each server rate. The runs of one aggregation train as one
batched sweep; finished runs are reloaded and a killed job resumes (``--out-root``, default runs/gma_server_rate).
To keep this a CPU job the global test split is scored every ``--eval-every`` rounds (default 5), not
every round as in Table 2, so "best" here is the best of those evaluations: compare the rates with each
other, not with Table 2's numbers. Rows go to results/gma/server_rate.csv (+ .json), in the columns of
tables2_3.csv plus ``eval_every``; ``python scripts/gma_table.py`` prints them, GMA - AVG seed by seed.
"""
from __future__ import annotations

import argparse
import sys
import time

from fltutor import results
from fltutor.federation import sweep
from fltutor.scenarios import GMA_SETTINGS, gma_data, gma_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="fashionmnist", choices=["fashionmnist", "mnist"])
    ap.add_argument("--clients", type=int, default=500)
    ap.add_argument("--server-lrs", type=float, nargs="+", default=[1.0, 1.5, 2.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--out-root", default="runs/gma_server_rate")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    meta = results.provenance(command=" ".join(["python scripts/gma_server_rate.py", *sys.argv[1:]]),
                              scale=f"full data, test split scored every {a.eval_every} rounds")
    t0 = time.time()
    datas = {s: gma_data(a.dataset, "label", a.clients, seed=s) for s in a.seeds}
    runs = [{"server_lr": g, "seed": s} for g in a.server_lrs for s in a.seeds]
    rows = []
    for agg, name in (("mean", "AVG"), ("gma", "GMA")):
        out = sweep(gma_model(a.dataset, datas[a.seeds[0]]), [datas[r["seed"]] for r in runs], "fedopt", runs,
                    out_root=a.out_root, label=f"{a.dataset}-label{a.clients}", server_opt="sgd", aggregation=agg,
                    tau=0.4, mu=0.0, lr=a.lr, momentum=GMA_SETTINGS["momentum"], local_epochs=1, batch_size=32,
                    client_fraction=min(1.0, 10 / a.clients), rounds=a.rounds, eval_every=a.eval_every)
        for r, res in zip(runs, out):
            ids = {"dataset": a.dataset, "skew": "label", "clients": a.clients, "algorithm": "fedavg",
                   "aggregation": name, "lr_choice": "fixed", "lr": a.lr, "server_lr": r["server_lr"], "tau": 0.4,
                   "seed": r["seed"], "rounds": a.rounds, "eval_every": a.eval_every}
            d = res["diverged"]
            vals = {"best_global_acc": None if d else res["best_global_acc"],
                    "last10_global_acc": None if d else res["last10_global_acc"]}
            if d:
                vals["diverged_round"] = d["round"]
            rows += [{**ids, "metric": k, "value": v} for k, v in vals.items()]
            shown = f"diverged at round {d['round']}" if d else (f"best {res['best_global_acc']:.2f}, "
                                                                  f"last 10 {res['last10_global_acc']:.2f}")
            print(f"{a.dataset} {a.clients} {name} server lr {r['server_lr']:g} seed {r['seed']}: {shown}", flush=True)
    if not a.no_write:
        meta["wall_s"] = round(time.time() - t0, 1)
        print("wrote", *results.write_table(results.RESULTS_DIR / "gma", "server_rate", rows, meta, merge=True))


if __name__ == "__main__":
    main()
