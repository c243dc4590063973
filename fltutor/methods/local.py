"""Local training only: every client keeps and trains its own model; nothing is sent."""
from __future__ import annotations

import torch

from .base import EvalModel, Job, Method


class Local(Method):
    """Local-only: each client trains its own model on its own data; no server."""
    name = "local"
    message_holds = "nothing: a Local client sends no message"
    client_keeps = "its data and its whole model"
    server_holds = "nothing of any client"

    def init_private(self, global_params, num_clients):
        return {f"model.{k}": v.unsqueeze(0).repeat(num_clients, *([1] * v.ndim)) for k, v in global_params.items()}

    def client_start(self, global_rows, private_rows):
        return {k: private_rows[f"model.{k}"] for k in global_rows}

    def client_update(self, job: Job):
        trained, _, loss = job.train()
        return {}, {f"model.{k}": v for k, v in trained.items()}, loss

    def aggregate(self, global_params, server, message, rnd):
        return global_params  # nothing reaches the server

    def eval_model(self, global_params, server, private, seen):
        return EvalModel({k: private[f"model.{k}"] for k in global_params}, per_client=True)

    def global_model(self, global_params, server):
        return None
