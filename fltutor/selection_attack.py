"""Recovering a client's private factor selection b in weight-factorization WAFFLe.

Weight-factorization WAFFLe (Hao et al., IEEE Access 2022; ``fltutor.methods.waffle_ibp``, not
the weighted-averaging WAFFLE) gives client i the weights W_i = W_a diag(r * b_i) W_b (eq. 2) and
claims privacy because a message holds only the shared dictionary (W_a, W_b, r) after local
training, while b_i, drawn from the client's q(b) = Bernoulli(pi_i), stays home: an attacker who
intercepts a message has the dictionary but must guess which factors the client uses.

The threat: an eavesdropper (or the server) reads one client's message of a round. It holds
the global dictionary the client started from (the server broadcast it), the message, the
model's architecture, and (for ``fit_selection``) some public labelled data. It does not hold the
client's data, its q(b) or its samples of b. Two estimators of b:

- ``selection_from_update``: the size of each factor's update. For a factorized layer with
  input x, output error g = dL/dy and A = sum_n g_n x_n^T (the gradient of the composed weight),
  u_f = W_a[:, f], v_f = W_b[f, :]:

      dL/du_f = r_f b_f A v_f,   dL/dv_f = r_f b_f A^T u_f,   dL/dr_f = b_f u_f^T A v_f.

  Every factor's update is proportional to b_f, so with a hard b an unused factor does not move
  at all. Assumes the update is dominated by the data term (no weight decay on the dictionary,
  which waffle_ibp has none of) and that the attacker knows which global model the client started from.
- ``fit_selection``: the intercepted dictionary, frozen, is a model family indexed by b; the
  attacker fits b = sigmoid(logits) on its own labelled data by Adam on the cross-entropy.
  Assumes the attacker's data resemble the client's task (e.g. the same classes).

``selection_recovery`` scores an estimate against the client's true selection (Spearman
correlation, precision/recall of the active set, AUC). Note that the IBP prior orders the factors
(E[pi_k] = (alpha / (1 + alpha))^k falls with k), so its public mean alone already ranks a
client's factors well early in training; compare with it (``prior=`` and a prior-only estimate).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import torch
from torch import nn, Tensor

from . import engine
from .checks import integer, number
from .layers import factorized_layers
from .privacy import auc

__all__ = ["update_scores", "selection_from_update", "two_means_count", "fit_selection", "average_ranks",
           "spearman", "selection_recovery", "cross_client_spearman"]

_EPS = 1e-12


# ---- checking inputs -------------------------------------------------------------------------
def _layer_tensors(name: str, tree: Mapping, layer: str, f: int) -> tuple[Tensor, Tensor, Tensor]:
    """``tree``'s W_a (..., out, F), W_b (..., F, in) and r (..., F) of ``layer``, checked against F."""
    keys = [f"{layer}.w_a", f"{layer}.w_b", f"{layer}.r"]
    missing = [k for k in keys if k not in tree]
    if missing:
        found = sorted({k[: -len(".w_a")] for k in tree if k.endswith(".w_a")})
        raise ValueError(f"widths: layer {layer!r} has no {missing} in {name}; the factorized layers in {name} "
                         f"are {found}. Pass widths = fltutor.layers.factorized_layers(model)")
    w_a, w_b, r = (torch.as_tensor(tree[k]) for k in keys)
    if w_a.ndim < 2 or w_b.ndim < 2 or w_a.shape[-1] != f or w_b.shape[-2] != f or r.shape[-1:] != (f,):
        raise ValueError(f"widths: layer {layer!r} has F = {f}, but {name} holds w_a {tuple(w_a.shape)}, "
                         f"w_b {tuple(w_b.shape)}, r {tuple(r.shape)}; expected (out, {f}), ({f}, in), ({f},)")
    return w_a, w_b, r


def _widths(widths) -> dict[str, int]:
    if not isinstance(widths, Mapping) or not widths:
        raise ValueError(f"widths: got {widths!r}; expected a non-empty dict {{layer: F}}, "
                         "e.g. fltutor.layers.factorized_layers(model)")
    return {str(l): integer(f"widths[{l!r}]", f, low=1) for l, f in widths.items()}


