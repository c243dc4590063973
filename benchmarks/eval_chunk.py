"""Evaluation speed against the number of samples per forward pass (``engine.eval_chunk``).

    python benchmarks/eval_chunk.py [--models lenet5 lenet5_rgb] [--samples 3000] [--repeats 3]

Scores one shared model on ``--samples`` stand-in images, split over 10 clients, with
``engine.client_accuracy`` at several chunk sizes, on this process's CPU threads. Prints microseconds per
image and the ratio of each chunk size to 20,000 (one pass, the accelerator default). Also checks that every
chunk size gives the same accuracies. The last line is ``speedup N.Nx``: 20,000 against the CPU default
(512) for the first model.
"""
from __future__ import annotations

import argparse
import time

import torch

from fltutor import engine
from fltutor.models import make_model

CHUNKS = (20000, 4096, 1024, 512, 256)


def measure(name: str, samples: int, repeats: int) -> dict[int, float]:
    model = make_model(name, seed=0)
    shape = {"lenet5": (1, 28, 28), "lenet5_rgb": (3, 28, 28), "lenet5_cifar": (3, 32, 32)}.get(name, (1, 28, 28))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(samples, *shape, generator=g), torch.randint(0, 10, (samples,), generator=g)
    parts = list(torch.arange(samples).chunk(10))
    params = engine.get_params(model)
    per_image, accs = {}, set()
    for c in CHUNKS:
        engine.client_accuracy(model, params, x, y, parts, per_client=False, chunk_samples=c)   # warm-up
        t = time.perf_counter()
        for _ in range(repeats):
            acc = engine.client_accuracy(model, params, x, y, parts, per_client=False, chunk_samples=c)
        per_image[c] = 1e6 * (time.perf_counter() - t) / repeats / samples
        accs.add(tuple(round(a, 6) for a in acc.tolist()))
    if len(accs) != 1:
        raise SystemExit(f"{name}: the chunk sizes gave different accuracies: {accs}")
    return per_image


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["lenet5", "lenet5_rgb"])
    ap.add_argument("--samples", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, {a.samples} images, "
          f"default chunk on this CPU: {engine.eval_chunk(make_model(a.models[0], seed=0), 'cpu')}")
    first = None
    for name in a.models:
        t = measure(name, a.samples, a.repeats)
        print(f"{name:12s} " + "  ".join(f"{c}: {v:5.1f} us/img ({t[20000] / v:.2f}x)" for c, v in t.items()))
        first = first or t
    print(f"speedup {first[20000] / first[512]:.1f}x")


if __name__ == "__main__":
    main()
