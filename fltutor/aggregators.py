"""Server-side aggregation rules: pure functions of the cohort's stacked parameters.

``client_params`` holds each parameter with a leading client dimension C, as returned by
``fltutor.client.train_cohort``; ``global_params`` holds the model the cohort started from.
"""
from __future__ import annotations

import torch
from torch import Tensor

Params = dict[str, Tensor]

__all__ = ["weighted_mean", "fedavg", "qffl"]


def weighted_mean(stacked: Params, weights: Tensor) -> Params:
    """sum_c w_c x_c / sum_c w_c for every tensor; weights (C,) must be >= 0 with a positive sum."""
    w = torch.as_tensor(weights, dtype=torch.float64)
    if w.ndim != 1 or any(v.shape[0] != len(w) for v in stacked.values()):
        raise ValueError(f"weighted_mean: expected one weight per client ({next(iter(stacked.values())).shape[0]}), "
                         f"got shape {tuple(w.shape)}")
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weighted_mean: weights must be >= 0 with a positive sum, got {w.tolist()}")
    w = w / w.sum()
    return {k: torch.tensordot(w.to(v.dtype), v, dims=1) for k, v in stacked.items()}  # (C,) . (C, ...) -> (...)


def fedavg(global_params: Params, client_params: Params, num_samples: Tensor) -> Params:
    """FedAvg (McMahan et al. 2017, Alg. 1): average of client models weighted by n_k."""
    del global_params  # FedAvg's new model does not depend on the old one beyond the clients'
    return weighted_mean(client_params, num_samples)


def qffl(global_params: Params, client_params: Params, start_losses: Tensor, *, lr: float,
         q: float, eps: float = 1e-10) -> Params:
    """q-FedAvg (Li et al. 2020, "Fair resource allocation in FL", Alg. 2).

    With L = 1/lr, dw_k = L (w - w_k), Delta_k = F_k^q dw_k and
    h_k = q F_k^(q-1) ||dw_k||^2 + L F_k^q, the new model is w - sum Delta_k / sum h_k.
    F_k is client k's training loss at the start model w. ``eps`` keeps F_k^(q-1) finite
    when a loss is zero (the reference code adds the same 1e-10).
    """
    if q < 0:
        raise ValueError(f"qffl: q must be >= 0 (q = 0 is FedAvg with equal weights), got {q}")
    L = 1.0 / lr
    f = torch.as_tensor(start_losses, dtype=torch.float64) + eps           # (C,)
    dw = {k: L * (global_params[k].unsqueeze(0) - v) for k, v in client_params.items()}  # (C, ...)
    sq_norm = sum(d.flatten(1).pow(2).sum(1).double() for d in dw.values())  # (C,)
    h = q * f.pow(q - 1) * sq_norm + L * f.pow(q)                         # (C,)
    coef = (f.pow(q) / h.sum())                                           # (C,)
    return {k: global_params[k] - torch.tensordot(coef.to(d.dtype), d, dims=1) for k, d in dw.items()}