def _per_layer(name: str, value, layers) -> dict:
    """One value per layer from a number (or None) or a dict {layer: value}."""
    if isinstance(value, Mapping):
        if set(value) != set(layers):
            raise ValueError(f"{name}: has layers {sorted(value)}, but widths has {sorted(layers)}; give one "
                             "entry per factorized layer")
        return dict(value)
    return {l: value for l in layers}


# ---- the update-size estimator ----------------------------------------------------------------
def update_scores(message: Mapping[str, Tensor], global_params: Mapping[str, Tensor],
                  widths: Mapping[str, int]) -> dict[str, Tensor]:
    """Each factor's update size, {layer: (..., F)}, >= 0 and exactly 0 where the factor did not move.

    With u = W_a[:, f], v = W_b[f, :] and r = r_f of the global dictionary and the message's
    changes du, dv, dr, the three gradients of the module docstring give

        a_f = |du| / (|r| |v|) = lr b_f |A v^|,   c_f = |dv| / (|r| |u|) = lr b_f |A^T u^|,
        e_f = |dr| / (|u| |v|) = lr b_f |u^T A v^|          (u^, v^ unit vectors; one SGD step).

    Each is b_f times a gain that says how well the layer's error signal A lines up with the
    factor's directions, and none depends on the factor's own scale or on how that scale is split
    between u, v and r (the rescaling u -> s u, v -> v / s leaves them unchanged). The raw sizes
    do not have this property: |du| carries |r| |v|, set by the shared dictionary whatever this
    client does, so it partly measures how the population uses factor f. (On the tiny federation
    of the tests the raw |du| ranked a client's factors a little better, by inheriting that common
    ordering, but told clients apart worse: ``cross_client_spearman`` lower in 5 of 5 settings.)
    The score is the geometric mean (a_f c_f e_f)^(1/3), which averages the three gains in log
    space; it is 0 exactly when all three are. ``message`` may carry a leading client dimension (C, ...).
    """
    widths = _widths(widths)
    out = {}
    for layer, f in widths.items():
        u1, v1, r1 = _layer_tensors("message", message, layer, f)
        u0, v0, r0 = _layer_tensors("global_params", global_params, layer, f)
        if u1.shape[-2:] != u0.shape or v1.shape[-2:] != v0.shape or r1.shape[-1:] != r0.shape:
            raise ValueError(f"message: layer {layer!r} has w_a {tuple(u1.shape)}, w_b {tuple(v1.shape)}, while "
                             f"global_params has {tuple(u0.shape)}, {tuple(v0.shape)}; pass the message and the "
                             "global model it was trained from (a message may add one leading client dimension)")
        u0, v0, r0 = u0.to(u1.dtype), v0.to(u1.dtype), r0.to(u1.dtype)
        nu, nv, ar = u0.norm(dim=0), v0.norm(dim=1), r0.abs()            # (F,) each
        da = (u1 - u0).norm(dim=-2)                                       # (..., F) W_a columns
        db = (v1 - v0).norm(dim=-1)                                       # (..., F) W_b rows
        dr = (r1 - r0).abs()                                              # (..., F)
        a = da / (ar * nv).clamp(min=_EPS)
        c = db / (ar * nu).clamp(min=_EPS)
        e = dr / (nu * nv).clamp(min=_EPS)
        out[layer] = (a * c * e).clamp(min=0) ** (1.0 / 3.0)
    return out


