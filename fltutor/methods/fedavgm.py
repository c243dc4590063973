"""FedAvgM (Hsu, Qi and Brown 2019): FedAvg with momentum on the server.

The server keeps a velocity v of the clients' mean update Delta (sample-weighted) and steps
v <- beta v + Delta, w <- w + server_lr v. beta = 0 and server_lr = 1 is FedAvg. The README's
"Adding a method" walks through this file as the example.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import aggregators
from ..checks import check_fields
from .base import Method, Round


@dataclass
class FedAvgMParams:
    server_momentum: float = 0.9  # beta
    server_lr: float = 1.0        # eta_g

    def __post_init__(self):
        check_fields(self, {"server_momentum": dict(low=0, high=1, high_open=True, hint="Hsu et al. use 0.9"),
                            "server_lr": dict(low=0, low_open=True)})


class FedAvgM(Method):
    """FedAvgM: the server accumulates the clients' mean update with momentum."""
    name = "fedavgm"
    Params = FedAvgMParams
    server_holds = "the global model and the server's momentum"

    def init_server(self, global_params, num_clients):
        return {f"v.{k}": torch.zeros_like(p) for k, p in global_params.items()}   # the velocity

    def aggregate(self, global_params, server, message, rnd: Round):
        updates = {k: message[k] - global_params[k].unsqueeze(0) for k in global_params}   # (C, ...)
        delta = aggregators.weighted_mean(updates, rnd.sizes)
        new = {}
        for k, w in global_params.items():
            server[f"v.{k}"] = self.params.server_momentum * server[f"v.{k}"] + delta[k]
            new[k] = w + self.params.server_lr * server[f"v.{k}"]
        return new
