"""Why Table 10's client rates 0.05 and 0.1 fail here: FedAvg on its setting at the paper's rates, inputs and batches.

    FLTUTOR_DATA=/path/to/datasets python scripts/gma_rate_probe.py            # the default grid below, ~25 min, 1 thread
    FLTUTOR_DATA=... python scripts/gma_rate_probe.py --lrs 0.1 --inputs unit --batch-sizes 32 128 --rounds 20

GMA's Table 10 (Tenison et al. 2023, App. D.4) puts the best FedAvg accuracy on non-iid FMNIST (10 two-class
clients, all every round, LeNet, client SGD with momentum 0.9, one local epoch) at client rates 0.05 and 0.1
(87.8 and 88.3 at server rate 1). Our grid (results/gma/table10.csv) diverged at 0.1 for every server
rate at reduced scale (15 rounds), and at both 0.05 and 0.1 in round 1 at the paper's protocol (100 rounds,
full data). The paper does not give its batch size or its input scaling, so this probe runs plain averaging
(AVG, server SGD at ``--server-lr``) on the whole data over: client rate x momentum x batch size x input
scaling, where the scaling is "standardized" (fltutor's default: the dataset's mean and std) or "unit"
(pixels in [0, 1], torchvision's ``ToTensor()`` alone). The runs of one (scaling, batch size) train as one
batched sweep; finished runs are reloaded (``--out-root``). Rows go to results/gma/rate_probe.csv (+ .json):
best and final global test accuracy over ``--rounds`` (scored every ``--eval-every`` rounds) and the round
at which a run turned non-finite. ``python scripts/gma_table.py`` prints them.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from fltutor import data as fdata
from fltutor import results
from fltutor.federation import grid, sweep
from fltutor.scenarios import gma_data, gma_model

INPUTS = ("standardized", "unit")


def unit_inputs(fed: fdata.FederatedData, dataset: str) -> fdata.FederatedData:
    """The same clients with pixels mapped back to [0, 1] (what ``ToTensor()`` gives without ``Normalize``)."""
    lo, hi = fdata.pixel_bounds(dataset)
    return dataclasses.replace(fed, x=(fed.x - lo) / (hi - lo),
                               x_test=None if fed.x_test is None else (fed.x_test - lo) / (hi - lo))


def probe(datas: dict, *, dataset: str, clients: int, lrs, momenta, batch_sizes, seeds, rounds: int,
          server_lr: float = 1.0, eval_every: int = 1, out_root=None, say=print) -> list[dict]:
    """Tidy rows of FedAvg runs: ``datas[(inputs, seed)]`` is a FederatedData, every other axis a list."""
    rows = []
    for inputs in sorted({i for i, _ in datas}, key=INPUTS.index):
        for bs in batch_sizes:
            runs = grid(lr=list(lrs), momentum=list(momenta), seed=list(seeds))
            out = sweep(gma_model(dataset, datas[inputs, seeds[0]]), [datas[inputs, r["seed"]] for r in runs], "fedopt",
                        runs, out_root=out_root, label=f"{dataset}-label{clients}-{inputs}", progress=False,
                        server_opt="sgd", server_lr=server_lr, aggregation="mean", tau=0.4, mu=0.0, local_epochs=1,
                        batch_size=bs, client_fraction=1.0, rounds=rounds, eval_every=eval_every)
            for r, res in zip(runs, out):
                ids = {"dataset": dataset, "skew": "label", "clients": clients, "algorithm": "fedavg", "aggregation": "AVG",
                       "inputs": inputs, "batch_size": bs, "lr": r["lr"], "momentum": r["momentum"],
                       "server_lr": server_lr, "seed": r["seed"], "rounds": rounds, "eval_every": eval_every}
                d = res["diverged"]
                accs = [e["global_acc"] for e in res["history"] if e.get("global_acc") is not None]
                vals = {"best_global_acc": None if d else max(accs), "final_global_acc": None if d else accs[-1],
                        "diverged_round": d["round"] if d else None}
                rows += [{**ids, "metric": k, "value": v} for k, v in vals.items()]
                say(f"{inputs:12s} batch {bs:3d} lr {r['lr']:<5g} momentum {r['momentum']:<3g} seed {r['seed']}: "
                    + (f"diverged at round {d['round']}" if d else
                       f"best {max(accs):.2f}, final {accs[-1]:.2f}, by evaluation {[round(a, 1) for a in accs]}"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="fashionmnist", choices=["fashionmnist", "mnist"])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--lrs", type=float, nargs="+", default=[0.01, 0.05, 0.1])
    ap.add_argument("--momenta", type=float, nargs="+", default=[0.9])
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--inputs", nargs="+", default=list(INPUTS), choices=INPUTS)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--server-lr", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=1)
    ap.add_argument("--out-root", default="runs/gma_rate_probe")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    meta = results.provenance(command=" ".join(["python scripts/gma_rate_probe.py", *sys.argv[1:]]),
                              scale=f"full data, {a.rounds} rounds, AVG only")
    t0 = time.time()
    datas = {}
    for s in a.seeds:
        fed = gma_data(a.dataset, "label", a.clients, seed=s)
        datas.update({(i, s): fed if i == "standardized" else unit_inputs(fed, a.dataset) for i in a.inputs})
    rows = probe(datas, dataset=a.dataset, clients=a.clients, lrs=a.lrs, momenta=a.momenta, batch_sizes=a.batch_sizes,
                 seeds=a.seeds, rounds=a.rounds, server_lr=a.server_lr, eval_every=a.eval_every, out_root=a.out_root,
                 say=lambda s: print(s, flush=True))
    if not a.no_write:
        meta["wall_s"] = round(time.time() - t0, 1)
        paths = results.write_table(results.RESULTS_DIR / "gma", "rate_probe", rows, meta, merge=True)
        print(f"wrote {paths[0]} and {paths[1].name}")


if __name__ == "__main__":
    main()
