"""What scoring costs in one of GMA's Tables 2-3 rounds, and what ``eval_global=False`` saves a selection run.

    python benchmarks/eval_share.py [--clients 500] [--rounds 4] [--threads 1 [2 ...]]

One round of GMA's 500-client setting (FedAvg, LeNet-5, 10 clients a round, one local epoch at batch 32; 60,000
stand-in training images of FMNIST's shape, 10 % of each client's held out, a 10,000-image test split), on this
process's CPU threads, timed three ways: scored every round as the tables are (the clients' held-out splits and
the test split), scored as notebook 03's learning-rate selection scores (held-out splits only, ``eval_global=False``),
and not scored at all. Prints seconds per round, each part's share, and as the last line ``speedup N.Nx``: a
selection round against a fully scored one. With several ``--threads`` it measures each in turn and adds, before
that line, each thread count's fully scored round against the first's (what ``scripts/cpu_jobs.sh``'s THREADS buys
one job). Stand-in images cost what real ones do; no dataset is read.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from fltutor import data
from fltutor.federation import Federation


def seconds_per_round(fed_data, clients: int, rounds: int, **scoring) -> float:
    fed = Federation("lenet5", fed_data, "fedopt", rounds=rounds + 2, client_fraction=10 / clients, local_epochs=1,
                     batch_size=32, lr=0.05, momentum=0.9, server_lr=1.0, aggregation="gma", seed=0, progress=False,
                     **scoring)
    fed.run_round()                        # warm-up; rounds + 2 so that no timed round is the last (always scored)
    t = time.perf_counter()
    for _ in range(rounds):
        fed.run_round()
    return (time.perf_counter() - t) / rounds


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--threads", type=int, nargs="+", default=[1],
                    help="torch CPU threads, each measured in turn (the background jobs use 1)")
    a = ap.parse_args(argv)
    bad = [t for t in a.threads if not 1 <= t <= (os.cpu_count() or 1)]
    if bad:
        raise SystemExit(f"--threads: got {bad}; each must be from 1 to this machine's {os.cpu_count()} CPU threads")
    train = data.standin("fashionmnist", 60000, seed=0)
    test = data.standin("fashionmnist", 10000, train=False, seed=0)
    parts = np.array_split(np.random.default_rng(0).permutation(60000), a.clients)
    fed_data = data.make_federated(train, parts, test_fraction=0.1, seed=0, test_set=test)
    fulls, first = {}, None
    for threads in a.threads:
        torch.set_num_threads(threads)
        full = seconds_per_round(fed_data, a.clients, a.rounds)
        held_out = seconds_per_round(fed_data, a.clients, a.rounds, eval_global=False)
        bare = seconds_per_round(fed_data, a.clients, a.rounds, eval_every=10**6)
        fulls[threads] = full
        first = first or full / held_out
        print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s), {a.clients} clients, 10 a round, "
              f"{a.rounds} rounds each")
        print(f"scored as the tables are (held-out + test split): {full:.3f} s/round")
        print(f"scored as a selection is (held-out only):         {held_out:.3f} s/round")
        print(f"not scored:                                       {bare:.3f} s/round")
        print(f"shares of a fully scored round: training {bare / full:.0%}, "
              f"held-out splits {(held_out - bare) / full:.0%}, test split {(full - held_out) / full:.0%}")
    for threads in a.threads[1:]:
        print(f"{threads} threads against {a.threads[0]}: {fulls[a.threads[0]] / fulls[threads]:.2f}x "
              "for a fully scored round")
    print(f"speedup {first:.1f}x")


if __name__ == "__main__":
    main()
