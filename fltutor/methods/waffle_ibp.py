"""Weight-factorization WAFFLe (Hao et al., IEEE Access 2022) and its L1 ablation (Table 8).

Not the weighted-averaging WAFFLE of ``waffle_weighted``. Every client's model is drawn from
one shared dictionary (``fltutor.layers``): W_i = W_a diag(r * b_i) W_b. The client update
(Algorithms 1-2) maximizes the ELBO of eq. 11 on its own data, stepping the shared W_a, W_b,
r with SGD and its *private* variational parameters (pi, c, d) with their own rule. Only the
shared part is sent; the private selections stay with the client.

- ``selection="ibp"``: b_i is a concrete (relaxed Bernoulli) sample from q(b) = Bernoulli(pi),
  v ~ Kumaraswamy(c, d), and the IBP prior regularizes both (``fltutor.ibp``).
- ``selection="l1"``: b_i is replaced by real per-client factor scores s_i with an L1
  penalty l1_weight * ||s_i||_1 (the non-Bayesian ablation).

Choices the paper leaves open (notebook 02 checks their effect): alpha = alpha_ratio * F per
layer; concrete temperature 2/3; the KL of eq. 11 is scaled by 1/|D_i| per mini-batch, so each
mini-batch loss (mean cross-entropy + KL/|D_i|) estimates -ELBO/|D_i|; private parameters start
at the prior (pi_k = prior mean, c = alpha, d = 1, so Kumaraswamy(c, d) = Beta(alpha, 1)
exactly); a seen client scores with
b_i = pi_i (the posterior mean), an unseen one with the prior mean (alpha / (1 + alpha))^k; the
server averages the clients' dictionaries weighted by their sample counts (the paper says only that
they are averaged; a plain mean, the same on equal-size clients).
Two more decide the result: the step rule of the private parameters (``selection_optimizer``,
``selection_lr``) and the KL's weight (``kl_weight``). The defaults are Algorithm 2 as
written (one SGD rate, the full ELBO); notebook 02 explains why it uses Adam at 0.1 and a
KL weight of 0.1 instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from .. import aggregators, ibp
from ..checks import check_fields
from ..engine import broadcast
from ..layers import CONV_FACTORIZATIONS, factorized_layers, make_factorized_model
from .base import EvalModel, Job, Method

SELECTIONS = ("ibp", "l1")
PRIVATE_SUFFIXES = {"ibp": ("pi_logit", "log_c", "log_d"), "l1": ("score",)}


@dataclass
class WaffleIBPParams:
    selection: str = "ibp"        # "ibp" (WAFFLe) or "l1" (the ablation of Table 8)
    num_factors: Optional[int] = None  # F of every factorized layer; None: the paper's per model
    alpha_ratio: float = 0.8      # IBP alpha = alpha_ratio * F per layer (the paper reports alpha / F)
    temperature: float = 2 / 3    # concrete relaxation of b (not given in the paper)
    kl_weight: float = 1.0        # weight of the IBP KL (1: the ELBO; 0: the data term only)
    l1_weight: float = 1.0        # selection "l1": weight of the L1 penalty on the scores
    selection_optimizer: str = "sgd"   # step rule of the private parameters: "sgd" or "adam"
    selection_lr: Optional[float] = None  # their rate; None: the client lr
    hard_selection: bool = False  # score seen clients with b = 1[pi > 0.5] instead of pi (a diagnostic)
    conv_factorization: str = "appendix_a"   # "spatial": W_b spans only k x k (the paper's FMNIST count)

    def __post_init__(self):
        check_fields(self, {
            "selection": dict(allowed=SELECTIONS), "selection_optimizer": dict(allowed=("sgd", "adam")),
            "conv_factorization": dict(allowed=CONV_FACTORIZATIONS),
            "num_factors": dict(low=1, hint="None: the paper's F for the model"),
            "selection_lr": dict(low=0, low_open=True, hint="None: the client lr"),
            "alpha_ratio": dict(low=0, low_open=True, hint="the paper's Table 9 uses alpha/F in 0.4..1"),
            "temperature": dict(low=0, low_open=True), "kl_weight": dict(low=0), "l1_weight": dict(low=0)})


def init_private(widths: dict, num_clients: int, selection: str, alpha_ratio: float) -> dict:
    """Every client's private state at the prior, {"layer.suffix": (N, F)}; widths is {layer: F}."""
    out = {}
    for name, f in widths.items():
        if selection == "ibp":
            alpha = alpha_ratio * f
            pi = ibp.prior_mean_pi(alpha, f, dtype=torch.float64).clamp(1e-4, 1 - 1e-4)
            out[f"{name}.pi_logit"] = torch.log(pi / (1 - pi)).repeat(num_clients, 1)
            out[f"{name}.log_c"] = torch.full((num_clients, f), float(np.log(alpha)))
            out[f"{name}.log_d"] = torch.zeros(num_clients, f)
        else:
            out[f"{name}.score"] = torch.ones(num_clients, f)
    return out


def selection_of(private: dict, selection: str, layers) -> dict:
    """The factor selection b used at evaluation: pi (ibp) or the scores (l1), {layer: (..., F)}."""
    if selection == "ibp":
        return {l: torch.sigmoid(private[f"{l}.pi_logit"]) for l in layers}
    return {l: private[f"{l}.score"] for l in layers}