def two_means_count(scores: Tensor) -> Tensor:
    """How many scores lie in the upper group of the best two-group split of log(scores), (...,).

    The exact 1-D 2-means (Jenks' natural break with two classes): sort, try every split point,
    keep the one with the least within-group sum of squares. In log space because a factor's
    update size is a product (b_f times gains), and so that exact zeros (scores floored at
    1e-12 of the row's largest) sit far below any factor that moved. All-equal scores give F
    if they are positive, 0 if they are all zero (nothing moved).
    """
    s = scores.double()
    f = s.shape[-1]
    top = s.amax(-1, keepdim=True)                                        # (..., 1)
    z = torch.log(torch.maximum(s, top * _EPS).clamp(min=1e-300)).sort(-1).values   # (..., F) ascending
    if f == 1:
        return (s[..., 0] > 0).long()
    c1, c2 = z.cumsum(-1), (z * z).cumsum(-1)                             # (..., F)
    n_lo = torch.arange(1, f, dtype=s.dtype, device=s.device)           # (F-1,) sizes of the lower group
    lo_sse = c2[..., :-1] - c1[..., :-1] ** 2 / n_lo
    hi_s1, hi_s2 = c1[..., -1:] - c1[..., :-1], c2[..., -1:] - c2[..., :-1]
    hi_sse = hi_s2 - hi_s1 ** 2 / (f - n_lo)
    k = f - 1 - (lo_sse + hi_sse).argmin(-1)                              # (...,) upper-group size
    flat = (z[..., -1] - z[..., 0]) <= 1e-12 * z.abs().amax(-1).clamp(min=1.0)
    return torch.where(flat, torch.where(top[..., 0] > 0, f, 0), k)


def selection_from_update(message: Mapping[str, Tensor], global_params: Mapping[str, Tensor],
                          widths: Mapping[str, int], *, k=None, soft: bool = False,
                          prior: Mapping[str, Tensor] | None = None) -> dict[str, Tensor]:
    """The attacker's estimate of b from one intercepted message, {layer: (..., F)}.

    Scores are ``update_scores`` (see there for the formula), times ``prior`` {layer: (F,)} if
    given (the attacker's prior mean of b, e.g. the public IBP prior mean). ``soft``: scores
    divided by the layer's largest, in [0, 1] (0 where the factor did not move). Otherwise a hard
    0/1 estimate: the top-k factors of each layer (equal scores: the lower index first); ``k`` an
    int or {layer: int} in [0, F], or None to estimate it per layer with ``two_means_count``, which
    is exact for a hard b (unused factors do not move) but only rough for a relaxed one (on the
    tests' tiny federation it named about 10 of 16 factors where 7 were active); ``k`` is not used
    when ``soft``.
    """
    widths = _widths(widths)
    scores = update_scores(message, global_params, widths)
    if prior is not None:
        prior = _per_layer("prior", prior, widths)
        for l, f in widths.items():
            p = torch.as_tensor(prior[l]).to(scores[l].dtype)
            if p.shape != (f,) or not bool(((p >= 0) & torch.isfinite(p)).all()):
                raise ValueError(f"prior: layer {l!r} got shape {tuple(p.shape)}; expected ({f},) values >= 0, "
                                 "the prior mean of b (e.g. fltutor.ibp.prior_mean_pi(alpha, F))")
            scores[l] = scores[l] * p
    ks = _per_layer("k", k, widths)
    for l, f in widths.items():
        if ks[l] is not None:
            ks[l] = integer("k" if not isinstance(k, Mapping) else f"k[{l!r}]", ks[l], low=0, high=f,
                            hint=f"layer {l!r} has {f} factors; None estimates k from the scores")
    if soft:
        return {l: s / s.amax(-1, keepdim=True).clamp(min=torch.finfo(s.dtype).tiny) for l, s in scores.items()}
    out = {}
    for l, s in scores.items():
        kk = two_means_count(s) if ks[l] is None else torch.full(s.shape[:-1], ks[l], dtype=torch.long,
                                                                 device=s.device)
        order = torch.sort(s, dim=-1, descending=True, stable=True).indices               # (..., F)
        pos = torch.arange(s.shape[-1], device=s.device).expand_as(order)
        rank = torch.empty_like(order).scatter_(-1, order, pos)                              # (..., F) 0 = largest
        out[l] = (rank < kk.unsqueeze(-1)).to(s.dtype)
    return out


