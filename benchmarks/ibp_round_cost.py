"""Cost of one weight-factorization WAFFLe round against one FedAvg round on the same cohort.

    python benchmarks/ibp_round_cost.py [--model mlp] [--clients 12] [--samples 240] [--repeats 3]
                                        [--selection-optimizer adam] [--device cpu]

The same random data, the same cohort of ``--clients`` clients with ``--samples`` local
training samples, E = 5, B = 10, plain SGD, every client in every round. Each method is one
``fltutor.federation.Federation``: FedAvg trains the baseline model, "waffle_ibp" its
factorized twin (sampling b and v and adding the IBP KL every step; the private parameters
stepped with Adam at 0.1 and the KL weighted 0.1 as notebook 02 does, or with SGD at the
shared rate). A round is ``Federation.run_round``: the batch schedules, the cohort's local
training and the server's average, without evaluation. One warm-up round each, then the best
of ``--repeats``. Issue 3 asks for at most 2x; the last line is ``ratio N.NNx``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from fltutor.data import FederatedData
from fltutor.federation import Federation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp", choices=["mlp", "cnn_fashion", "cnn_cifar"])
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--samples", type=int, default=240)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--selection-optimizer", default="adam", choices=["adam", "sgd"],
                    help="how WAFFLe steps the private selections (notebook 02: adam at 0.1)")
    ap.add_argument("--device", default="cpu", help="'cpu', 'cuda', 'mps' or 'auto'")
    args = ap.parse_args()
    if args.clients < 1 or args.samples < 1 or args.repeats < 1:
        raise ValueError(f"need --clients, --samples and --repeats >= 1, got {args.clients}, {args.samples}, "
                         f"{args.repeats}")

    g = torch.Generator().manual_seed(0)
    n = args.clients * args.samples
    shape = (3, 32, 32) if args.model == "cnn_cifar" else (1, 28, 28)
    x, y = torch.randn(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)
    train = [np.arange(c * args.samples, (c + 1) * args.samples) for c in range(args.clients)]
    data = FederatedData(x, y, train, [np.zeros(0, dtype=np.int64)] * args.clients, source="random")
    # every client every round; no evaluation in the timed rounds
    common = dict(rounds=10_000, eval_every=10_000, client_fraction=1.0, local_epochs=5, batch_size=10, lr=0.04,
                  device=args.device, progress=False)
    waffle = dict(kl_weight=0.1, selection_optimizer=args.selection_optimizer,
                  selection_lr=0.1 if args.selection_optimizer == "adam" else None)
    feds = {"fedavg": Federation(args.model, data, "fedavg", **common),
            "waffle_ibp": Federation(args.model, data, "waffle_ibp", **common, **waffle)}
    cuda = feds["fedavg"].device.type == "cuda"

    def best(fed):
        fed.run_round()  # warm-up
        times = []
        for _ in range(args.repeats):
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            fed.run_round()
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        return min(times)

    t_avg, t_ibp = best(feds["fedavg"]), best(feds["waffle_ibp"])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {feds['fedavg'].device}, model "
          f"{args.model}, {args.clients} clients x {args.samples} samples, E=5, B=10, selections by "
          f"{args.selection_optimizer}")
    print(f"FedAvg round {t_avg:.3f} s, WAFFLe round {t_ibp:.3f} s")
    print(f"ratio {t_ibp / t_avg:.2f}x")


if __name__ == "__main__":
    main()
