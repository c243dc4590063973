"""Time one round of WAFFLe's MNIST setting: cohort engine vs the per-client reference loop.

    python benchmarks/cohort_speed.py [--clients 12] [--samples 240] [--repeats 3]

12 clients with about 240 local training samples each (the multimodal MNIST split: 300
samples per client, 80% for training), E = 5, B = 10, the 784-200-10 MLP, plain SGD.
Both engines run the same round in the same process, after one warm-up round each; the
best of ``--repeats`` is kept. The last line is ``speedup N.Nx``.
"""
from __future__ import annotations

import argparse
import time

import torch

from fltutor.client import client_generator, get_params, stack_params, train_client, train_cohort
from fltutor.models import make_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--samples", type=int, default=240)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    g = torch.Generator().manual_seed(0)
    n = args.clients * args.samples
    shape = (3, 32, 32) if "cifar" in args.model else (1, 28, 28)
    x, y = torch.randn(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)
    idx = [torch.arange(c * args.samples, (c + 1) * args.samples) for c in range(args.clients)]
    model = make_model(args.model, seed=0)
    start = get_params(model)
    kw = dict(local_epochs=5, batch_size=10, lr=0.04)

    def loop():
        return [train_client(model, start, x[i], y[i], generator=client_generator(0, 0, c), **kw)[0]
                for c, i in enumerate(idx)]

    def cohort():
        gens = [client_generator(0, 0, c) for c in range(args.clients)]
        return train_cohort(model, stack_params(start, args.clients), x, y, idx, generators=gens, **kw)[0]

    def best(fn):
        fn()  # warm-up: first calls pay for lazy initialisation in torch
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        return min(times), out

    t_loop, ref = best(loop)
    t_cohort, out = best(cohort)
    err = max((out[k][c] - ref[c][k]).abs().max().item() for c in range(args.clients) for k in start)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.clients} clients x "
          f"{args.samples} samples, E=5, B=10, {args.model}")
    print(f"per-client loop: {t_loop:.3f} s/round   cohort engine: {t_cohort:.3f} s/round   "
          f"max |difference| {err:.1e}")
    print(f"speedup {t_loop / t_cohort:.1f}x")


if __name__ == "__main__":
    main()