# ---- the fitted estimator -----------------------------------------------------------------------
def fit_selection(model: nn.Module, params: Mapping[str, Tensor], x: Tensor, y: Tensor, widths: Mapping[str, int],
                  *, steps: int, lr: float, batch_size: int, seed: int,
                  init: Mapping[str, Tensor] | None = None) -> dict[str, Tensor]:
    """b = sigmoid(logits) fitted on the attacker's data (x, y) with the dictionary ``params`` frozen.

    Adam (torch.optim defaults, rate ``lr``) on the logits for ``steps`` mini-batches of
    ``batch_size`` samples, taken in turn from a stream of permutations of the samples drawn by a
    CPU generator seeded with ``seed``; the loss is the mean cross-entropy (no prior term).
    ``init``: the starting b {layer: (F,) or (P, F)} in (0, 1) (None: 0.5). Batched over P
    targets: give ``params`` stacked (P, ...); x (n, ...) is shared by the targets, or (P, n, ...)
    with y (P, n) gives each its own data. The targets do not interact (Adam is elementwise), so
    each equals its own fit. Returns {layer: (F,)}, or (P, F) when batched.
    """
    widths = _widths(widths)
    have = factorized_layers(model)
    for l, f in widths.items():
        if l not in have:
            raise ValueError(f"widths: {l!r} is not a factorized layer of the model; it has {have}")
        if have[l] != f:
            raise ValueError(f"widths: layer {l!r} has {have[l]} factors in the model, not {f}")
    names = dict(model.named_parameters())
    if not isinstance(params, Mapping) or set(params) != set(names):
        got = sorted(params) if isinstance(params, Mapping) else type(params).__name__
        raise ValueError(f"params: got {got}; expected the model's parameters {sorted(names)} (the intercepted "
                         "dictionary, e.g. Method.intercept(message, global_params))")
    lead = set()
    for n, p in names.items():
        t = params[n]
        if tuple(t.shape) == tuple(p.shape):
            lead.add(())
        elif t.ndim == p.ndim + 1 and tuple(t.shape[1:]) == tuple(p.shape):
            lead.add((t.shape[0],))
        else:
            raise ValueError(f"params: {n!r} has shape {tuple(t.shape)}; expected {tuple(p.shape)}, or (P, "
                             f"{', '.join(map(str, p.shape))}) for P targets")
    if len(lead) != 1:
        raise ValueError("params: some tensors are stacked over targets and others are not; stack all or none")
    batched = lead.pop() != ()
    P = next(iter(params.values())).shape[0] if batched else 1
    steps = integer("steps", steps, low=1)
    lr = number("lr", lr, low=0, low_open=True)
    batch_size = integer("batch_size", batch_size, low=1)
    seed = integer("seed", seed, low=0, high=2**63 - 1)
    dtype = next(iter(params.values())).dtype
    stacked = {n: (params[n] if batched else params[n].unsqueeze(0)).detach() for n in names}   # (P, ...)
    if not isinstance(x, Tensor) or x.ndim < 2:
        raise ValueError(f"x: got {type(x).__name__} of shape {tuple(getattr(x, 'shape', ()))}; expected a tensor "
                         "(n, ...) of the attacker's samples, or (P, n, ...) with one set per target")
    own_data = isinstance(y, Tensor) and y.ndim == 2
    if not isinstance(y, Tensor) or y.is_floating_point() or y.dtype == torch.bool or y.numel() == 0:
        raise ValueError(f"y: got {getattr(y, 'dtype', type(y).__name__)}; expected a non-empty tensor of integer "
                         "class labels (n,), or (P, n) with x (P, n, ...) for per-target data")
    n = y.shape[-1]
    if own_data and (not batched or y.shape[0] != P or tuple(x.shape[:2]) != (P, n)):
        raise ValueError(f"x: per-target data need params stacked over P targets, x (P, n, ...) and y (P, n); got "
                         f"x {tuple(x.shape)}, y {tuple(y.shape)} for {P if batched else 'unstacked'} params")
    if not own_data and (y.ndim != 1 or x.shape[0] != n):
        raise ValueError(f"x: got x {tuple(x.shape)} and y {tuple(y.shape)}; expected x (n, ...) and y (n,)")
    device = next(iter(params.values())).device
    x, y = x.to(device, dtype), y.to(device)
    logits = {}
    for l, f in widths.items():
        b0 = torch.full((P, f), 0.5, dtype=dtype, device=device) if init is None else torch.as_tensor(
            _per_layer("init", init, widths)[l]).to(device, dtype)
        if b0.shape not in ((f,), (P, f)) or not bool(((b0 > 0) & (b0 < 1)).all()):
            raise ValueError(f"init: layer {l!r} got shape {tuple(b0.shape)}; expected ({f},) or ({P}, {f}) "
                             "values strictly inside (0, 1)")
        b0 = b0.expand(P, f)
        logits[l] = torch.log(b0 / (1 - b0)).clone().requires_grad_(True)       # (P, F)
    opt = torch.optim.Adam(list(logits.values()), lr=lr)
    g = torch.Generator().manual_seed(seed)          # CPU: the same batches on any device
    bs = min(batch_size, n)
    queue = torch.empty(0, dtype=torch.long)
    for _ in range(steps):
        if len(queue) < bs:
            queue = torch.cat([queue, torch.randperm(n, generator=g)])
        pos, queue = queue[:bs].to(device), queue[bs:]
        xb = x[:, pos] if own_data else x[pos].unsqueeze(0).expand(P, bs, *x.shape[1:])   # (P, B, ...)
        yb = y[:, pos] if own_data else y[pos].unsqueeze(0).expand(P, bs)       # (P, B)
        b = {l: torch.sigmoid(t) for l, t in logits.items()}                   # {layer: (P, F)}
        out = engine.forward(model, stacked, xb, b)                             # (P, B, K)
        loss = nn.functional.cross_entropy(out.flatten(0, 1), yb.flatten())
        opt.zero_grad()
        (loss * P).backward()      # the sum of each target's mean loss: targets stay independent
        opt.step()
    return {l: torch.sigmoid(t.detach()) if batched else torch.sigmoid(t.detach())[0] for l, t in logits.items()}