class WaffleIBP(Method):
    """Weight-factorization WAFFLe: a shared rank-1 dictionary, private IBP factor selections."""
    name = "waffle_ibp"
    Params = WaffleIBPParams
    message_holds = "the shared dictionary W_a, W_b, r after the client's training; not which factors it uses"
    client_keeps = "its data and its factor selection q(b) (pi, c, d)"
    server_holds = "the shared dictionary, with no client's selection"

    def build_model(self, model, seed):
        if not isinstance(model, str):
            raise ValueError("waffle_ibp: pass the baseline model's name (e.g. 'mlp'); its factorized twin is "
                             "built from fltutor.layers")
        net = make_factorized_model(model, seed=seed, num_factors=self.params.num_factors,
                                    conv_factorization=self.params.conv_factorization)
        self.widths = factorized_layers(net)       # {layer: F}
        return net

    def init_private(self, global_params, num_clients):
        like = next(iter(global_params.values()))
        return {k: v.to(like.device, like.dtype) for k, v in
                init_private(self.widths, num_clients, self.params.selection, self.params.alpha_ratio).items()}

    def client_update(self, job: Job):
        p, hp = self.params, job.hp
        layers, widths = list(self.widths), list(self.widths.values())
        f_tot, P, S = sum(widths), len(job.generators), job.batches.steps
        noise = torch.full((P, S, 2 * f_tot), 0.5, dtype=torch.float64)   # (P, S, 2F): uniforms for b, then v
        for c, g in enumerate(job.generators):
            n = int(job.batches.n_steps[c])
            noise[c, :n] = torch.rand(n, 2 * f_tot, generator=g)
        noise = noise.to(job.x.device, job.x.dtype)
        n_train = job.sizes.to(job.x.dtype)                                 # (P,) |D_i|
        temp = hp["temperature"].view(-1, 1)                                # (P, 1)
        alphas = {l: hp["alpha_ratio"].view(-1, 1) * f for l, f in self.widths.items()}

        def split(s, lo):
            return dict(zip(layers, noise[:, s, lo: lo + f_tot].split(widths, dim=1)))   # {layer: (P, F)}

        def inputs(q, s):
            if p.selection == "ibp":
                u_b = split(s, 0)
                return ({l: ibp.relaxed_bernoulli_sample(q[f"{l}.pi_logit"], temp, u_b[l]) for l in layers},)
            return ({l: q[f"{l}.score"] for l in layers},)

        def extra_loss(q, s):   # the regularizer / |D_i| per mini-batch, (P,)
            if p.selection == "ibp":
                u_v = split(s, f_tot)
                reg = sum(ibp.ibp_kl(q[f"{l}.pi_logit"], q[f"{l}.log_c"].exp(), q[f"{l}.log_d"].exp(),
                                     alphas[l], u_v[l]) for l in layers) * hp["kl_weight"]
            else:
                reg = sum(q[f"{l}.score"].abs().sum(-1) for l in layers) * hp["l1_weight"]
            return reg / n_train

        def project(q):  # keep the Kumaraswamy parameters where sampling is exact
            return {k: v if k.endswith(("pi_logit", "score")) else v.clamp(-6.0, 8.0) for k, v in q.items()}

        trained, private, loss = job.train(private=job.private, private_optimizer=p.selection_optimizer,
                                           private_lr=hp.get("selection_lr", hp["lr"]), inputs=inputs,
                                           extra_loss=extra_loss, project=project)
        return trained, private, loss   # the message holds the shared dictionary only

    def aggregate(self, global_params, server, message, rnd):
        missing = set(global_params) ^ set(message)
        if missing:
            raise ValueError(f"waffle_ibp: the message's parameters differ from the global ones in {sorted(missing)}; "
                             "a client must send exactly the shared dictionary")
        return aggregators.fedavg(global_params, message, rnd.sizes)

    def unseen_selection(self, like) -> dict:
        """b of a client that never trained: the IBP prior mean (ibp) or the initial scores 1 (l1)."""
        out = {}
        for l, f in self.widths.items():
            b = (ibp.prior_mean_pi(self.params.alpha_ratio * f, f, dtype=like.dtype) if self.params.selection == "ibp"
                 else torch.ones(f, dtype=like.dtype))
            out[l] = b.to(like.device, like.dtype)
        return out

    def client_selection(self, private, seen) -> dict:
        """b of every client at evaluation, {layer: (N, F)}: its own if seen, else the unseen one."""
        own = selection_of(private, self.params.selection, self.widths)
        if self.params.hard_selection:
            own = {l: (b > 0.5).to(b.dtype) for l, b in own.items()}
        unseen = self.unseen_selection(next(iter(own.values())))
        return {l: torch.where(seen.view(-1, 1), own[l], unseen[l].unsqueeze(0)) for l in self.widths}

    def eval_model(self, global_params, server, private, seen):
        return EvalModel(global_params, per_client=False, inputs=(self.client_selection(private, seen),))

    def global_model(self, global_params, server):
        return global_params, (self.unseen_selection(next(iter(global_params.values()))),)

    def round_log(self, server, private, seen, threshold: float = 0.5):
        """Mean number of factors per seen client with b > threshold, per layer."""
        b = selection_of(private, self.params.selection, self.widths)
        if not bool(seen.any()):
            return {"active_factors": {l: 0.0 for l in self.widths}}
        return {"active_factors": {l: float((b[l][seen].abs() > threshold).sum(1).double().mean())
                                   for l in self.widths}}
