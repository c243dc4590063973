"""Weighted-averaging WAFFLE (Beaussart et al. 2021, Alg. 2): SCAFFOLD with agent weights.

Not the weight-factorization WAFFLe of ``waffle_ibp``. Every agent trains the target's
model with SCAFFOLD's corrected gradients; the server combines both the model updates and
the control-variate updates with the distance-based weights of ``aggregators.waffle_weights``
(Alg. 1), averaged over the current and the last two rounds (Alg. 1 line 10). As the rounds
pass, the weights concentrate on the target and training turns local.

``c_rule``: how the server's control variate c moves. "increments" (the paper's Alg. 2): c += sum_i
alpha_i (c_i+ - c_i). With weights that change every round, that c is no longer the weighted mean of
the c_i: summing by parts, c = sum_i alpha_i^r c_i^r - sum_t sum_i (alpha_i^(t+1) - alpha_i^t) c_i^t, a
residual of past weights and past variates that stays in c. Once the target's weight reaches 1 the
residual freezes, and the target's own local steps keep a correction c - c_target that no longer
vanishes. "weighted_mean" (ours, not the paper's): each agent also sends c_i+, and the server sets
c = sum_i alpha_i c_i+ from the current round's messages, so c - c_target -> 0 as training turns local.
The server keeps no c_i either way.

``nonfinite``: fltutor stops a run at the first non-finite number of any agent ("stop"). The agent that
goes first is often one whose weight is already 0 (the farthest from the target always gets alpha^0 = 0),
so "set_aside" (ours) lets the run go on without it: from that round on the agent's update and control
change are left out and its weight is 0, as if it had left the federation. The run still stops if the
target itself, or the server step, turns non-finite.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import aggregators
from ..checks import check_fields, option
from ..engine import broadcast
from .base import Round, check_target
from .scaffold import CONTROLS, Scaffold


C_RULES = ("increments", "weighted_mean")


@dataclass
class WaffleWeightedParams:
    target: int = 0               # the agent the model is for ("Alice")
    delta_omega: float = 3.2      # the schedule's steepness, WAFFLE's single hyper-parameter
    server_lr: float = 1.0        # eta_g
    control: str = "II"           # SCAFFOLD's renewal of c_i (the paper's Alg. 2: "II"; "I": the gradient at x)
    c_rule: str = "increments"    # how c moves: "increments" (the paper's Alg. 2) or "weighted_mean" (ours)
    nonfinite: str = "stop"       # an agent whose training turns non-finite: "stop" the run, or "set_aside" (ours)

    def __post_init__(self):
        check_fields(self, {"target": dict(low=0), "delta_omega": dict(low=0, low_open=True, hint="the paper uses 3.2"),
                            "server_lr": dict(low=0, low_open=True)})
        option("control", self.control, CONTROLS)
        option("c_rule", self.c_rule, C_RULES)
        option("nonfinite", self.nonfinite, ("stop", "set_aside"),
               "set_aside leaves such an agent out of the weights and every later round (it stays non-finite)")


class WaffleWeighted(Scaffold):
    """Weighted-averaging WAFFLE: SCAFFOLD whose updates are weighted by distance to the target."""
    name = "waffle_weighted"
    Params = WaffleWeightedParams
    message_holds = "the agent's whole trained model and the change of its control variate c_i"
    client_keeps = "its data and its control variate c_i"
    server_holds = "the target agent's model, the control variate c and every agent's weight"
    full_participation = True

    def init_server(self, global_params, num_clients):
        check_target(self.params.target, num_clients)
        dev = next(iter(global_params.values())).device
        return {**super().init_server(global_params, num_clients),
                "alpha_hist": torch.full((2, num_clients), float("nan"), dtype=torch.float64, device=dev)}

    @property
    def sets_aside_nonfinite(self):
        return self.params.nonfinite == "set_aside"

    def aggregate(self, global_params, server, message, rnd: Round):
        dev = next(iter(message.values())).device
        ok = torch.ones(len(rnd.clients), dtype=torch.bool, device=dev) if rnd.finite is None else rnd.finite.to(dev)
        if not bool(ok[self.params.target]):            # the target's own model: nothing to go on with
            return {k: torch.full_like(v, float("nan")) for k, v in global_params.items()}
        message = {k: torch.where(broadcast(ok, v), v, torch.zeros_like(v)) for k, v in message.items()}
        updates = {k: message[k] - global_params[k].unsqueeze(0) for k in global_params}   # (N, ...)
        kept = torch.nonzero(ok).flatten()
        a0 = torch.zeros(len(ok), dtype=torch.float64)
        a0[kept.cpu()] = aggregators.waffle_weights({k: v[kept] for k, v in updates.items()},
                                                    int((kept == self.params.target).nonzero()), rnd.round + 1,
                                                    self.config.rounds, delta_omega=self.params.delta_omega).cpu()
        a0 = a0.to(server["alpha_hist"].device)
        known = [h for h in server["alpha_hist"] if not torch.isnan(h).any()]
        w = torch.stack(known + [a0]).mean(0)                                               # (N,)
        if not bool(ok.all()):          # an agent set aside now may still carry weight from earlier rounds
            w = w * ok.to(w)
            w = w / w.sum()
        server["alpha_hist"] = torch.stack([server["alpha_hist"][1], a0])
        server["weights"] = w
        step = aggregators.weighted_mean(updates, w)
        if self.params.c_rule == "weighted_mean":
            c_new = aggregators.weighted_mean({k: message[f"ci.{k}"] for k in global_params}, w)
            for k in global_params:
                server[f"c.{k}"] = c_new[k]
        else:
            dc = aggregators.weighted_mean({k: message[f"dc.{k}"] for k in global_params}, w)
            for k in global_params:
                server[f"c.{k}"] = server[f"c.{k}"] + dc[k]
        return {k: global_params[k] + self.params.server_lr * step[k] for k in global_params}

    def client_update(self, job):
        message, private, loss = super().client_update(job)
        if self.params.c_rule == "weighted_mean":   # the renewed variate itself, for c = sum_i alpha_i c_i+
            message = {**message, **{"ci." + k.removeprefix("c_i."): v for k, v in private.items()}}
        return message, private, loss

    def round_log(self, server, private, seen):
        return {"weights": [round(float(w), 5) for w in server["weights"]]} if "weights" in server else {}

