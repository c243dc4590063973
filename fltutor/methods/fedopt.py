"""FedOpt (Reddi et al. 2021) with GMA's masks (Tenison et al. 2023, Alg. 2).

The server treats Delta = sum_n s_n / sum(s) (w_n - w) as a pseudo-gradient and steps with
SGD, Adagrad, Adam or Yogi (``aggregators.ServerOptimizer``). ``aggregation="gma"``
multiplies the final step by GMA's soft mask (eq. 3), computed from the sign agreement of
the clients' updates; ``"and"`` by the binary AND-mask (GMA App. D.2). Clients may add
FedProx's proximal term (``mu``). With server SGD at rate 1 and no mask this is FedAvg.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import aggregators
from ..checks import check_fields
from .base import Round
from .fedavg import FedAvg

AGGREGATIONS = ("mean", "gma", "and")


@dataclass
class FedOptParams:
    server_opt: str = "sgd"       # sgd, adagrad, adam, yogi
    server_lr: float = 1.0        # eta_g
    aggregation: str = "mean"     # mean, gma (soft mask) or and (binary AND-mask)
    tau: float = 0.4              # mask threshold (GMA uses 0.4)
    beta1: float = 0.9
    beta2: float = 0.99
    server_eps: float = 1e-3
    mu: float = 0.0               # FedProx's proximal weight on the clients

    def __post_init__(self):
        check_fields(self, {
            "server_opt": dict(allowed=aggregators.ServerOptimizer.KINDS), "aggregation": dict(allowed=AGGREGATIONS),
            "server_lr": dict(low=0, low_open=True), "tau": dict(low=0, high=1, hint="the GMA paper uses 0.4"),
            "beta1": dict(low=0, high=1, high_open=True), "beta2": dict(low=0, high=1, high_open=True),
            "server_eps": dict(low=0, low_open=True, hint="Reddi et al. use 1e-3"), "mu": dict(low=0)})
        aggregators.ServerOptimizer(self.server_opt, self.server_lr, beta1=self.beta1, beta2=self.beta2,
                                    eps=self.server_eps)  # validates the optimizer settings


def server_step(params: FedOptParams, global_params, server: dict, trained, sizes):
    """Pseudo-gradient, optional mask, server optimizer; the optimizer's moments live in ``server``."""
    updates = {k: v - global_params[k].unsqueeze(0) for k, v in trained.items()}      # (C, ...)
    delta = aggregators.weighted_mean(updates, sizes)
    mask = None
    if params.aggregation != "mean":  # every client one vote: signs of the unweighted updates
        fn = aggregators.gma_mask if params.aggregation == "gma" else aggregators.and_mask
        mask = {k: fn(u, params.tau) for k, u in updates.items()}
    opt = aggregators.ServerOptimizer(params.server_opt, params.server_lr, beta1=params.beta1,
                                      beta2=params.beta2, eps=params.server_eps)
    opt.load_state_dict({"m": {k[2:]: v for k, v in server.items() if k.startswith("m.")},
                         "v": {k[2:]: v for k, v in server.items() if k.startswith("v.")}})
    new = opt.step(global_params, delta, mask)
    server.update({f"m.{k}": v for k, v in opt.m.items()})
    server.update({f"v.{k}": v for k, v in opt.v.items()})
    return new, updates


class FedOpt(FedAvg):
    """FedOpt: a server optimizer on the clients' mean update, optionally GMA- or AND-masked."""
    name = "fedopt"
    server_holds = "the global model and the server optimizer's moments"
    Params = FedOptParams            # FedAvg's clients (with FedProx's mu); only the server differs
    server_only = ("aggregation",)   # AVG, GMA and AND-mask runs can share one batched sweep

    def aggregate(self, global_params, server, message, rnd: Round):
        return server_step(self.params, global_params, server, message, rnd.sizes)[0]
