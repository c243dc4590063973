"""Server-side aggregation rules: pure functions of the cohort's stacked parameters.

``client_params`` holds each parameter with a leading client dimension C, as returned by
``fltutor.engine.train``; ``global_params`` holds the model the cohort started from.
"""
from __future__ import annotations

import torch
from torch import Tensor

Params = dict[str, Tensor]

__all__ = ["weighted_mean", "fedavg", "qffl", "omega_schedule", "waffle_weights", "weight_erosion_step", "WE_RULES",
           "agreement", "gma_mask", "and_mask", "ServerOptimizer"]


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


def _flat(updates) -> Tensor:
    """(N, ...) tensor or stacked Params -> (N, D) float64."""
    if isinstance(updates, dict):
        return torch.cat([v.flatten(1) for v in updates.values()], 1).double()
    u = torch.as_tensor(updates)
    if u.ndim < 1:
        raise ValueError(f"expected updates with a leading client dimension (N, ...), got a scalar")
    return u.reshape(len(u), -1).double()


def omega_schedule(round, total_rounds: int, delta_omega: float = 3.2):
    """WAFFLE's degree of personalization Omega(r) = Psi(r) = 1 / (1 + exp(dO (r / (R/2) - 1))).

    1 is global training, 0 local; it falls through 0.5 at r = R/2 (Beaussart et al. 2021,
    eq. 4 and Fig. 8). Works on numbers and arrays.
    """
    r = torch.as_tensor(round, dtype=torch.float64)
    return torch.sigmoid(-delta_omega * (r / (total_rounds / 2) - 1))


def waffle_weights(updates, target: int, round: int, total_rounds: int, *,
                   delta_omega: float = 3.2) -> Tensor:
    """Agent weights alpha^0 of one WAFFLE round (Beaussart et al. 2021, Alg. 1 lines 1-9).

    ``updates``: each agent's model update, a tensor (N, ...) or stacked Params. ``round`` is
    1-based as in the paper (r = 1..R). Returns normalized weights (N,), float64.

    d_i = ||u_i - u_target||; dM, dm = the largest and smallest d_i over the other agents.
    The target gets a stand-in distance d* = dm (1 - (dM - dm)/dM (1 - Omega(r))), between 0
    and dm, and alpha_i = max(Psi(r) - (d_i - d*)/(dM - d*), 0), normalized. Line 6 of Alg. 1
    writes the denominator as dM - min_i d_i, which is dM - d* once d* replaces the target's
    zero. From r >= 0.95 R all weight goes to the target. The averaging over the last three
    rounds (line 10) is the caller's: see ``fltutor.methods.waffle_weighted``.
    """
    u = _flat(updates)
    n = len(u)
    if not (isinstance(target, int) and 0 <= target < n):
        raise ValueError(f"waffle_weights: target must be an agent index in [0, {n}), got {target!r}")
    if not (isinstance(total_rounds, int) and total_rounds >= 1) or not (0 <= round <= total_rounds):
        raise ValueError(f"waffle_weights: need 0 <= round <= total_rounds with total_rounds >= 1, got "
                         f"round={round!r}, total_rounds={total_rounds!r}; rounds count from 1 as in Alg. 2")
    alpha = torch.zeros(n, dtype=torch.float64, device=u.device)   # every branch: float64 on the updates' device
    if round >= 0.95 * total_rounds or n == 1:
        alpha[target] = 1.0
        return alpha
    d = (u - u[target]).norm(dim=1)                      # (N,), d[target] = 0
    others = torch.ones(n, dtype=torch.bool, device=u.device)
    others[target] = False
    d_max, d_min = d[others].max(), d[others].min()
    if d_max <= 0 or d_max == d_min:
        # every update equals the target's, or every other agent is as far from it (always so with two agents):
        # the distances tell the agents apart from none of the others, and lines 5-6 divide 0 by 0. Equal weights.
        return torch.full((n,), 1.0 / n, dtype=torch.float64, device=u.device)
    omega = omega_schedule(round, total_rounds, delta_omega)
    d_star = d_min * (1 - (d_max - d_min) / d_max * (1 - omega))
    d = d.clone()
    d[target] = d_star
    alpha = (omega - (d - d_star) / (d_max - d_star)).clamp(min=0)  # target: omega > 0
    return (alpha / alpha.sum()).to(torch.float64)       # normalized in the updates' dtype, then widened


WE_RULES = ("published", "round_scaled")


