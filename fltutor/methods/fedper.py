"""FedPer (Arivazhagan et al. 2019): a shared base and a private head per client.

The last ``personal_layers`` layers with parameters stay on each client; only the base is
sent and averaged. A client scores with the global base and its own head.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import aggregators
from ..checks import check_fields
from .base import EvalModel, Job, Method


@dataclass
class FedPerParams:
    personal_layers: int = 1      # how many of the last layers stay on the client

    def __post_init__(self):
        check_fields(self, {"personal_layers": dict(low=1)})


def personal_keys(names, num_layers: int) -> list[str]:
    """Parameter names of the last ``num_layers`` layers that have parameters (FedPer's head)."""
    layers: list[str] = []
    for name in names:
        layer = name.rsplit(".", 1)[0]
        if layer not in layers:
            layers.append(layer)
    if num_layers >= len(layers):
        raise ValueError(f"personal_layers: {num_layers} would keep all {len(layers)} layers ({layers}) on the "
                         f"clients, which is Local-only; use at most {len(layers) - 1}")
    keep = set(layers[-num_layers:])
    return [n for n in names if n.rsplit(".", 1)[0] in keep]


class FedPer(Method):
    """FedPer: the base is averaged, each client's head stays home."""
    name = "fedper"
    Params = FedPerParams
    message_holds = "the base of the client's trained model, without the head"
    client_keeps = "its data and its head"
    server_holds = "the global base (no head that any client uses)"

    def head(self, names) -> list[str]:
        return personal_keys(list(names), self.params.personal_layers)

    def init_private(self, global_params, num_clients):
        return {f"head.{k}": global_params[k].unsqueeze(0).repeat(num_clients, *([1] * global_params[k].ndim))
                for k in self.head(global_params)}

    def client_start(self, global_rows, private_rows):
        return {k: private_rows.get(f"head.{k}", v) for k, v in global_rows.items()}

    def client_update(self, job: Job):
        trained, _, loss = job.train()
        head = self.head(trained)
        return ({k: v for k, v in trained.items() if k not in head},
                {f"head.{k}": trained[k] for k in head}, loss)

    def aggregate(self, global_params, server, message, rnd):
        return {**global_params, **aggregators.fedavg(global_params, message, rnd.sizes)}

    def eval_model(self, global_params, server, private, seen):
        n = len(seen)
        return EvalModel({k: private[f"head.{k}"] if f"head.{k}" in private else v.expand(n, *v.shape)
                          for k, v in global_params.items()}, per_client=True)

    def global_model(self, global_params, server):
        return None  # the base has no head of its own
