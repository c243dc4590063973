"""DP-FedAvg (McMahan, Ramage, Talwar and Zhang, "Learning differentially private recurrent
language models", ICLR 2018): FedAvg with client-level differential privacy.

Each sampled client k trains exactly as in FedAvg, starting from the global model w, and
clips its update Delta_k = w_k - w to L2 norm at most S, taken over all parameters together
(the paper's flat clipping, Alg. 1 ClipFn):

    clip(Delta_k) = Delta_k * min(1, S / ||Delta_k||_2)

and sends the clipped model w + clip(Delta_k). The server sums the clipped updates, adds
Gaussian noise scaled to the sum's sensitivity S, divides by the expected cohort size
m = round(client_fraction * N) (the paper's fixed denominator qW with w_k = 1, W = N, so that
one client changes the sum by at most S whatever the cohort), and steps:

    Delta = (sum_k clip(Delta_k) + N(0, (z S)^2 I)) / m,      w <- w + server_lr * Delta

The privacy loss after T rounds is the sampled Gaussian mechanism at rate q = m / N with noise
multiplier z, composed T times; ``epsilon`` reads it off opacus's RDP accountant.

Deviations from the paper, all named:

- Sampling: the paper samples each client independently with probability q (Poisson), so the
  cohort size varies; this package samples a fixed-size cohort of m clients without
  replacement. The fixed denominator m equals the cohort size here, and ``epsilon`` (which
  assumes Poisson sampling) is the usual approximation with q = m / N, not an exact bound.
- Local steps: the paper's client projects its model back into the S-ball around w after every
  mini-batch step (Alg. 1, UserUpdateFedAvg: theta <- theta_0 + ClipFn(theta - theta_0)); here the
  client trains as in FedAvg and clips its update once, at the end. The message's sensitivity is S
  either way, so epsilon is the same; the trained models differ whenever a path leaves the ball.
- Weights: uniform (w_k = 1); the paper also allows capped per-user weights min(n_k / w_hat, 1).
  Per-layer clipping (the paper's other ClipFn) is not implemented.
- Accounting: the paper uses the moments accountant; opacus's RDP accountant computes the same
  sampled-Gaussian RDP and converts it to (epsilon, delta) with Balle et al. 2020, Thm. 21
  (slightly tighter than the classical conversion).
- ``server_lr``: the paper steps with server_lr = 1 (the default). Any other value is
  post-processing and leaves epsilon unchanged.
- Trust: clipping runs on the client (it is in the message) and noise on the server (central
  DP: the server is trusted; an intercepted message carries no noise). The server does not
  re-clip, as in the paper.
- Noise source: drawn from a ``torch.Generator`` seeded from (seed, round), so runs are
  reproducible. That suits a simulation only; a deployment needs a secret, cryptographically
  secure source, since anyone who knows the seed can subtract the noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..checks import check_fields, integer, number
from ..engine import Params
from .base import Job, Method, Round

__all__ = ["DPFedAvgParams", "DPFedAvg", "clip_updates", "noise_generator", "epsilon"]

NOISE_STREAM = 0xD9F0   # tells the server's noise stream apart from the clients' (engine.client_generator)


@dataclass
class DPFedAvgParams:
    clip_norm: float = 1.0        # S, the L2 bound on each client's update
    noise_multiplier: float = 1.0  # z: the noise std on the sum is z S; 0 clips without privacy
    delta: float = 1e-5           # the delta epsilon is reported at
    server_lr: float = 1.0        # eta_g; 1 is the paper

    def __post_init__(self):
        check_fields(self, {
            "clip_norm": dict(low=0, low_open=True, hint="the bound S on each client's update norm"),
            "noise_multiplier": dict(low=0, hint="0 clips without noise (no privacy); McMahan et al. use about 1"),
            "delta": dict(low=0, high=1, low_open=True, high_open=True, hint="usually below 1 / num_clients"),
            "server_lr": dict(low=0, low_open=True)})


def clip_updates(updates: Params, clip_norm: Tensor | float) -> Params:
    """Each row's update scaled by min(1, S / ||row||_2), the norm over all its tensors together.

    updates: {name: (P, ...)}; clip_norm: a number or (P,) one bound per row.
    """
    P = next(iter(updates.values())).shape[0]
    sq = sum(v.reshape(P, -1).pow(2).sum(1) for v in updates.values())           # (P,)
    norm = sq.sqrt()                                                               # (P,)
    s = torch.as_tensor(clip_norm, dtype=norm.dtype, device=norm.device)
    factor = torch.clamp(s / norm, max=1.0)    # (P,); a zero update gives inf -> 1
    return {k: v * factor.reshape((P,) + (1,) * (v.ndim - 1)).to(v.dtype) for k, v in updates.items()}


def noise_generator(seed: int, round_: int) -> torch.Generator:
    """The CPU generator of the server's noise in one round of one run (a stream of its own)."""
    key = np.random.SeedSequence([seed, round_, NOISE_STREAM]).generate_state(1, np.uint64)[0]
    g = torch.Generator()
    g.manual_seed(int(key) % 2**63)
    return g


