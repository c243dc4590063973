"""q-FedAvg (Li et al. 2020, "Fair resource allocation in federated learning", Alg. 2).

Clients train as in FedAvg and also report F_k, their training loss under the model they
received; the server reweights their updates by F_k^q (``aggregators.qffl``), so clients
with a high loss pull harder. q = 0 is FedAvg with equal client weights.

Sampling: Alg. 2 draws client k with probability p_k = n_k / n (the objective weights each
F_k^(q+1) by p_k), so there q = 0 is FedAvg weighted by size. This package samples every method's
cohort uniformly, so here each client counts equally; on equal-size clients (the WAFFLe splits,
notebook 05's) the two are the same.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import aggregators
from ..checks import check_fields
from ..engine import row_losses
from .base import Job, Method, Round


@dataclass
class QFFLParams:
    q: float = 0.001              # fairness exponent (WAFFLe's experiments use 0.001)

    def __post_init__(self):
        check_fields(self, {"q": dict(low=0, hint="q = 0 is FedAvg with equal client weights")})


class QFFL(Method):
    """q-FedAvg: loss-reweighted updates with step size from L = 1 / lr."""
    name = "qffl"
    Params = QFFLParams
    message_holds = "the client's whole trained model and its loss under the model it received"

    def client_update(self, job: Job):
        start_loss = row_losses(job.model, job.start, job.x, job.y, job.train_parts)   # (P,) F_k at w
        trained, _, loss = job.train()
        return {**trained, "start_loss": start_loss}, {}, loss

    def aggregate(self, global_params, server, message, rnd: Round):
        start_loss = message["start_loss"]
        trained = {k: v for k, v in message.items() if k != "start_loss"}
        return aggregators.qffl(global_params, trained, start_loss, lr=self.config.lr, q=self.params.q)
