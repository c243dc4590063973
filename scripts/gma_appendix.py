"""GMA's Tables 4-5 (participating vs non-participating clients), Appendix E (the convex case) and Fig. 4 on all the data.

    FLTUTOR_DATA=/path/to/datasets python scripts/gma_appendix.py                  # all three tables (~1 h, 1 thread)
    FLTUTOR_DATA=... python scripts/gma_appendix.py --tables convex --convex-seeds 0 1 2 3 4

Notebook 03 runs all three on its small subsets with one seed (sections 8, 11, 12). Here:

- ``participation`` (Tables 4-5, Tenison et al. 2023 sec. 5.5 and App. D.3): all of FMNIST over 10 clients with
  2 classes each, FedAvg with 3 local epochs (client lr ``--lr``, momentum 0.9, batch 32) warmed up for each of
  ``--warmups`` rounds (the paper does not say how long; the one warm run trains on and is compared at each),
  then ONE more round with 5 (Table 4) or 2 (Table 5) of the 10 clients, aggregated twice from the same state
  and cohort: AVG and GMA (tau 0.4). Each client is scored on its own local test set; the rows are the mean
  accuracy of the participating and of the non-participating clients. The seeds are the paper's trials and
  train as one batched sweep.
- ``convex`` (App. E): multinomial logistic regression on all of MNIST over 50 clients (iid and 2-class label
  skew), 10 taking part per round, each taking one full-batch SGD step (momentum 0.9) per round, server rate 1,
  AVG and GMA, for ``--convex-rounds`` rounds at each of ``--convex-lrs``: the paper's client rate 0.01 and
  notebook 03's 0.5. The metric is the paper's mean test accuracy over the last 10 rounds (and the best).
- ``fig4`` (Fig. 4, App. C.1): all of MNIST over 10 clients with Dirichlet(``--alphas``) label skew, FedAvg at
  the paper's settings (lr 0.05, momentum 0.9, batch 32, one epoch, every client every round); after each of
  ``--fig4-rounds`` rounds the 10 clients' next updates are read without changing anything, and the row is the
  share of coordinates whose sign agreement is below tau = 0.4 (notebook 03 reads it after 2 rounds).

The FedAvg runs checkpoint under ``--out-root`` (default runs/gma_appendix) and resume when killed; finished
comparisons, measurements and convex runs are reloaded. Rows go to results/gma/participation.csv, convex.csv and
fig4.csv (+ .json); ``python scripts/gma_table.py`` prints them beside the paper's numbers.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from fltutor import results
from fltutor.checkpoint import atomic_write_json
from fltutor.checks import SettingError
from fltutor.federation import Federation, sweep
from fltutor.scenarios import GMA_SETTINGS, below_tau, gma_data, gma_model, participation_round

TABLES = ("participation", "convex", "fig4")
# the FedAvg runs of Tables 4-5 and Fig. 4 are set up for this many rounds whatever --warmups / --fig4-rounds ask,
# so that a later call measuring later rounds resumes the same run (its checkpoint is keyed by its settings, rounds
# among them)
WARM_ROUNDS = 200


def check_args(a: argparse.Namespace) -> None:
    """Bad settings fail here, before any training, naming the setting, the value and what is allowed."""
    if any(not 0 < f < 1 for f in a.fractions):
        raise SettingError(f"--fractions: got {a.fractions}; each must lie in (0, 1): the share of the 10 clients in "
                           "the compared round (Table 4: 0.5, Table 5: 0.2)")
    if any(not 1 <= w < WARM_ROUNDS for w in a.warmups):
        raise SettingError(f"--warmups: got {a.warmups}; each must be a number of FedAvg rounds from 1 to "
                           f"{WARM_ROUNDS - 1}")
    if any(v <= 0 for v in a.alphas):
        raise SettingError(f"--alphas: got {a.alphas}; Dirichlet concentrations must be > 0 (0.01 very skewed, 100 "
                           "nearly iid)")
    if any(not 0 <= t < WARM_ROUNDS for t in a.fig4_rounds):
        raise SettingError(f"--fig4-rounds: got {a.fig4_rounds}; each is a number of FedAvg rounds from 0 to "
                           f"{WARM_ROUNDS - 1} before the updates are read")
    if a.convex_rounds < 10:
        raise SettingError(f"--convex-rounds: got {a.convex_rounds}; the metric is the mean of the last 10 rounds, "
                           "so at least 10")
    for name, vals in (("--lr", [a.lr]), ("--convex-lrs", a.convex_lrs)):
        if any(v <= 0 for v in vals):
            raise SettingError(f"{name}: got {vals}; learning rates must be > 0")


def participation(a: argparse.Namespace, out_root: Path) -> tuple[list[dict], str]:
    datas = [gma_data("fashionmnist", "label", 10, seed=s) for s in a.seeds]
    rows = []
    for frac in a.fractions:
        folder = out_root / f"participation-f{frac:g}-lr{a.lr:g}-s{'_'.join(map(str, a.seeds))}"
        warm = Federation(gma_model("fashionmnist", datas[0]), datas, "fedavg", runs=[{"seed": s} for s in a.seeds],
                          rounds=WARM_ROUNDS, client_fraction=frac, local_epochs=3, batch_size=32, lr=a.lr,
                          momentum=GMA_SETTINGS["momentum"], eval_every=WARM_ROUNDS, out_dir=folder / "warm",
                          checkpoint_every=1, progress=not a.no_progress)
        for w in sorted(a.warmups):
            done = folder / f"compare-w{w}.json"
            if done.exists():
                got = json.loads(done.read_text())
                print(f"fraction {frac:g}, warm-up {w}: reloaded {done}")
            else:
                if warm.round > w:
                    raise SettingError(f"--warmups: the warm run in {folder} is at round {warm.round}, past {w}, but "
                                       f"{done.name} is missing; delete {folder} to train again")
                warm.run(rounds=w)
                got = participation_round(warm, tau=GMA_SETTINGS["tau"])
                atomic_write_json(done, got)
            for s, o in zip(a.seeds, got):
                ids = {"dataset": "fashionmnist", "skew": "label", "clients": 10, "client_fraction": frac,
                       "warmup_rounds": w, "local_epochs": 3, "lr": a.lr, "momentum": GMA_SETTINGS["momentum"],
                       "batch_size": 32, "tau": GMA_SETTINGS["tau"], "seed": s}
                for name in ("AVG", "GMA"):
                    pair = None if o is None else o[name]
                    rows += [{**ids, "aggregation": name, "metric": m, "value": None if pair is None else round(v, 4)}
                             for m, v in zip(("participating_acc", "nonparticipating_acc"), pair or (None, None))]
                    if pair is None:   # diverged in the warm-up (o is None) or in the compared round
                        d = warm.diverged[a.seeds.index(s)] if o is None else o["diverged"][name]
                        rows.append({**ids, "aggregation": name, "metric": "diverged_round", "value": d["round"]})
                shown = {n: "diverged" if o is None or o[n] is None else "{:.2f} / {:.2f}".format(*o[n])
                         for n in ("AVG", "GMA")}
                print(f"fraction {frac:g}, warm-up {w}, seed {s}: participating / non-participating  "
                      f"AVG {shown['AVG']}  GMA {shown['GMA']}")
    return rows, datas[0].source


def convex(a: argparse.Namespace, out_root: Path) -> tuple[list[dict], str]:
    rows = []
    for skew in ("iid", "label"):
        datas = [gma_data("mnist", skew, 50, seed=s) for s in a.convex_seeds]
        full_batch = max(len(t) for d in datas for t in d.train)   # one step on all of a client's data
        for lr in a.convex_lrs:
            kw = dict(rounds=a.convex_rounds, client_fraction=0.2, local_epochs=1, batch_size=full_batch, lr=lr,
                      momentum=GMA_SETTINGS["momentum"], eval_every=1, out_root=out_root,
                      label=f"convex-mnist-{skew}50", progress=not a.no_progress)
            for agg, (method, extra) in {"AVG": ("fedavg", {}),
                                         "GMA": ("fedopt", {"aggregation": "gma", "tau": GMA_SETTINGS["tau"]})}.items():
                out = sweep("logreg", datas, method, [{"seed": s} for s in a.convex_seeds], **kw, **extra)
                for s, r in zip(a.convex_seeds, out):
                    ids = {"dataset": "mnist", "skew": skew, "clients": 50, "client_fraction": 0.2, "lr": lr,
                           "server_lr": 1.0, "momentum": GMA_SETTINGS["momentum"], "rounds": a.convex_rounds,
                           "seed": s, "aggregation": agg}
                    d = r["diverged"]
                    rows += [{**ids, "metric": m, "value": None if d else round(r[m], 4)}
                             for m in ("last10_global_acc", "best_global_acc")]
                    if d:
                        rows.append({**ids, "metric": "diverged_round", "value": d["round"]})
                        print(f"convex {skew} lr {lr:g} seed {s} {agg}: diverged in round {d['round']}")
                        continue
                    print(f"convex {skew} lr {lr:g} seed {s} {agg}: last 10 {r['last10_global_acc']:.2f}, "
                          f"best {r['best_global_acc']:.2f}")
    return rows, datas[0].source


def fig4(a: argparse.Namespace, out_root: Path) -> tuple[list[dict], str]:
    rows, source = [], None
    for alpha in a.alphas:
        datas = [gma_data("mnist", "dirichlet", 10, seed=s, alpha=alpha) for s in a.fig4_seeds]
        source = datas[0].source
        fed = Federation(gma_model("mnist", datas[0]), datas, "fedavg", runs=[{"seed": s} for s in a.fig4_seeds],
                         rounds=WARM_ROUNDS, client_fraction=1.0, eval_every=WARM_ROUNDS,
                         out_dir=out_root / f"fig4-alpha{alpha:g}-s{'_'.join(map(str, a.fig4_seeds))}",
                         progress=not a.no_progress, **{k: GMA_SETTINGS[k] for k in
                                                        ("lr", "momentum", "batch_size", "local_epochs")})
        for t in sorted(a.fig4_rounds):
            done = fed.out_dir / f"below-r{t}.json"
            if done.exists():
                got = json.loads(done.read_text())
            else:
                if fed.round > t:
                    raise SettingError(f"--fig4-rounds: the run in {fed.out_dir} is at round {fed.round}, past {t}, but "
                                       f"{done.name} is missing; delete {fed.out_dir} to measure again")
                fed.run(rounds=t)
                got = [None if fed.diverged[i] else below_tau(fed, tau=GMA_SETTINGS["tau"], run=i)
                       for i in range(fed.R)]
                atomic_write_json(done, got)
            for s, v in zip(a.fig4_seeds, got):
                rows.append({"dataset": "mnist", "skew": "dirichlet", "clients": 10, "alpha": alpha, "after_rounds": t,
                             "lr": GMA_SETTINGS["lr"], "tau": GMA_SETTINGS["tau"], "seed": s,
                             "metric": "fraction_agreement_below_tau", "value": None if v is None else round(v, 6)})
                print(f"Fig. 4 alpha {alpha:g}, after {t} rounds, seed {s}: "
                      + ("diverged" if v is None else f"{100 * v:.1f} % of coordinates below tau"))
    return rows, source


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", nargs="+", default=list(TABLES), choices=TABLES)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="Tables 4-5's trials (paper: 3)")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.2])
    ap.add_argument("--warmups", type=int, nargs="+", default=[10, 20])
    ap.add_argument("--lr", type=float, default=0.01, help="client lr of Tables 4-5 (0.05 diverges with 3 epochs)")
    ap.add_argument("--convex-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--convex-lrs", type=float, nargs="+", default=[0.01, 0.5])
    ap.add_argument("--convex-rounds", type=int, default=500)
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.01, 0.1, 1.0, 10.0, 100.0])
    ap.add_argument("--fig4-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--fig4-rounds", type=int, nargs="+", default=[2])
    ap.add_argument("--out-root", default="runs/gma_appendix")
    ap.add_argument("--results-dir", default=str(Path(results.RESULTS_DIR) / "gma"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    check_args(a)
    command = " ".join(["python scripts/gma_appendix.py", *(sys.argv[1:] if argv is None else argv)])
    for table in a.tables:
        t0 = time.time()
        rows, source = {"participation": participation, "convex": convex, "fig4": fig4}[table](a, Path(a.out_root))
        whole = "full data" if source == "torchvision" else f"{source} data, not the full datasets"
        meta = results.provenance(command=command, wall_s=time.time() - t0, data_source=source,
                                  scale=whole + {"participation": f", warm-ups of {a.warmups} FedAvg rounds",
                                                 "convex": f", {a.convex_rounds} rounds",
                                                 "fig4": f", after {a.fig4_rounds} FedAvg rounds"}[table])
        if not a.no_write:
            print("wrote", *results.write_table(Path(a.results_dir), table, rows, meta))


if __name__ == "__main__":
    main()
