"""Weight Erosion (Grimberg et al. 2020): a target agent's model from eroding agent weights.

Every agent trains the target's model each round; the server weighs their updates with
weights that erode with each agent's distance to the target (``aggregators.weight_erosion_step``)
times their sample counts, so distant agents drop out first and training ends local.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import aggregators
from ..checks import check_fields
from .base import Method, Round, check_target


@dataclass
class WeightErosionParams:
    target: int = 0               # the agent the model is for
    p_d: float = 0.006            # distance penalty (the WAFFLE paper's Table 3, MNIST A)
    server_lr: float = 1.0

    def __post_init__(self):
        check_fields(self, {"target": dict(low=0), "server_lr": dict(low=0, low_open=True),
                            "p_d": dict(low=0, hint="the paper uses 0.006-0.0088 on MNIST")})


class WeightErosion(Method):
    """Weight Erosion: distance-eroded agent weights build one agent's personalized model."""
    name = "weight_erosion"
    Params = WeightErosionParams
    server_holds = "the target agent's model and every agent's weight"
    full_participation = True

    def init_server(self, global_params, num_clients):
        check_target(self.params.target, num_clients)
        return {"we": torch.ones(num_clients, dtype=torch.float64, device=next(iter(global_params.values())).device)}

    def aggregate(self, global_params, server, message, rnd: Round):
        updates = {k: v - global_params[k].unsqueeze(0) for k, v in message.items()}   # (N, ...) agent order
        server["we"] = aggregators.weight_erosion_step(server["we"], updates, self.params.target, rnd.round + 1,
                                                       p_d=self.params.p_d).to(server["we"].device)
        w = server["we"] * rnd.sizes
        server["weights"] = w / w.sum()
        step = aggregators.weighted_mean(updates, server["weights"])
        return {k: global_params[k] + self.params.server_lr * step[k] for k in global_params}

    def round_log(self, server, private, seen):
        return {"weights": [round(float(w), 5) for w in server["weights"]]} if "weights" in server else {}
