"""Weight Erosion (Grimberg, Hartley, Jaggi, Karimireddy, DART/DCL 2020): a target agent's model from
eroding agent weights.

Every agent trains the target's model each round; the server averages their updates with weights
that erode with each agent's distance to the target (``aggregators.weight_erosion_step``), so distant
agents drop out first. The published rule (the default) erodes by (1 + p_s * passes) * p_d * d_i and
averages with the weights alone; ``rule="round_scaled"`` is fltutor's first reading (p_d * r * d_i,
weights times sample counts), kept, labelled, because notebook 04's earlier numbers came from it.
``passes`` counts the complete passes an agent made over its data before the round: every agent trains
every round, so it is (r - 1) * local_epochs.
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
    p_s: float = 0.0              # size penalty: faster erosion once an agent's data is reused (Grimberg's report: 0)
    rule: str = "published"       # "published", or "round_scaled" (fltutor's first reading, ~40x faster)
    server_lr: float = 1.0

    def __post_init__(self):
        check_fields(self, {"target": dict(low=0), "server_lr": dict(low=0, low_open=True),
                            "p_d": dict(low=0, hint="the paper uses 0.006-0.0088 on MNIST"),
                            "p_s": dict(low=0, hint="Grimberg's report suggests 0; the first author's code uses 2"),
                            "rule": dict(allowed=aggregators.WE_RULES)})


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
        p = self.params
        passes = torch.full((len(rnd.sizes),), float(rnd.round * self.config.local_epochs), dtype=torch.float64)
        server["we"] = aggregators.weight_erosion_step(server["we"], updates, p.target, rnd.round + 1, p_d=p.p_d,
                                                       p_s=p.p_s, passes=passes, rule=p.rule).to(server["we"].device)
        w = server["we"] * rnd.sizes.to(server["we"]) if p.rule == "round_scaled" else server["we"]   # published: alpha alone
        server["weights"] = w / w.sum()
        step = aggregators.weighted_mean(updates, server["weights"])
        return {k: global_params[k] + self.params.server_lr * step[k] for k in global_params}

    def round_log(self, server, private, seen):
        return {"weights": [round(float(w), 5) for w in server["weights"]]} if "weights" in server else {}
