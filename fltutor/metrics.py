"""Summaries of per-client accuracy: mean, per-subpopulation means, gap and variance.

These are the columns of WAFFLe's Table 1 (Hao et al. 2022): the majority and minority
means, their gap, and the variance of local test accuracy across all clients.
"""
from __future__ import annotations

import numpy as np

__all__ = ["fairness_summary", "mean_std", "rounds_to_fraction_of_best"]


def fairness_summary(per_client_acc, groups=None, *, majority: int = 0, minority: int = 1) -> dict:
    """Mean, majority/minority means, gap and variance of per-client accuracy (in %, %^2).

    ``groups`` gives each client's subpopulation id (``partition.client_groups``). Variance
    is the population variance over all clients, as WAFFLe Table 1 reports it.
    """
    acc = np.asarray(per_client_acc, dtype=np.float64)
    if acc.ndim != 1 or acc.size == 0:
        raise ValueError(f"fairness_summary: expected a non-empty 1-D array of per-client accuracies, got shape {acc.shape}")
    out = {"mean": float(acc.mean()), "variance": float(acc.var()), "worst_10pct": float(np.sort(acc)[: max(1, len(acc) // 10)].mean())}
    if groups is not None:
        g = np.asarray(groups)
        if g.shape != acc.shape:
            raise ValueError(f"fairness_summary: {len(g)} group ids for {len(acc)} clients; pass one per client")
        for name, gid in (("majority", majority), ("minority", minority)):
            if not np.any(g == gid):
                raise ValueError(f"fairness_summary: no client has group id {gid} ({name}); "
                                 f"ids present: {sorted(set(g.tolist()))}")
            out[name] = float(acc[g == gid].mean())
        out["gap"] = out["majority"] - out["minority"]
    return out


def mean_std(values) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value) of repeated runs."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def rounds_to_fraction_of_best(curve, fraction: float = 0.99) -> int:
    """First round (1-based) at which ``curve`` reaches ``fraction`` of its maximum."""
    c = np.asarray(curve, dtype=np.float64)
    return int(np.argmax(c >= fraction * c.max())) + 1