# ---- scoring an estimate ------------------------------------------------------------------------
def average_ranks(values) -> Tensor:
    """1-based ranks of a 1-D array, ties given their average rank, (n,) float64."""
    v = torch.as_tensor(values).double().flatten()
    _, inverse, counts = torch.unique(v, return_inverse=True, return_counts=True)
    below = (counts.cumsum(0) - counts).double()                        # (U,) values strictly lower
    return (below + (counts.double() + 1) / 2)[inverse]                 # (n,)


def spearman(a, b) -> float:
    """Spearman's rank correlation: Pearson's correlation of the average ranks; NaN if either is constant."""
    ra, rb = average_ranks(a), average_ranks(b)
    if ra.shape != rb.shape or len(ra) < 2:
        raise ValueError(f"spearman: got {tuple(ra.shape)} and {tuple(rb.shape)} values; expected two 1-D arrays "
                         "of the same length >= 2")
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = float(ra.norm() * rb.norm())
    return float((ra * rb).sum()) / den if den > 0 else float("nan")


def _set_scores(est: Tensor, active: Tensor) -> tuple[float, float, int]:
    """Precision and recall of the predicted active set, and its size (see ``selection_recovery``)."""
    k_true = int(active.sum())
    if bool(((est == 0) | (est == 1)).all()):          # a hard estimate names its own set
        pred = est == 1
        hits, k_pred = float((pred & active).sum()), int(pred.sum())
    else:                                              # a soft one: its top k_true, ties shared out
        k_pred = k_true
        if k_true == 0:
            hits = 0.0
        else:
            t = est.sort(descending=True).values[k_true - 1]
            above, tie = est > t, est == t
            share = float((tie & active).sum()) / int(tie.sum())        # expected hits per tied pick
            hits = float((above & active).sum()) + (k_true - int(above.sum())) * share
    prec = hits / k_pred if k_pred else float("nan")
    rec = hits / k_true if k_true else float("nan")
    return prec, rec, k_pred


