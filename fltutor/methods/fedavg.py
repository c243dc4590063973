"""FedAvg (McMahan et al. 2017) and FedProx (Li et al. 2020) as its option.

FedProx changes only the client: its local objective adds (mu/2) ||w - w_global||^2
(Li et al. 2020, eq. 2), whose gradient mu (w - w_global) the engine adds at every step.
mu = 0 is FedAvg. The server takes the sample-weighted mean of the client models.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..checks import check_fields
from .base import Job, Method


@dataclass
class FedAvgParams:
    mu: float = 0.0               # FedProx's proximal weight; 0 is FedAvg

    def __post_init__(self):
        check_fields(self, {"mu": dict(low=0, hint="0 is FedAvg; FedProx's paper uses 0.001-1")})


class FedAvg(Method):
    """FedAvg; with mu > 0, FedProx."""
    name = "fedavg"
    Params = FedAvgParams

    def client_update(self, job: Job):
        trained, _, loss = job.train(prox_mu=job.hp["mu"])
        return trained, {}, loss
