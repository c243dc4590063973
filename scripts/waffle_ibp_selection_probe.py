"""Can private factor selections alone personalize a trained WAFFLe (weight-factorization) dictionary?

Notebook 02 found that Algorithm 2 taken literally (SGD at the shared rate, KL at its ELBO
weight) leaves every client's q(b) at the prior. This probe separates "the dictionary cannot
express the minority's task" from "the selections are not trained enough": it trains (or
reloads) that literal run, freezes the shared dictionary, and then fits only the selection
logits of a few minority clients on their own training data, without the KL. The local test
accuracy before and after is printed for each client.

    FLTUTOR_DATA=/path/to/datasets python scripts/waffle_ibp_selection_probe.py
    python scripts/waffle_ibp_selection_probe.py --quick      # bundled data, about a minute
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
from torch.func import functional_call

from fltutor import experiments, ibp
from fltutor.factorized import FactorizedSimulation, layer_alphas
from fltutor.simulate import FedConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="30 rounds on the bundled data instead of the paper's 100")
    ap.add_argument("--clients", type=int, default=5, help="how many minority clients to probe")
    ap.add_argument("--epochs", type=int, default=5, help="epochs of selection-only training per client")
    ap.add_argument("--lr", type=float, default=0.1, help="Adam rate for the selection logits")
    ap.add_argument("--out-root", default="runs/paper", help="where the literal WAFFLe run is kept")
    a = ap.parse_args()
    if a.clients < 1 or a.epochs < 1 or not a.lr > 0:
        raise ValueError(f"need --clients >= 1, --epochs >= 1 and --lr > 0, got {a.clients}, {a.epochs}, {a.lr}")

    seed, lr = 0, experiments.WAFFLE_SETTINGS["mnist"]["lr"]
    fed = experiments.waffle_data("mnist", "multimodal", seed=seed)
    cfg = FedConfig(method="ibp", seed=seed, lr=lr, rounds=30 if a.quick else 100, client_fraction=0.1,
                    local_epochs=5, batch_size=10, eval_every=5)   # Algorithm 2 as written
    sim = FactorizedSimulation("mlp", fed, cfg, out_dir=experiments.run_dir(a.out_root, "mnist", "multimodal", cfg, fed),
                               progress=True)
    sim.run()  # reloads a finished run
    num_factors = sim.model.fc1.num_factors
    prior = ibp.prior_mean_pi(layer_alphas(sim.model, cfg.alpha_ratio)["fc1"], num_factors)
    pi = torch.sigmoid(sim.private["fc1.pi_logit"])
    print(f"data: {fed.source}; after {sim.round} rounds, largest |q(b=1) - prior mean| over all clients: "
          f"{(pi - prior).abs().max().item():.3f}")

    gen = torch.Generator().manual_seed(seed)
    minority = np.flatnonzero(np.asarray(fed.groups) == 1)[: a.clients]
    for k in minority:
        xt, yt = fed.x[torch.as_tensor(fed.train[k])], fed.y[torch.as_tensor(fed.train[k])]
        xv, yv = fed.x[torch.as_tensor(fed.test[k])], fed.y[torch.as_tensor(fed.test[k])]

        def accuracy(b):
            with torch.no_grad():
                out = functional_call(sim.model, sim.global_params, (xv, {"fc1": b}))
            return 100.0 * (out.argmax(1) == yv).double().mean().item()

        logit = sim.private["fc1.pi_logit"][k].clone().requires_grad_(True)
        opt = torch.optim.Adam([logit], lr=a.lr)
        before = accuracy(torch.sigmoid(logit))
        for _ in range(a.epochs):
            perm = torch.randperm(len(yt), generator=gen)
            for i in range(0, len(yt), cfg.batch_size):
                j = perm[i:i + cfg.batch_size]
                b = ibp.relaxed_bernoulli_sample(logit, cfg.temperature, torch.rand(num_factors, generator=gen))
                loss = torch.nn.functional.cross_entropy(
                    functional_call(sim.model, sim.global_params, (xt[j], {"fc1": b})), yt[j])
                opt.zero_grad()
                loss.backward()
                opt.step()
        print(f"minority client {k} (classes {sorted(set(yt.tolist()))}): local accuracy {before:.1f}% with its "
              f"trained selection -> {accuracy(torch.sigmoid(logit.detach())):.1f}% after {a.epochs} epochs "
              "of selection-only Adam")


if __name__ == "__main__":
    main()
