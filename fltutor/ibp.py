"""The Indian Buffet Process pieces of factorization WAFFLe (Hao et al., IEEE Access 2022).

Small pure functions, one per equation, so that tests can check each against an
independent estimate. The prior is the stick-breaking IBP (eq. 5-7): per client and
layer, v_k ~ Beta(alpha, 1), pi_k = prod_{j<=k} v_j, b_k ~ Bernoulli(pi_k). The
variational posterior is mean-field (eq. 8-10): b_k ~ Bernoulli(pi^q_k), relaxed to a
concrete sample for training (Maddison et al. 2017), and v_k ~ Kumaraswamy(c_k, d_k).

This is the weight-factorization WAFFLe, not the weighted-averaging WAFFLE of
``fltutor.methods.waffle_weighted``.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["kumaraswamy_sample", "kumaraswamy_log_prob", "beta_log_prob", "kl_kumaraswamy_beta",
           "stick_breaking_log_pi", "prior_mean_pi", "bernoulli_kl", "relaxed_bernoulli_sample",
           "sample_ibp_prior", "ibp_kl"]

EULER_GAMMA = 0.5772156649015329
_TINY = 1e-6


def kumaraswamy_sample(c: Tensor, d: Tensor, u: Tensor) -> Tensor:
    """Reparameterized Kumaraswamy(c, d) draw from uniforms ``u`` by the inverse CDF.

    The CDF is 1 - (1 - v^c)^d, so v = (1 - (1 - u)^(1/d))^(1/c); written in logs so that
    gradients reach c and d without overflow.
    """
    u = u.clamp(_TINY, 1 - _TINY)
    log_1m_vc = torch.log1p(-u) / d                           # log(1 - v^c)
    v = torch.exp(torch.log(-torch.expm1(log_1m_vc)) / c)     # (1 - exp(.))^(1/c)
    return v.clamp(_TINY, 1 - _TINY)


def kumaraswamy_log_prob(v: Tensor, c: Tensor, d: Tensor) -> Tensor:
    """log density of Kumaraswamy(c, d) at v: log c + log d + (c-1) log v + (d-1) log(1 - v^c)."""
    return torch.log(c) + torch.log(d) + (c - 1) * torch.log(v) + (d - 1) * torch.log1p(-v.pow(c))


def beta_log_prob(v: Tensor, alpha: float | Tensor, beta: float | Tensor = 1.0) -> Tensor:
    """log density of Beta(alpha, beta) at v."""
    alpha, beta = torch.as_tensor(alpha, dtype=v.dtype), torch.as_tensor(beta, dtype=v.dtype)
    log_norm = torch.lgamma(alpha + beta) - torch.lgamma(alpha) - torch.lgamma(beta)
    return log_norm + (alpha - 1) * torch.log(v) + (beta - 1) * torch.log1p(-v)


def kl_kumaraswamy_beta(c: Tensor, d: Tensor, alpha: float) -> Tensor:
    """KL( Kumaraswamy(c, d) || Beta(alpha, 1) ), elementwise, in closed form.

    v^c ~ Beta(1, d) under Kumaraswamy(c, d), so E[log v] = (psi(1) - psi(1 + d)) / c and
    E[log(1 - v^c)] = -1/d. With the prior's second parameter equal to 1 no series is
    needed (the general case of Nalisnick & Smyth 2017 has one):
    KL = log(c d / alpha) + (c - alpha)/c * (-gamma - psi(d) - 1/d) - (d - 1)/d.
    """
    e_log_v_times_c = -EULER_GAMMA - torch.digamma(d) - 1.0 / d   # c * E[log v]
    return torch.log(c * d / alpha) + (c - alpha) / c * e_log_v_times_c - (d - 1) / d


def stick_breaking_log_pi(v: Tensor) -> Tensor:
    """log pi_k = sum_{j<=k} log v_j along the last (factor) dimension (eq. 6)."""
    return torch.cumsum(torch.log(v), dim=-1)


def prior_mean_pi(alpha: float, num_factors: int, dtype=torch.float32) -> Tensor:
    """E[pi_k] under the prior: (alpha / (1 + alpha))^k for k = 1..F, shape (F,)."""
    k = torch.arange(1, num_factors + 1, dtype=dtype)
    return (alpha / (1.0 + alpha)) ** k


def bernoulli_kl(q: Tensor, log_p: Tensor) -> Tensor:
    """KL( Bernoulli(q) || Bernoulli(p) ), elementwise, with p given as log p (p < 1)."""
    q = q.clamp(_TINY, 1 - _TINY)
    log_1mp = torch.log(-torch.expm1(log_p.clamp(max=-_TINY)))  # log(1 - p), stable near p = 1
    return q * (torch.log(q) - log_p) + (1 - q) * (torch.log1p(-q) - log_1mp)


def relaxed_bernoulli_sample(logits: Tensor, temperature: float, u: Tensor) -> Tensor:
    """Concrete (relaxed Bernoulli) draw in (0, 1): sigmoid((logits + logit(u)) / temperature)."""
    u = u.clamp(_TINY, 1 - _TINY)
    return torch.sigmoid((logits + torch.log(u) - torch.log1p(-u)) / temperature)


def sample_ibp_prior(alpha: float, num_factors: int, num_clients: int, *, seed: int) -> Tensor:
    """Binary client x factor matrix b (N, F) from the stick-breaking prior, each client its own sticks."""
    if alpha <= 0 or num_factors < 1 or num_clients < 1:
        raise ValueError(f"sample_ibp_prior: need alpha > 0, num_factors >= 1 and num_clients >= 1, got "
                         f"alpha={alpha}, num_factors={num_factors}, num_clients={num_clients}")
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(num_clients, num_factors, generator=g, dtype=torch.float64)
    v = u.pow(1.0 / alpha)                                 # Beta(alpha, 1) by its inverse CDF v = u^(1/alpha)
    pi = torch.exp(stick_breaking_log_pi(v))               # (N, F)
    return (torch.rand(num_clients, num_factors, generator=g, dtype=torch.float64) < pi).float()


def ibp_kl(pi_logit: Tensor, c: Tensor, d: Tensor, alpha: float, u_v: Tensor) -> Tensor:
    """The regularizer R of eq. 11 for one layer, summed over factors: shape (...,) per client.

    E_q(v) KL(q(b) || p(b | v)) is estimated with one reparameterized v ~ Kumaraswamy(c, d)
    drawn from the uniforms ``u_v``; KL(q(v) || p(v)) is exact. Inputs are (..., F).
    """
    v = kumaraswamy_sample(c, d, u_v)
    kl_b = bernoulli_kl(torch.sigmoid(pi_logit), stick_breaking_log_pi(v))
    return (kl_b + kl_kumaraswamy_beta(c, d, alpha)).sum(-1)

