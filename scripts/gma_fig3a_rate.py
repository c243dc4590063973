"""Notebook 03's Fig. 3a run (FedCMNIST, 10 clients, all every round) at several client rates and seeds: which rate learns.

    python scripts/gma_fig3a_rate.py                                   # rates 0.01 and 0.02, seeds 0-3
    python scripts/gma_fig3a_rate.py --lrs 0.005 0.01 0.02 --seeds 0 1

The setting of notebook 03's section 6b at its quick defaults: FedAvg on FedCMNIST (each training client
its own label -> colour map, unseen colours at test), 10 clients taking part every round, the notebook's
class-balanced subsets (3,000 training and 1,000 test images, ``fltutor.data.balanced_subset``), batch 10,
client momentum 0.9, one local epoch, 20 rounds, server rate 1, AVG and GMA (tau 0.4). Every second
round it scores the global model on the test subset and on every client's training samples, as the
notebook does. Without ``FLTUTOR_DATA`` it reads the bundled subsets, as the notebook's quick run does.
The runs of one aggregation train as one batched sweep (finished runs are reloaded from ``--out-root``).
Rows go to results/gma/fig3a_rate.csv (+ .json): the last round's train and test accuracy, the best
test accuracy of the evaluated rounds and, for a run that turned non-finite, its round. Notebook 03
shows them beside its Fig. 3a.
"""
from __future__ import annotations

import argparse
import sys
import time

from fltutor import data as fdata
from fltutor import results
from fltutor.federation import sweep
from fltutor.scenarios import GMA_SETTINGS, gma_data, gma_model

SETTING = {"dataset": "mnist", "skew": "mixed", "clients": 10, "algorithm": "fedavg"}


def probe(datas: dict, *, lrs, seeds, rounds: int, eval_every: int, out_root=None, say=print) -> list[dict]:
    """Tidy rows of AVG and GMA at every (lr, seed); ``datas``: {seed: FederatedData}."""
    runs = [{"lr": lr, "seed": s} for lr in lrs for s in seeds]
    rows = []
    for agg, name in (("mean", "AVG"), ("gma", "GMA")):
        out = sweep(gma_model("mnist", datas[seeds[0]]), [datas[r["seed"]] for r in runs], "fedopt", runs,
                    out_root=out_root, label="fig3a", progress=False, server_opt="sgd", server_lr=1.0, aggregation=agg,
                    tau=0.4, mu=0.0, momentum=GMA_SETTINGS["momentum"], local_epochs=1, batch_size=10,
                    client_fraction=1.0, rounds=rounds, eval_every=eval_every, eval_train=True)
        for r, res in zip(runs, out):
            d = res["diverged"]
            h = [e for e in res["history"] if e.get("train_acc") is not None]
            vals = {"final_train_acc": None if d else h[-1]["train_acc"],
                    "final_test_acc": None if d else h[-1]["global_acc"],
                    "best_test_acc": None if d else max(e["global_acc"] for e in h),
                    "diverged_round": d["round"] if d else None}
            ids = {**SETTING, "aggregation": name, "lr": r["lr"], "server_lr": 1.0, "momentum": GMA_SETTINGS["momentum"],
                   "batch_size": 10, "seed": r["seed"], "rounds": rounds, "eval_every": eval_every}
            rows += [{**ids, "metric": k, "value": v} for k, v in vals.items()]
            say(f"{name} lr {r['lr']:g} seed {r['seed']}: " + (f"diverged at round {d['round']}" if d else
                f"round {h[-1]['round']} train {vals['final_train_acc']:.1f} test {vals['final_test_acc']:.1f}, "
                f"best test {vals['best_test_acc']:.1f}"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lrs", type=float, nargs="+", default=[0.01, 0.02])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=2)
    ap.add_argument("--train-subset", type=int, default=3000)
    ap.add_argument("--test-subset", type=int, default=1000)
    ap.add_argument("--out-root", default="runs/gma_fig3a_rate")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    t0 = time.time()
    train = fdata.balanced_subset(fdata.load("mnist", train=True), a.train_subset)
    test = fdata.balanced_subset(fdata.load("mnist", train=False), a.test_subset)
    datas = {s: gma_data("mnist", "mixed", 10, seed=s, train_set=train, test_set=test) for s in a.seeds}
    rows = probe(datas, lrs=a.lrs, seeds=a.seeds, rounds=a.rounds, eval_every=a.eval_every, out_root=a.out_root)
    if not a.no_write:
        meta = results.provenance(command=" ".join(["python scripts/gma_fig3a_rate.py", *sys.argv[1:]]),
                                  wall_s=round(time.time() - t0, 1), data_source=train.source,
                                  scale=f"quick run: notebook 03's subsets ({a.train_subset} training, {a.test_subset} "
                                        f"test images of the {train.source} MNIST), {a.rounds} rounds")
        print("wrote", *results.write_table(results.RESULTS_DIR / "gma", "fig3a_rate", rows, meta))


if __name__ == "__main__":
    main()