def selection_recovery(estimate: Mapping[str, Tensor], truth: Mapping[str, Tensor]) -> dict:
    """How well an estimate of one client's b matches its true selection, per layer and overall.

    ``estimate`` and ``truth``: {layer: (F,)}. A factor is active if its true b > 0.5. Per layer:
    ``spearman`` (of estimate and truth), ``precision`` and ``recall`` of the predicted active set
    (a hard 0/1 estimate: its ones; a soft one: its k highest, k the true count, ties shared out
    evenly, so precision = recall = precision@k), ``auc`` of the estimate separating active from
    inactive factors, ``k_true``, ``k_pred``. Undefined values (no active factor, or no inactive
    one, for auc) are NaN. ``overall``: each metric's mean over the layers where it is defined,
    weighted by their factor counts. Returns {"layers": {layer: {...}}, "overall": {...}}.
    """
    if not isinstance(estimate, Mapping) or not isinstance(truth, Mapping) or not truth:
        raise ValueError("estimate: expected dicts {layer: (F,)} for estimate and truth")
    if set(estimate) != set(truth):
        raise ValueError(f"estimate: has layers {sorted(estimate)}, truth has {sorted(truth)}; score the same layers")
    per, weights = {}, {}
    for l in truth:
        e, t = torch.as_tensor(estimate[l]).double().cpu(), torch.as_tensor(truth[l]).double().cpu()
        if e.ndim != 1 or e.shape != t.shape or len(t) < 2:
            raise ValueError(f"estimate: layer {l!r} has shape {tuple(e.shape)}, truth {tuple(t.shape)}; expected "
                             "the same (F,) with F >= 2 (score one client at a time)")
        if not bool(torch.isfinite(e).all() & torch.isfinite(t).all()):
            raise ValueError(f"estimate: layer {l!r} holds NaN or infinite values (in estimate or truth)")
        active = t > 0.5
        prec, rec, k_pred = _set_scores(e, active)
        both = 0 < int(active.sum()) < len(t)
        per[l] = {"spearman": spearman(e, t), "precision": prec, "recall": rec,
                  "auc": auc(e, active) if both else float("nan"), "k_true": int(active.sum()), "k_pred": k_pred}
        weights[l] = len(t)
    overall = {}
    for m in ("spearman", "precision", "recall", "auc"):
        vals = [(per[l][m], weights[l]) for l in per if not np.isnan(per[l][m])]
        overall[m] = float(sum(v * w for v, w in vals) / sum(w for _, w in vals)) if vals else float("nan")
    overall["k_true"] = sum(p["k_true"] for p in per.values())
    overall["k_pred"] = sum(p["k_pred"] for p in per.values())
    return {"layers": per, "overall": overall}


def cross_client_spearman(estimate: Mapping[str, Tensor], truth: Mapping[str, Tensor]) -> dict:
    """Per factor, Spearman's correlation across C clients of estimate and truth; mean over factors.

    ``estimate`` and ``truth``: {layer: (C, F)}, one row per client. A public prior (the same for
    every client) scores NaN here, so this measures what an estimate knows about *this* client
    beyond the population. Factors whose estimate or truth is the same for every client are
    skipped. Returns {layer: mean, "overall": mean over all defined factors}.
    """
    if not isinstance(estimate, Mapping) or not isinstance(truth, Mapping) or set(estimate) != set(truth) or not truth:
        raise ValueError("estimate: expected dicts {layer: (C, F)} with the same layers as truth")
    out, pooled = {}, []
    for l in truth:
        e, t = torch.as_tensor(estimate[l]).double().cpu(), torch.as_tensor(truth[l]).double().cpu()
        if e.ndim != 2 or e.shape != t.shape or e.shape[0] < 2:
            raise ValueError(f"estimate: layer {l!r} has shape {tuple(e.shape)}, truth {tuple(t.shape)}; expected "
                             "the same (C, F) with C >= 2 clients")
        rhos = [spearman(e[:, f], t[:, f]) for f in range(e.shape[1])]
        rhos = [r for r in rhos if not np.isnan(r)]
        out[l] = float(np.mean(rhos)) if rhos else float("nan")
        pooled += rhos
    out["overall"] = float(np.mean(pooled)) if pooled else float("nan")
    return out
