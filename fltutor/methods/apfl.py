"""APFL (Deng et al. 2020, Alg. 1): a global model, a local model and an adaptive mix per client.

Each step on one mini-batch: w <- w - lr grad f(w); with the mix m = a v + (1 - a) w,
v <- v - lr df(m)/dv and a <- a - lr df(m)/da, clipped to [0, 1]. A client scores with its mix
a v + (1 - a) w_global.
``weighting``: the server averages the clients' w by sample count ("samples", the default, as FedAvg
does and as every APFL run in results/ was trained) or equally ("uniform": Deng et al.'s Alg. 1, the
plain mean over the sampled clients, which their public code, FedTorch's ``fedavg_aggregation_centered``,
also takes). The two agree on equal-size clients.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import aggregators
from ..checks import check_fields, option
from ..engine import broadcast, forward, keep_inactive, local_steps, row_loss
from .base import WEIGHTINGS, EvalModel, Job, Method, Round


@dataclass
class APFLParams:
    apfl_alpha: float = 0.25      # initial mixing weight a
    weighting: str = "samples"    # the server's mean of the w's: by sample count, or "uniform" (Alg. 1)

    def __post_init__(self):
        check_fields(self, {"apfl_alpha": dict(low=0, high=1, hint="Deng et al. start at 0.25")})
        option("weighting", self.weighting, WEIGHTINGS)


class APFL(Method):
    """APFL: each client mixes the global model with its own local model, adaptively."""
    name = "apfl"
    Params = APFLParams
    clips_gradients = False       # its own local step rule (grad_clip_norm is refused)
    message_holds = "the client's trained copy w of the global model"
    client_keeps = "its data, its local model v and its mix alpha"
    server_only = ("weighting",)  # only the server's mean reads it: runs of one sweep may differ in it

    def init_private(self, global_params, num_clients):
        out = {f"v.{k}": v.unsqueeze(0).repeat(num_clients, *([1] * v.ndim)) for k, v in global_params.items()}
        dtype = next(iter(global_params.values())).dtype
        out["alpha"] = torch.full((num_clients,), self.params.apfl_alpha, dtype=dtype)
        return out

    def client_update(self, job: Job):
        lr = job.hp["lr"]
        names = list(job.start)

        def step(st, xb, yb, wt, s, on):
            pw = {k: t.detach().requires_grad_(True) for k, t in st["w"].items()}
            pv = {k: t.detach().requires_grad_(True) for k, t in st["v"].items()}
            a = st["a"]["alpha"].detach().requires_grad_(True)
            loss = row_loss(forward(job.model, pw, xb), yb, wt)                                # (P,)
            gw = torch.autograd.grad(loss.sum(), [pw[k] for k in names])
            mixed = {k: broadcast(a, pv[k]) * pv[k] + (1 - broadcast(a, pv[k])) * pw[k].detach() for k in names}
            grads = torch.autograd.grad(row_loss(forward(job.model, mixed, xb), yb, wt).sum(),
                                        [pv[k] for k in names] + [a])
            with torch.no_grad():
                w_new = {k: pw[k] - broadcast(lr, g) * g for k, g in zip(names, gw)}
                v_new = {k: pv[k] - broadcast(lr, g) * g for k, g in zip(names, grads[:-1])}
                a_new = (a - lr * grads[-1]).clamp(0, 1)
            return keep_inactive({"w": w_new, "v": v_new, "a": {"alpha": a_new}}, st, on), loss.detach()

        st = {"w": {k: v.detach() for k, v in job.start.items()},
              "v": {k: job.private[f"v.{k}"] for k in names}, "a": {"alpha": job.private["alpha"]}}
        st, loss = local_steps(st, job.x, job.y, job.batches, step)
        return st["w"], {**{f"v.{k}": v for k, v in st["v"].items()}, "alpha": st["a"]["alpha"]}, loss

    def aggregate(self, global_params, server, message, rnd: Round):
        weights = rnd.weights(self.params.weighting)
        return aggregators.fedavg(global_params, message, weights)

    def eval_model(self, global_params, server, private, seen):
        a = private["alpha"]
        return EvalModel({k: broadcast(a, private[f"v.{k}"]) * private[f"v.{k}"]
                          + (1 - broadcast(a, private[f"v.{k}"])) * v.unsqueeze(0)
                          for k, v in global_params.items()}, per_client=True)

    def round_log(self, server, private, seen):
        return {"apfl_alpha": [round(float(t), 4) for t in private["alpha"]]}
