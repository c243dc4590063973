"""Can private factor selections alone personalize a trained WAFFLe (weight-factorization) dictionary?

Notebook 02 found that Algorithm 2 taken literally (SGD at the shared rate, KL at its ELBO
weight: ``WaffleIBPParams()``'s defaults) leaves every client's q(b) at the prior. This probe
separates "the dictionary cannot express the minority's task" from "the selections are not
trained enough": it trains (or reloads) that literal run as a ``Federation``, freezes the shared
dictionary, and then fits only the selection logits of a few minority clients on their own
training data, without the KL. The local test accuracy before and after is printed for each
client. The run's checkpoint is ``<out-root>/federations/mnist-multimodal-waffle_ibp-<key>``,
named as notebook 02 names its WAFFLe Federation, so a rerun reloads it.

    FLTUTOR_DATA=/path/to/datasets python scripts/waffle_ibp_selection_probe.py
    python scripts/waffle_ibp_selection_probe.py --quick      # bundled data
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from torch.func import functional_call

from fltutor import ibp, layers
from fltutor.federation import Federation, cell_key
from fltutor.methods.waffle_ibp import WaffleIBPParams, init_private, selection_of
from fltutor.scenarios import WAFFLE_IBP_SETTINGS, waffle_ibp_data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="30 rounds on the bundled data instead of the paper's 100")
    ap.add_argument("--clients", type=int, default=5, help="how many minority clients to probe")
    ap.add_argument("--epochs", type=int, default=5, help="epochs of selection-only training per client")
    ap.add_argument("--lr", type=float, default=0.1, help="Adam rate for the selection logits")
    ap.add_argument("--out-root", default="runs/paper", help="where the literal WAFFLe run is kept")
    ap.add_argument("--device", default="auto", help="'auto' (CUDA, MPS, CPU), 'cpu' or 'cuda'")
    a = ap.parse_args()
    if a.clients < 1 or a.epochs < 1 or not a.lr > 0:
        raise ValueError(f"need --clients >= 1, --epochs >= 1 and --lr > 0, got {a.clients}, {a.epochs}, {a.lr}")

    seed, model = 0, WAFFLE_IBP_SETTINGS["mnist"]["model"]
    fed = waffle_ibp_data("mnist", "multimodal", seed=seed)
    literal = WaffleIBPParams()   # Algorithm 2 as written: SGD at the shared rate, the full ELBO
    ibp_kw = {k: getattr(literal, k) for k in ("alpha_ratio", "num_factors", "temperature", "selection_lr",
                                                  "selection_optimizer", "kl_weight")}
    settings = {"rounds": 30 if a.quick else 100, "client_fraction": 0.1, "local_epochs": 5, "batch_size": 10,
                "lr": WAFFLE_IBP_SETTINGS["mnist"]["lr"], "eval_every": 5, **ibp_kw}
    key = cell_key("waffle_ibp", {"settings": settings, "seeds": [seed], "data": [fed.fingerprint]}, model, fed)
    run = Federation(model, fed, "waffle_ibp", seed=seed, device=a.device, progress=True,
                     out_dir=Path(a.out_root) / "federations" / f"mnist-multimodal-waffle_ibp-{key}", **settings)
    run.run()  # reloads a finished run
    widths = layers.factorized_layers(run.model)              # {layer: F}
    lay = next(iter(widths))
    private = {k: v[0] for k, v in run.private.items()}       # run 0's private state, {name: (N, F)}
    pi = selection_of(private, "ibp", widths)[lay]             # (N, F)
    prior = selection_of(init_private(widths, 1, "ibp", literal.alpha_ratio), "ibp", widths)[lay]   # (1, F)
    print(f"data: {fed.source}; after {run.round} rounds, largest |q(b=1) - prior mean| over all clients: "
          f"{(pi - prior.to(pi)).abs().max().item():.3f}")

    params = run.run_params(0)                                 # the shared dictionary, frozen
    dev, gen = run.device, torch.Generator().manual_seed(seed)
    minority = np.flatnonzero(np.asarray(fed.groups) == 1)[: a.clients]
    for k in minority:
        tr, te = torch.as_tensor(fed.train[k]), torch.as_tensor(fed.test[k])
        xt, yt = fed.x[tr].to(dev, run.dtype), fed.y[tr].to(dev)
        xv, yv = fed.x[te].to(dev, run.dtype), fed.y[te].to(dev)

        def accuracy(b):
            with torch.no_grad():
                out = functional_call(run.model, params, (xv, {lay: b}))
            return 100.0 * (out.argmax(1) == yv).double().mean().item()

        logit = private[f"{lay}.pi_logit"][k].clone().requires_grad_(True)   # (F,)
        opt = torch.optim.Adam([logit], lr=a.lr)
        before = accuracy(torch.sigmoid(logit))
        for _ in range(a.epochs):
            perm = torch.randperm(len(yt), generator=gen)
            for i in range(0, len(yt), settings["batch_size"]):
                j = perm[i:i + settings["batch_size"]].to(dev)
                u = torch.rand(widths[lay], generator=gen).to(dev, run.dtype)
                b = ibp.relaxed_bernoulli_sample(logit, literal.temperature, u)
                loss = torch.nn.functional.cross_entropy(functional_call(run.model, params, (xt[j], {lay: b})), yt[j])
                opt.zero_grad()
                loss.backward()
                opt.step()
        print(f"minority client {k} (classes {sorted(set(yt.tolist()))}): local accuracy {before:.1f}% with its "
              f"trained selection -> {accuracy(torch.sigmoid(logit.detach())):.1f}% after {a.epochs} epochs "
              "of selection-only Adam")


if __name__ == "__main__":
    main()
