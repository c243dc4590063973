"""How large do LeNet-5's mini-batch gradients get? Alice's local training, ours (ReLU + max-pool) against the classic net.

    FLTUTOR_DATA=/path/to/datasets python scripts/lenet_gradient_norms.py [--epochs 10] [--images 480]

Trains each network alone on Alice's (agent 0's) share of distribution C with plain SGD at lr 0.1, batch 32,
from the same seed, and prints the median, 90th percentile and largest L2 norm of the mini-batch gradient
over all steps. The bound that ``grad_clip_norm`` imposes, and that the classic net's tanh units and average
pooling give by themselves, is what keeps SCAFFOLD's option-II control variates (the mean gradient along a
client's path) small: notebook 04, section 9b.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

from fltutor.models import make_model
from fltutor.scenarios import waffle_weighted_data


def gradient_norms(model: str, x: torch.Tensor, y: torch.Tensor, *, epochs: int, lr: float = 0.1, batch: int = 32,
                   seed: int = 0) -> np.ndarray:
    """The L2 norm of every mini-batch gradient (all parameters together) along plain SGD on (x, y)."""
    net = make_model(model, seed=seed)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    g, norms = torch.Generator().manual_seed(seed), []
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=g)
        for b in range(0, len(x), batch):
            j = order[b:b + batch]
            opt.zero_grad()
            F.cross_entropy(net(x[j]), y[j]).backward()
            norms.append(float(torch.sqrt(sum((p.grad ** 2).sum() for p in net.parameters()))))
            opt.step()
    return np.array(norms)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--images", type=int, default=480, help="Alice's training images (0: all of her share)")
    a = ap.parse_args(argv)
    if a.epochs < 1 or a.images < 0:
        ap.error(f"--epochs {a.epochs}, --images {a.images}: epochs >= 1 and images >= 0")
    fd = waffle_weighted_data("mnist", "C", seed=0, max_train_per_agent=a.images or None)
    idx = torch.as_tensor(fd.train[0])
    print(f"Alice on C: {len(idx)} images ({fd.source}), {a.epochs} epochs, SGD lr 0.1, batch 32")
    for model in ("lenet5", "lenet5_classic"):
        n = gradient_norms(model, fd.x[idx], fd.y[idx], epochs=a.epochs)
        print(f"{model:15s} {len(n)} steps: median {np.median(n):.2f}, 90th percentile {np.percentile(n, 90):.2f}, "
              f"largest {n.max():.2f}")


if __name__ == "__main__":
    main()
