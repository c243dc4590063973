"""Cost of one weight-factorization WAFFLe round against one FedAvg round on the same cohort.

    python benchmarks/ibp_round_cost.py [--model mlp] [--clients 12] [--samples 240] [--repeats 3]
                                        [--selection-optimizer adam]

The same random data, the same cohort of ``--clients`` clients with ``--samples`` local
training samples, E = 5, B = 10, plain SGD; FedAvg trains the baseline model with
``client.train_cohort``, WAFFLe its factorized twin with ``factorized.train_factorized_cohort``
(sampling b and v and adding the IBP KL every step; the private parameters stepped with Adam
as notebook 02 does, or with SGD), each followed by its server average.
One warm-up round each, then the best of ``--repeats``. Issue 3 asks for at most 2x; the last
line is ``ratio N.NNx``.
"""
from __future__ import annotations

import argparse
import time

import torch

from fltutor import aggregators, factorized
from fltutor.client import client_generator, get_params, stack_params, train_cohort
from fltutor.layers import make_factorized_model
from fltutor.models import make_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp", choices=["mlp", "cnn_fashion", "cnn_cifar"])
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--samples", type=int, default=240)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--selection-optimizer", default="adam", choices=["adam", "sgd"],
                    help="how WAFFLe steps the private selections (notebook 02: adam at 0.1)")
    args = ap.parse_args()

    g = torch.Generator().manual_seed(0)
    n = args.clients * args.samples
    shape = (3, 32, 32) if args.model == "cnn_cifar" else (1, 28, 28)
    x, y = torch.randn(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)
    idx = [torch.arange(c * args.samples, (c + 1) * args.samples) for c in range(args.clients)]
    sizes = torch.full((args.clients,), float(args.samples))
    kw = dict(local_epochs=5, batch_size=10, lr=0.04)
    gens = lambda: [client_generator(0, 0, c) for c in range(args.clients)]

    base = make_model(args.model, seed=0)
    w0 = get_params(base)
    fz = make_factorized_model(args.model, seed=0)
    s0 = get_params(fz)
    p0 = factorized.init_private(fz, args.clients, "ibp", 0.8)

    def fedavg_round():
        trained, _ = train_cohort(base, stack_params(w0, args.clients), x, y, idx, generators=gens(), **kw)
        return aggregators.fedavg(w0, trained, sizes)

    def ibp_round():
        msg, _, _ = factorized.train_factorized_cohort(fz, stack_params(s0, args.clients), p0, x, y, idx,
                                                       method="ibp", alpha_ratio=0.8, temperature=2 / 3,
                                                       l1_weight=0.0, generators=gens(), kl_weight=0.1,
                                                       selection_optimizer=args.selection_optimizer,
                                                       selection_lr=0.1 if args.selection_optimizer == "adam" else None,
                                                       **kw)
        return factorized.aggregate(s0, msg)

    def best(fn):
        fn()  # warm-up
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    t_avg, t_ibp = best(fedavg_round), best(ibp_round)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, model {args.model}, "
          f"{args.clients} clients x {args.samples} samples, E=5, B=10, selections by {args.selection_optimizer}")
    print(f"FedAvg round {t_avg:.3f} s, WAFFLe round {t_ibp:.3f} s")
    print(f"ratio {t_ibp / t_avg:.2f}x")


if __name__ == "__main__":
    main()