def weight_erosion_step(weights: Tensor, updates, target: int, round: int, *, p_d: float, p_s: float = 0.0,
                        passes=None, rule: str = "published") -> Tensor:
    """One round of Weight Erosion: erode each agent's weight by its distance to the target's update.

    d_i = ||u_i - u_target|| / ||u_target|| (all parameters flattened) is agent i's relative distance.

    ``rule="published"`` (Grimberg, Hartley, Jaggi, Karimireddy, DART/DCL 2020, LNCS 12444; Algorithm 1
    of Grimberg's 2020 EPFL report, and the first WAFFLE author's code, MartinBeaussart/Weight_Erosion_ML):
    alpha_i <- max(alpha_i - (1 + p_s * passes_i) * p_d * d_i, 0), where ``passes_i`` counts the complete
    passes agent i made over its data before this round (its data is reused, so it erodes faster).
    ``rule="round_scaled"`` is fltutor's first reading, kept to show what it did: alpha_i <- max(alpha_i -
    p_d * r * d_i, 0) with r the 1-based round. Over R rounds it erodes (R + 1) / 2 times as much as the
    published rule with p_s = 0 (about 40x at R = 80). The target's distance is 0, so it keeps 1 under
    both. Returns the new, unnormalized weights (N,).
    """
    u = _flat(updates)
    w = torch.as_tensor(weights, dtype=torch.float64)
    if w.shape != (len(u),):
        raise ValueError(f"weight_erosion_step: {len(u)} agents but weights of shape {tuple(w.shape)}")
    if rule not in WE_RULES:
        raise ValueError(f"weight_erosion_step: rule={rule!r}; choose one of {WE_RULES}")
    for name, v in (("p_d", p_d), ("p_s", p_s)):
        if not v >= 0:
            raise ValueError(f"weight_erosion_step: {name} must be >= 0, got {v}; the WAFFLE paper's p_d is "
                             "0.006-0.0088 on MNIST, p_s 0 in Grimberg's report")
    ref = u[target].norm().clamp(min=1e-12)
    d = ((u - u[target]).norm(dim=1) / ref).to(torch.float64).cpu()
    if rule == "round_scaled":
        step = p_d * round * d
    else:
        k = torch.zeros(len(u), dtype=torch.float64) if passes is None else torch.as_tensor(passes, dtype=torch.float64)
        step = (1.0 + p_s * k) * p_d * d
    new = (w.cpu() - step).clamp(min=0)
    new[target] = 1.0
    return new


def _check_tau(tau, name):
    if not (isinstance(tau, (int, float)) and 0 <= tau <= 1):
        raise ValueError(f"{name}: tau must be a number in [0, 1], got {tau!r}; the GMA paper uses 0.4")


def agreement(updates: Tensor) -> Tensor:
    """Sign agreement A = |mean_n sign(update_n)| per coordinate: updates (N, ...) -> (...).

    Every client has one vote, whatever its size: GMA's Alg. 2 takes signs of the
    size-weighted updates s_n/sum(s) (w_n - w), and a positive weight does not change a sign.
    """
    u = torch.as_tensor(updates)
    if u.ndim < 1 or len(u) == 0:
        raise ValueError(f"expected updates with a leading client dimension (N, ...), got shape {tuple(u.shape)}")
    return torch.sign(u).mean(0).abs()


def gma_mask(updates: Tensor, tau: float) -> Tensor:
    """The soft mask of Gradient Masked Averaging (Tenison et al. 2023, eq. 3).

    updates: (num_clients, ...). Returns a tensor of shape updates.shape[1:] that is 1
    where the agreement A = |mean sign(update)| is >= tau and A elsewhere. tau = 0 gives
    all ones (plain averaging).
    """
    _check_tau(tau, "gma_mask")
    a = agreement(updates)
    return torch.where(a >= tau, torch.ones_like(a), a)


def and_mask(updates: Tensor, tau: float) -> Tensor:
    """The binary AND-mask of Parascandolo et al. 2021 (GMA Appendix D.2): 1 where A >= tau, else 0."""
    _check_tau(tau, "and_mask")
    a = agreement(updates)
    return (a >= tau).to(a.dtype)


class ServerOptimizer:
    """The server step of Reddi et al. 2021 ("Adaptive Federated Optimization"), with an optional mask.

    ``kind``: 'sgd' (w += lr * mask * delta), 'adagrad', 'adam' or 'yogi'. For the adaptive
    ones, with the pseudo-gradient delta (the clients' weighted mean update):
        m = b1 m + (1 - b1) delta
        v = v + delta^2                                  (adagrad)
        v = b2 v + (1 - b2) delta^2                      (adam)
        v = v - (1 - b2) delta^2 sign(v - delta^2)       (yogi)
        w = w + lr * mask * m / (sqrt(v) + eps)
    The mask multiplies the *final* step, and the moments see the unmasked delta: this is
    how GMA's Alg. 2 writes it (m_t and v_t from Delta_t; m~_tau applied in the update).
    v starts at eps^2 as in Reddi et al.; there is no bias correction.
    """
    KINDS = ("sgd", "adagrad", "adam", "yogi")

    def __init__(self, kind: str = "sgd", lr: float = 1.0, *, beta1: float = 0.9, beta2: float = 0.99,
                 eps: float = 1e-3):
        if kind not in self.KINDS:
            raise ValueError(f"server optimizer {kind!r} is unknown; choose one of {self.KINDS}")
        if not lr > 0:
            raise ValueError(f"server lr must be > 0, got {lr}")
        self.kind, self.lr, self.beta1, self.beta2, self.eps = kind, lr, beta1, beta2, eps
        self.m: Params = {}
        self.v: Params = {}

    def step(self, params: Params, delta: Params, mask: Params | None = None) -> Params:
        """New parameters from the pseudo-gradient ``delta`` (same shapes as params)."""
        out = {}
        for k, w in params.items():
            d = delta[k]
            if self.kind == "sgd":
                step = d
            else:
                m = self.m.get(k, torch.zeros_like(d))
                v = self.v.get(k, torch.full_like(d, self.eps ** 2))
                m = self.beta1 * m + (1 - self.beta1) * d
                d2 = d * d
                if self.kind == "adagrad":
                    v = v + d2
                elif self.kind == "adam":
                    v = self.beta2 * v + (1 - self.beta2) * d2
                else:
                    v = v - (1 - self.beta2) * d2 * torch.sign(v - d2)
                self.m[k], self.v[k] = m, v
                step = m / (v.sqrt() + self.eps)
            if mask is not None:
                step = mask[k] * step
            out[k] = w + self.lr * step
        return out

    def state_dict(self) -> dict:
        return {"m": self.m, "v": self.v}

    def load_state_dict(self, state: dict) -> None:
        self.m, self.v = state["m"], state["v"]