def expected_cohort(client_fraction: float, num_clients: int) -> int:
    """m = round(C N), at least 1: the cohort size of ``Federation.sample_clients``."""
    return max(1, int(round(client_fraction * num_clients)))


def epsilon(noise_multiplier: float, sample_rate: float, rounds: int, delta: float) -> float:
    """The epsilon of ``rounds`` sampled Gaussian steps (rate q, noise multiplier z) at ``delta``.

    opacus's RDP accountant (history (z, q, rounds), its default orders, Balle et al. 2020's
    conversion). It assumes Poisson sampling at rate q; this package samples a fixed-size cohort
    without replacement, so with q = m / N the value is the usual approximation. z = 0: inf;
    rounds = 0: 0.
    """
    z = number("noise_multiplier", noise_multiplier, low=0)
    q = number("sample_rate", sample_rate, low=0, high=1, low_open=True, hint="q = cohort size / num_clients")
    t = integer("rounds", rounds, low=0)
    d = number("delta", delta, low=0, high=1, low_open=True, high_open=True)
    if t == 0:
        return 0.0
    if z == 0:
        return math.inf
    from opacus.accountants import RDPAccountant   # lazy: opacus is heavy and only the accountant needs it
    acc = RDPAccountant()
    acc.history = [(z, q, t)]
    return float(acc.get_epsilon(delta=d))


class DPFedAvg(Method):
    """DP-FedAvg: clipped client updates, Gaussian noise on their sum at the server."""
    name = "dp_fedavg"
    Params = DPFedAvgParams
    message_holds = "the client's trained model with its update clipped to norm S (no noise: the server adds it)"
    client_keeps = "its data"
    server_holds = "the global model, noised before release"

    def init_server(self, global_params, num_clients):
        return {"rounds": 0, "num_clients": num_clients}

    def client_update(self, job: Job):
        trained, _, loss = job.train()
        update = {k: trained[k] - job.start[k] for k in trained}                   # (P, ...)
        clipped = clip_updates(update, job.hp["clip_norm"])                       # (P, ...)
        return {k: job.start[k] + clipped[k] for k in trained}, {}, loss

    def aggregate(self, global_params, server, message, rnd: Round):
        p = self.params
        m = expected_cohort(self.config.client_fraction, rnd.num_clients)
        total = {k: (message[k] - global_params[k].unsqueeze(0)).sum(0) for k in global_params}   # (...) the sum
        if p.noise_multiplier > 0:
            g = noise_generator(self.config.seed, rnd.round)
            for k, w in global_params.items():   # N(0, (z S)^2 I), drawn on the CPU in float64
                noise = torch.randn(w.shape, generator=g, dtype=torch.float64) * (p.noise_multiplier * p.clip_norm)
                total[k] = total[k] + noise.to(w.device, w.dtype)
        server["rounds"] = rnd.round + 1
        server["num_clients"] = rnd.num_clients
        return {k: w + p.server_lr * total[k] / m for k, w in global_params.items()}

    def round_log(self, server, private, seen):
        n = server["num_clients"]
        q = expected_cohort(self.config.client_fraction, n) / n
        return {"epsilon": epsilon(self.params.noise_multiplier, q, server["rounds"], self.params.delta)}
