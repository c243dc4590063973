"""SCAFFOLD (Karimireddy et al. 2020, Alg. 1, option II).

The server keeps a control variate c, each client its own c_i (private). Every local step
uses the gradient g - c_i + c. After training, a client sets
c_i+ = c_i - c + (x - y_i) / (K lr), K its number of local steps, and sends its model and
c_i+ - c_i. The server moves the model like FedOpt (server SGD at rate ``server_lr``, or an
adaptive optimizer and GMA's mask) and sets c <- c + sum (c_i+ - c_i) / N.
``weighting``: the model update averages clients by sample count ("samples") or equally
("uniform", the weighted-averaging WAFFLE paper's Alg. 2 with alpha_i = 1/N).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import aggregators
from ..checks import option
from ..engine import broadcast
from .base import Job, Method, Round
from .fedopt import FedOptParams, server_step


@dataclass
class ScaffoldParams(FedOptParams):
    weighting: str = "samples"    # samples or uniform

    def __post_init__(self):
        super().__post_init__()
        option("weighting", self.weighting, ("samples", "uniform"))


def control_update(c_i, c, start, trained, n_steps, lr):
    """c_i+ = c_i - c + (x - y_i) / (K lr) for every row, (P, ...) (option II)."""
    scale = (n_steps.to(lr.dtype) * lr)
    return {k: c_i[k] - c[k] + (start[k] - trained[k]) / broadcast(scale, trained[k]) for k in trained}


class Scaffold(Method):
    """SCAFFOLD: control variates correct every local gradient for client drift."""
    name = "scaffold"
    Params = ScaffoldParams
    message_holds = "the client's whole trained model and the change of its control variate c_i"
    client_keeps = "its data and its control variate c_i"
    server_holds = "the global model and the control variate c"
    sends = ("c.",)               # the server's control variate travels with the model

    def init_server(self, global_params, num_clients):
        return {f"c.{k}": torch.zeros_like(v) for k, v in global_params.items()}

    def init_private(self, global_params, num_clients):
        return {f"c_i.{k}": torch.zeros(num_clients, *v.shape, dtype=v.dtype, device=v.device)
                for k, v in global_params.items()}

    def client_update(self, job: Job):
        names = list(job.start)
        c = job.server
        c_i = {k: job.private[f"c_i.{k}"] for k in names}
        c_rows = {k: c[f"c.{k}"] for k in names}
        corr = {k: c_rows[k] - c_i[k] for k in names}                        # g - c_i + c
        trained, _, loss = job.train(prox_mu=job.hp.get("mu"), correction=corr)
        c_plus = control_update(c_i, c_rows, job.start, trained, job.batches.n_steps, job.hp["lr"])
        message = {**trained, **{f"dc.{k}": c_plus[k] - c_i[k] for k in names}}
        return message, {f"c_i.{k}": c_plus[k] for k in names}, loss

    def aggregate(self, global_params, server, message, rnd: Round):
        trained = {k: message[k] for k in global_params}
        weights = rnd.sizes if self.params.weighting == "samples" else torch.ones_like(rnd.sizes)
        new, _ = server_step(self.params, global_params, server, trained, weights)
        for k in global_params:  # c <- c + (1/N) sum over the cohort of (c_i+ - c_i)
            server[f"c.{k}"] = server[f"c.{k}"] + message[f"dc.{k}"].sum(0) / rnd.num_clients
        return new
