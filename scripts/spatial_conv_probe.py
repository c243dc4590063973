"""Why WAFFLe's FMNIST CNN with the paper's parameter count diverges at the paper's rate: one client, both conv readings.

    FLTUTOR_DATA=/path/to/datasets python scripts/spatial_conv_probe.py [--lrs 0.02 0.01 0.005] [--client 27]

``conv_factorization="spatial"`` (the reading that gives the paper's 18,155 FMNIST weights) shares one k x k
kernel per output channel across all input channels, so conv2's kernel is tied over conv1's 16 maps and its
gradient is the sum of 16 copies. The full run at the paper's FMNIST rate, 0.02, diverged in round 1
(`configs/02_fmnist_questions.yaml -p conv_factorization spatial`, client 27). This probe trains that one
client alone (its share of seed 0's unimodal split, E = 5, B = 10, plain SGD on every weight, every factor
selected) from the same start in both readings, and prints the gradient norm of each W_b at the first step and
the loss along the way, so the two readings' step sizes can be compared without the federation around them.
"""
from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

from fltutor import layers


def local_run(x: torch.Tensor, y: torch.Tensor, *, conv_factorization: str, lr: float, epochs: int = 5,
              batch: int = 10, seed: int = 0) -> dict:
    """Plain SGD on the factorized FMNIST CNN with b = 1: W_b gradient norms at the first step, every step's loss."""
    net = layers.make_factorized_model("cnn_fashion", seed=seed, conv_factorization=conv_factorization)
    b = {name: torch.ones(f) for name, f in layers.factorized_layers(net).items()}
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    g, losses, first = torch.Generator().manual_seed(seed), [], None
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=g)
        for i in range(0, len(y), batch):
            j = order[i:i + batch]
            loss = F.cross_entropy(net(x[j], b), y[j])
            opt.zero_grad()
            loss.backward()
            if first is None:
                first = {n: float(p.grad.norm()) for n, p in net.named_parameters() if n.endswith("w_b")}
            opt.step()
            losses.append(loss.item())
    return {"grad_w_b": first, "losses": losses}


def summary(losses: list[float]) -> str:
    finite = [v for v in losses if math.isfinite(v)]
    if len(finite) < len(losses):
        return f"non-finite at step {next(i for i, v in enumerate(losses) if not math.isfinite(v)) + 1} of {len(losses)}"
    return f"first {losses[0]:.3f}, largest {max(losses):.3g}, mean of the last 10 {sum(losses[-10:]) / 10:.3f}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lrs", type=float, nargs="+", default=[0.02, 0.01, 0.005])
    ap.add_argument("--client", type=int, default=27, help="the client of seed 0's unimodal FMNIST split (110 clients)")
    a = ap.parse_args(argv)
    if any(not (lr > 0) for lr in a.lrs) or not 0 <= a.client < 110:
        ap.error(f"--lrs {a.lrs}, --client {a.client}: rates > 0, client in 0..109")
    from fltutor.scenarios import waffle_ibp_data
    fd = waffle_ibp_data("fashionmnist", "unimodal", seed=0)
    idx = torch.as_tensor(fd.train[a.client])
    x, y = fd.x[idx], fd.y[idx]
    print(f"client {a.client}: {len(y)} images of classes {sorted(set(y.tolist()))} ({fd.source}), E = 5, B = 10, plain SGD, b = 1")
    for lr in a.lrs:
        for fac in layers.CONV_FACTORIZATIONS:
            r = local_run(x, y, conv_factorization=fac, lr=lr)
            norms = ", ".join(f"{n.split('.')[0]} {v:.2f}" for n, v in r["grad_w_b"].items())
            print(f"lr {lr:g}  {fac:10s}  |grad W_b| at step 1: {norms};  loss: {summary(r['losses'])}")


if __name__ == "__main__":
    main()
