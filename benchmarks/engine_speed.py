"""Client-rounds per second and peak memory: per-client loop, cohort, and sweeps, on one device.

    python benchmarks/engine_speed.py [--device auto] [--models mlp cnn_fashion lenet5] [--rounds 2]

One client-round is one client's local training in one round: E = 5 epochs over 240 samples in
batches of B = 10 (120 SGD steps). For each model it measures, in this process's device:
- ``loop``: the per-client reference loop (``engine.train_client``), 12 clients one after another;
- ``cohort``: one round of 12 clients as one batched job (``Federation.run_round``);
- ``sweep``: 10 runs x 12 clients as one batched job (rows P = 120);
- on a GPU also 10 runs x 120 clients (P = 1,200).
Each measurement runs in a fresh subprocess, so the peak memory is that measurement's own
(resident set size on the CPU, ``torch.cuda.max_memory_allocated`` on a GPU). Ratios are against
the loop on the same device. On the CPU it also prints how far the sweep is from the memory-
bandwidth bound (the bytes an SGD step must move at least, over the measured copy bandwidth).
The last line is ``speedup N.Nx``: the 10 x 12 MLP sweep against the loop.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

SAMPLES, EPOCHS, BATCH = 240, 5, 10


def _setup(model: str, clients: int, device: str):
    import torch
    from fltutor import data, engine
    name = "fashionmnist" if model == "cnn_fashion" else "mnist"
    ds = data.standin(name, clients * SAMPLES, seed=0)
    parts = [list(range(k * SAMPLES, (k + 1) * SAMPLES)) for k in range(clients)]
    import numpy as np
    fed = data.FederatedData(ds.x, ds.y, [np.array(p[:SAMPLES]) for p in parts], [np.array(p[:1]) for p in parts])
    return torch, engine, fed, engine.resolve_device(device)


def measure(kind: str, model: str, rows: int, device: str, rounds: int) -> dict:
    """One measurement (run in a subprocess): seconds per round and peak memory."""
    runs = 1 if kind != "sweep" else 10
    clients = rows // runs
    torch, engine, fed, dev = _setup(model, clients, device)
    from fltutor.federation import Federation, grid
    from fltutor.models import make_model
    cuda = dev.type == "cuda"
    if kind == "loop":
        net = make_model(model, seed=0).to(dev)
        x, y = fed.x.to(dev), fed.y.to(dev)
        params = engine.get_params(net)
        parts = [torch.as_tensor(t).to(dev) for t in fed.train]

        def one(r):
            outs = [engine.train_client(net, params, x[i], y[i], local_epochs=EPOCHS, batch_size=BATCH, lr=0.05,
                                        generator=engine.client_generator(0, r, k)) for k, i in enumerate(parts)]
            return {k: torch.stack([o[0][k] for o in outs]).mean(0) for k in params}
    else:
        fedr = Federation(model, fed, "fedavg", runs=grid(seed=list(range(runs))), device=dev, progress=False,
                          rounds=10_000, eval_every=10_000, client_fraction=1.0, local_epochs=EPOCHS,
                          batch_size=BATCH, lr=0.05)

        def one(r):
            fedr.run_round()
    one(0)  # warm-up (allocations, kernels)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    for r in range(1, rounds + 1):
        one(r)
    if cuda:
        torch.cuda.synchronize()
    sec = (time.perf_counter() - t) / rounds
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    n_params = sum(p.numel() for p in make_model(model, seed=0).parameters())
    return {"kind": kind, "model": model, "rows": rows, "sec_per_round": sec, "client_rounds_per_s": rows / sec,
            "peak_mb": peak / 2**20, "device": str(dev), "params": n_params}


def copy_bandwidth(device: str) -> float:
    """GB/s of a large tensor copy (read + write counted) on the device."""
    import torch
    from fltutor.engine import resolve_device
    dev = resolve_device(device)
    a = torch.empty(64 * 2**20, device=dev)   # 256 MB
    b = torch.empty_like(a)
    b.copy_(a)
    t = time.perf_counter()
    for _ in range(5):
        b.copy_(a)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return 5 * 2 * a.numel() * 4 / (time.perf_counter() - t) / 1e9


def _child(args) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(args)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn_fashion", "lenet5"])
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per measurement (after one warm-up)")
    ap.add_argument("--json", help="also write every measurement to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(measure(**json.loads(a.child))))
        return
    import torch
    from fltutor.engine import resolve_device
    dev = resolve_device(a.device)
    gpu = dev.type == "cuda"
    name = torch.cuda.get_device_name(dev) if gpu else f"CPU, {torch.get_num_threads()} threads"
    print(f"device: {dev} ({name}); torch {torch.__version__}; E={EPOCHS}, B={BATCH}, {SAMPLES} samples per client")
    plan = [("loop", 12), ("cohort", 12), ("sweep", 120)] + ([("sweep", 1200)] if gpu else [])
    rows_out, speed = [], None
    bw = copy_bandwidth(a.device)
    for model in a.models:
        res = [_child({"kind": k, "model": model, "rows": r, "device": a.device, "rounds": a.rounds}) for k, r in plan]
        base = res[0]["client_rounds_per_s"]
        print(f"\n{model} ({res[0]['params']:,} parameters)")
        print(f"  {'':16s} {'rows':>5s} {'s/round':>9s} {'client-rounds/s':>16s} {'vs loop':>8s} {'peak MB':>9s}")
        for r in res:
            label = f"sweep (10 x {r['rows'] // 10})" if r["kind"] == "sweep" else r["kind"]
            print(f"  {label:16s} {r['rows']:5d} {r['sec_per_round']:9.3f} {r['client_rounds_per_s']:16.1f} "
                  f"{r['client_rounds_per_s'] / base:7.1f}x {r['peak_mb']:9.0f}")
            r["vs_loop"] = r["client_rounds_per_s"] / base
        sw = res[2]
        if not gpu:
            # an SGD step reads each row's weights in forward and backward, writes the gradient, then reads
            # weights and gradient and writes the weights: at least 6 passes over P x params x 4 bytes
            steps = EPOCHS * SAMPLES // BATCH
            gb = 6 * sw["rows"] * sw["params"] * 4 * steps / 1e9
            print(f"  memory-bandwidth bound of the sweep: >= {gb:.2f} GB per round at {bw:.1f} GB/s copy "
                  f"bandwidth = {gb / bw:.3f} s; measured {sw['sec_per_round']:.3f} s "
                  f"({sw['sec_per_round'] / (gb / bw):.1f}x the bound)")
        if model == "mlp":
            speed = sw["vs_loop"]
        rows_out += res
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "copy_gb_s": bw, "rows": rows_out}, f, indent=1)
    if speed is not None:
        print(f"\nspeedup {speed:.1f}x")


if __name__ == "__main__":
    main()
