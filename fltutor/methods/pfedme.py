"""pFedMe (Dinh et al. 2020, Alg. 1): personalized models through Moreau envelopes.

For each mini-batch a client's personal model theta takes ``pfedme_steps`` gradient steps on
f(theta; batch) + lam/2 ||theta - w||^2 (theta carries over between batches, as in the
authors' code), then its local copy of the global model moves w <- w - lr lam (w - theta).
The server mixes w <- (1 - beta) w + beta avg(w_i), the average weighted by training samples
as in the authors' code (Alg. 1 writes the plain mean over the sampled clients). A client
scores with its own theta (the global model until it has trained once).

Who trains: in Alg. 1 (and the authors' code) every client trains every round and the server then
samples whose w_i it averages, so every theta moves every round. ``pfedme_train_all=True`` does that
(a round then costs N clients' training, not C * N). The default, False, trains only the sampled
cohort, as every other method here does: each theta moves only in the rounds its client is drawn.
The package's pFedMe tables so far ran with the default.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import aggregators
from ..checks import check_fields
from ..engine import broadcast, forward, keep_inactive, local_steps, row_loss
from .base import EvalModel, Job, Method


@dataclass
class PFedMeParams:
    pfedme_lambda: float = 15.0   # Moreau-envelope weight lam
    pfedme_steps: int = 5         # K inner steps on theta per mini-batch
    pfedme_lr: float = 0.1        # personal learning rate of the inner problem
    pfedme_beta: float = 1.0      # server mixing
    pfedme_train_all: bool = False  # True: every client trains every round, the sampled ones are averaged (Alg. 1)

    def __post_init__(self):
        check_fields(self, {"pfedme_steps": dict(low=1, hint="Dinh et al. use 5"),
                            "pfedme_lambda": dict(low=0, low_open=True, hint="Dinh et al. use 15"),
                            "pfedme_lr": dict(low=0, low_open=True, hint="Dinh et al. use 0.1"),
                            "pfedme_beta": dict(low=0, high=2, low_open=True, hint="Dinh et al. use 1")})


class PFedMe(Method):
    """pFedMe: a personal model per client, tied to the global one by a proximal term."""
    name = "pfedme"
    Params = PFedMeParams
    clips_gradients = False       # its own local step rule (grad_clip_norm is refused)
    message_holds = "the client's local copy w of the global model, after training"
    client_keeps = "its data and its personal model theta"

    @property
    def trains_every_client(self) -> bool:
        return self.params.pfedme_train_all

    def init_private(self, global_params, num_clients):
        return {f"theta.{k}": v.unsqueeze(0).repeat(num_clients, *([1] * v.ndim)) for k, v in global_params.items()}

    def client_update(self, job: Job):
        lam, plr, lr = job.hp["pfedme_lambda"], job.hp["pfedme_lr"], job.hp["lr"]
        K = self.params.pfedme_steps

        def step(st, xb, yb, w, s, on):
            wl, theta = st["w"], st["theta"]
            for _ in range(K):
                th = {k: t.detach().requires_grad_(True) for k, t in theta.items()}
                loss = row_loss(forward(job.model, th, xb), yb, w)                       # (P,)
                grads = torch.autograd.grad(loss.sum(), list(th.values()))
                with torch.no_grad():
                    theta = {k: th[k] - broadcast(plr, g) * (g + broadcast(lam, g) * (th[k] - wl[k]))
                             for k, g in zip(th, grads)}
            with torch.no_grad():
                wl = {k: wl[k] - broadcast(lr * lam, wl[k]) * (wl[k] - theta[k]) for k in wl}
            return keep_inactive({"w": wl, "theta": theta}, st, on), loss.detach()

        start = {k: v.detach() for k, v in job.start.items()}
        st, loss = local_steps({"w": start, "theta": dict(start)}, job.x, job.y, job.batches, step)
        return st["w"], {f"theta.{k}": v for k, v in st["theta"].items()}, loss

    def aggregate(self, global_params, server, message, rnd):
        avg = aggregators.fedavg(global_params, message, rnd.sizes)
        b = self.params.pfedme_beta
        return {k: (1 - b) * global_params[k] + b * avg[k] for k in avg}

    def eval_model(self, global_params, server, private, seen):
        return EvalModel({k: torch.where(seen.view(-1, *([1] * v.ndim)), private[f"theta.{k}"], v.unsqueeze(0))
                          for k, v in global_params.items()}, per_client=True)
