"""Gradient inversion: rebuild a client's training batch from one intercepted update message.

The threat: an honest-but-curious server (or anyone on the wire) intercepts the message of one
client that took one local SGD step on one batch (FedSGD; FedAvg with one local step). That
update is -lr * gradient, so the attacker holds the gradient of the client's mean cross-entropy,
the model it was taken at, and the batch size. It then searches for inputs whose gradient matches.

- ``client_gradient``: the gradient a client sends, the message under attack;
- ``invert_linear_layer``: the closed form for a first linear layer with bias at batch size 1
  (Phong et al., "Privacy-preserving deep learning via additively homomorphic encryption",
  IEEE TIFS 2018, first at ATIS 2017): dL/dW[j] = dL/db[j] * x, so x = dL/dW[j] / dL/db[j];
- ``infer_labels``: iDLG's label rule (Zhao et al., "iDLG: improved deep leakage from gradients",
  2020): the last layer's bias gradient is mean_i (softmax_i - onehot(y_i)), negative only at
  the batch's labels when they are distinct;
- ``invert_gradient``: gradient matching by Adam on dummy inputs, with Zhu et al.'s squared
  distance ("Deep leakage from gradients", NeurIPS 2019) or Geiping et al.'s 1 - cosine
  similarity over all parameters as one vector, optional total variation, clipping to the data
  range, their step decay of the rate and restarts ("Inverting gradients", NeurIPS 2020),
  and, for weight-factorization WAFFLe (Hao et al., IEEE Access 2022), a factor selection b
  that the attacker does not hold, optimised jointly with x;
- ``matched_psnr``: PSNR of each true image against its reconstruction after the best
  one-to-one matching, since a batch's order is not recoverable.

Deviations: labels are fixed (inferred by iDLG's rule or given), never optimised as soft labels
(DLG); plain Adam steps (Geiping et al. use the sign of the gradient); no image prior other
than TV; every restart runs all ``steps``, and the restart with the lowest final matching loss
(without TV) wins. Restarts are batched with ``torch.func.vmap``, so the model must be vmap-able
(every model of ``fltutor.models`` and ``fltutor.layers`` is) and without batch statistics.
Matching converges fastest on smooth models (Zhu et al. use sigmoid); on ReLU models such as
WAFFLe's factorized MLP it can take a thousand steps, and "l2" converged faster there than "cosine".

WAFFLe note: a factorized first layer computes W_a diag(r * b) W_b x, which is unchanged by
(x, b) -> (a x, b / a) for any a > 0, and so is the gradient message. An attacker who optimises
b as well can thus rebuild x only up to one scale factor (clipping to the data range bounds it).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import nn, Tensor
from torch.func import functional_call, grad, vmap

from . import engine
from .checks import SettingError, integer, number, option
from .inversion import _tv, image_pair, psnr
from .privacy import _xy, seeded_generator

__all__ = ["client_gradient", "invert_linear_layer", "infer_labels", "invert_gradient", "match_order",
           "matched_psnr"]

LOSSES = ("cosine", "l2")


# ---- the message -------------------------------------------------------------------------------
def _params(model: nn.Module, params: engine.Params | None) -> engine.Params:
    """The parameters the gradient is taken at, detached; ``params`` None: the model's own."""
    if params is None:
        return {k: v.detach() for k, v in model.named_parameters()}
    if not isinstance(params, Mapping) or not all(isinstance(v, Tensor) for v in params.values()):
        raise SettingError(f"params: got {type(params).__name__}; expected a dict {{name: tensor}} of the model's "
                           "parameters, or None for the model's own")
    return {k: v.detach() for k, v in params.items()}


def _ce_grad(model: nn.Module, fixed: engine.Params, free: engine.Params, x: Tensor, y: Tensor,
             inputs: tuple) -> engine.Params:
    """d mean CE / d ``free`` at (fixed + free), one batch x (B, ...); composable with vmap and grad."""
    def loss(p):
        logits = functional_call(model, {**fixed, **p}, (x, *inputs))    # (B, K)
        return F.cross_entropy(logits, y)
    return grad(loss)(free)


def client_gradient(model: nn.Module, params: engine.Params | None, x: Tensor, y: Tensor, *inputs) -> engine.Params:
    """The gradient of the mean cross-entropy on one batch, {name: like param}: one FedSGD message.

    A client that takes one SGD step sends the update -lr * this gradient. ``inputs`` are extra
    model inputs (WAFFLe's factor selection b); ``params`` None: the model's own parameters.
    """
    _xy(x, y)
    p = _params(model, params)
    free = {k: v for k, v in p.items() if v.is_floating_point()}
    fixed = {k: v for k, v in p.items() if k not in free}
    return {k: g.detach() for k, g in _ce_grad(model, fixed, free, x, y.to(x.device), inputs).items()}


# ---- closed forms ------------------------------------------------------------------------------
def invert_linear_layer(grad_weight: Tensor, grad_bias: Tensor) -> Tensor:
    """Phong et al.'s closed form: the input (in,) of a linear layer with bias at batch size 1.

    y = W x + c gives dL/dW = delta x^T and dL/dc = delta, so x = dL/dW[j] / dL/dc[j] for any row j
    with dL/dc[j] != 0; we take the row with the largest |dL/dc[j]|. For a batch of B > 1 this is
    the mean of the B inputs weighted by their deltas at row j, not one input.
    """
    if not isinstance(grad_weight, Tensor) or grad_weight.ndim != 2:
        raise SettingError(f"grad_weight: got shape {tuple(getattr(grad_weight, 'shape', ()))}; expected "
                           "(out, in), the gradient of a linear layer's weight")
    if not isinstance(grad_bias, Tensor) or grad_bias.shape != grad_weight.shape[:1]:
        raise SettingError(f"grad_bias: got shape {tuple(getattr(grad_bias, 'shape', ()))}; expected "
                           f"({grad_weight.shape[0]},), the bias gradient of the same layer")
    j = int(grad_bias.abs().argmax())
    if grad_bias[j] == 0:
        raise SettingError("grad_bias: every entry is 0, so the layer's input cannot be read off; "
                           "the batch's loss gradient vanished at this layer")
    return grad_weight[j] / grad_bias[j]                                   # (in,)


def infer_labels(grad_bias: Tensor, batch_size: int) -> Tensor:
    """iDLG's rule: the ``batch_size`` most negative entries of the last layer's bias gradient (K,).

    The bias gradient of the mean cross-entropy is mean_i (softmax_i - onehot(y_i)): at batch size 1
    its only negative entry is the label (Zhao et al. 2020). For B > 1 the rule is exact only when
    the B labels are distinct and the model's confidence is low enough that every label's entry
    stays negative; repeated labels are returned once each plus the next most negative classes.
    Returns the labels (B,) sorted ascending, since their order in the batch is not recoverable.
    """
    if not isinstance(grad_bias, Tensor) or grad_bias.ndim != 1 or len(grad_bias) == 0:
        raise SettingError(f"grad_bias: got shape {tuple(getattr(grad_bias, 'shape', ()))}; expected (K,), "
                           "the gradient of the last layer's bias, one entry per class")
    batch_size = integer("batch_size", batch_size, low=1, high=len(grad_bias),
                         hint="iDLG's rule finds at most one label per class: pass labels= for larger batches")
    return torch.sort(torch.topk(-grad_bias.detach(), batch_size).indices).values   # (B,)


# ---- gradient matching -------------------------------------------------------------------------
def _distance(g: engine.Params, target: engine.Params, loss: str) -> Tensor:
    """Zhu's sum of squared differences, or Geiping's 1 - cosine of the concatenated gradients."""
    if loss == "l2":
        return sum(((g[k] - t) ** 2).sum() for k, t in target.items())
    dot = sum((g[k] * t).sum() for k, t in target.items())
    gg = sum((g[k] ** 2).sum() for k in target)
    tt = sum((t ** 2).sum() for t in target.values())
    return 1 - dot / (gg.sqrt() * tt.sqrt()).clamp_min(torch.finfo(dot.dtype).tiny)


def _shape(shape) -> tuple[int, ...]:
    items = shape if isinstance(shape, (list, tuple, torch.Size)) else [shape]
    if len(items) == 0:
        raise SettingError("shape: got (); expected the shape of one input, e.g. (1, 28, 28)")
    return tuple(integer("shape", s, low=1) for s in items)


def _clamp(clamp) -> tuple[float, float] | None:
    if clamp is None:
        return None
    if not isinstance(clamp, (list, tuple)) or len(clamp) != 2:
        raise SettingError(f"clamp: got {clamp!r}; expected a pair (lo, hi) or None")
    lo, hi = number("clamp", clamp[0]), number("clamp", clamp[1])
    if lo >= hi:
        raise SettingError(f"clamp: got ({lo}, {hi}); expected lo < hi, e.g. (0.0, 1.0) for pixels in [0, 1]")
    return lo, hi


def _target(target_grad, p: engine.Params) -> engine.Params:
    """The intercepted gradient, checked against the parameters: a non-empty subset of them, same shapes."""
    if not isinstance(target_grad, Mapping) or not target_grad:
        raise SettingError(f"target_grad: got {type(target_grad).__name__}; expected a non-empty dict "
                           "{parameter name: gradient}, e.g. from client_gradient")
    out = {}
    for k, t in target_grad.items():
        if k not in p or not p[k].is_floating_point():
            raise SettingError(f"target_grad: has key {k!r}, which is not a floating-point parameter of the "
                               f"model; expected keys among {sorted(q for q in p if p[q].is_floating_point())}")
        if not isinstance(t, Tensor) or t.shape != p[k].shape:
            raise SettingError(f"target_grad: {k!r} has shape {tuple(getattr(t, 'shape', ()))}; expected "
                               f"{tuple(p[k].shape)}, the shape of the parameter")
        if not torch.isfinite(t).all():
            raise SettingError(f"target_grad: {k!r} holds NaN or infinite values; expected a finite gradient")
        out[k] = t.detach().to(p[k].device, p[k].dtype)
    return out


def _unknown(unknown_inputs, dtype, device) -> dict[str, Tensor] | None:
    """Initial guesses in [0, 1] as logits (clipped to (1e-4, 1 - 1e-4) first)."""
    if unknown_inputs is None:
        return None
    if not isinstance(unknown_inputs, Mapping) or not unknown_inputs or \
            not all(isinstance(v, Tensor) and v.is_floating_point() for v in unknown_inputs.values()):
        raise SettingError(f"unknown_inputs: got {type(unknown_inputs).__name__}; expected a non-empty dict "
                           "{layer: float tensor of initial guesses in [0, 1]}, e.g. {'fc1': torch.full((F,), 0.5)}")
    for k, v in unknown_inputs.items():
        if not torch.isfinite(v).all() or v.min() < 0 or v.max() > 1:
            raise SettingError(f"unknown_inputs: {k!r} has values outside [0, 1]; the guesses are "
                               "optimised as sigmoid(logits), so they must lie in [0, 1]")
    return {k: torch.logit(v.detach().to(device, dtype).clamp(1e-4, 1 - 1e-4)) for k, v in unknown_inputs.items()}


def invert_gradient(model: nn.Module, params: engine.Params | None, target_grad: engine.Params, *inputs,
                    shape: Sequence[int], batch_size: int, labels=None, steps: int, lr: float, tv: float = 0.0,
                    loss: str = "cosine", restarts: int = 1, clamp: tuple[float, float] | None = (0.0, 1.0),
                    seed: int, unknown_inputs: Mapping[str, Tensor] | None = None) -> dict:
    """Rebuild a batch (B, *shape) whose mean-CE gradient at ``params`` matches ``target_grad``.

    Minimises D(grad(x), target) + tv * TV(x) over dummy inputs x by Adam at rate ``lr``, divided by
    10 after 3/8, 5/8 and 7/8 of ``steps`` (Geiping et al.), clipping x to ``clamp`` after every step
    (None: no clipping). D is ``loss``: "cosine", 1 - cosine similarity of the two gradients as one
    vector over every key of ``target_grad`` (Geiping et al.); "l2", their squared distance (Zhu et
    al.). ``target_grad`` may hold a subset of the parameters (those the attacker sees).

    - ``labels``: None infers them by iDLG's rule (``infer_labels``) from the gradient of the last
      bias whose size is the number of classes (it must be in ``target_grad``); else the B true
      labels, the common "labels known" assumption;
    - ``restarts``: R runs from different random starts (restart r from ``seeded_generator(seed, r)``,
      uniform in ``clamp`` or standard normal without it), batched with vmap; the one with the
      lowest final D is returned;
    - ``inputs``: extra model inputs the attacker holds or guesses (fixed), e.g. WAFFLe's b;
    - ``unknown_inputs``: a dict {layer: initial guess in [0, 1]} optimised jointly with x as
      sigmoid(logits); the model is called as model(x, *inputs, {layer: guess}).

    Returns {"x": (B, *shape), "labels": (B,), "loss": D of the best restart, "losses": (R,) float64,
    "unknown_inputs": the best restart's optimised guesses, or None}.
    """
    shape = _shape(shape)
    batch_size = integer("batch_size", batch_size, low=1)
    steps = integer("steps", steps, low=1)
    lr = number("lr", lr, low=0, low_open=True, hint="Geiping et al. use 0.1")
    tv = number("tv", tv, low=0)
    loss = option("loss", loss, LOSSES, hint="'cosine' (Geiping et al.) or 'l2' (Zhu et al.)")
    restarts = integer("restarts", restarts, low=1)
    seed = integer("seed", seed, low=0, high=2**32 - 1)
    box = _clamp(clamp)
    if tv > 0 and len(shape) < 2:
        raise SettingError(f"tv: got {tv} for inputs of shape {shape}; total variation needs images "
                           "(..., H, W): pass tv=0 for flat inputs")
    p = _params(model, params)
    target = _target(target_grad, p)
    ref = next(iter(target.values()))
    dtype, device = ref.dtype, ref.device
    free = {k: p[k] for k in target}
    fixed = {k: v for k, v in p.items() if k not in free}
    u0 = _unknown(unknown_inputs, dtype, device)

    def guesses(u):
        return () if u is None else ({k: torch.sigmoid(v) for k, v in u.items()},)

    try:
        with torch.no_grad():
            logits = functional_call(model, p, (torch.zeros(1, *shape, dtype=dtype, device=device),
                                                *inputs, *guesses(u0)))  # (1, K)
    except (RuntimeError, TypeError, KeyError, IndexError) as err:
        raise SettingError(f"shape: the model fails on a dummy batch (1, {', '.join(map(str, shape))}) with "
                           f"inputs {len(inputs)} fixed + {0 if u0 is None else 1} unknown: {err}; expected the "
                           "shape of one of the client's inputs and the model's extra inputs") from err
    K = logits.shape[-1]
    if labels is None:
        last = [k for k in p if k.endswith("bias") and p[k].shape == (K,)]
        if not last or last[-1] not in target:
            raise SettingError("labels: got None, but iDLG's rule needs the gradient of the last layer's bias "
                               f"(a bias of {K} entries{', ' + repr(last[-1]) if last else ''}) in target_grad; "
                               "pass labels= (the 'labels known' assumption) or include that gradient")
        y = infer_labels(target[last[-1]], batch_size).to(device)       # (B,)
    else:
        y = torch.as_tensor(labels).to(device).reshape(-1)
        if y.is_floating_point() or y.dtype == torch.bool or y.shape != (batch_size,) or \
                int(y.min()) < 0 or int(y.max()) >= K:
            raise SettingError(f"labels: got {tuple(y.shape)} {y.dtype} with values {y.tolist()[:5]}; expected "
                               f"({batch_size},) integer labels in 0..{K - 1}, or None to infer them (iDLG)")

    def match(x, u):                                                     # x (B, *shape), one restart
        g = _ce_grad(model, fixed, free, x, y, (*inputs, *guesses(u)))
        d = _distance(g, target, loss)
        return d + tv * _tv(x).sum() if tv > 0 else d, d

    starts = []
    for r in range(restarts):
        gen = seeded_generator(seed, r)
        if box is None:
            starts.append(torch.randn(batch_size, *shape, generator=gen, dtype=dtype))
        else:
            starts.append(torch.rand(batch_size, *shape, generator=gen, dtype=dtype) * (box[1] - box[0]) + box[0])
    x = torch.stack(starts).to(device).requires_grad_(True)             # (R, B, *shape)
    u = None if u0 is None else {k: v.expand(restarts, *v.shape).clone().requires_grad_(True)
                                 for k, v in u0.items()}                 # {layer: (R, F)}
    opt = torch.optim.Adam([x, *([] if u is None else u.values())], lr=lr)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [steps * 3 // 8, steps * 5 // 8, steps * 7 // 8], gamma=0.1)
    in_dims = (0, None if u is None else 0)                              # the restart dimension R
    step_fn = vmap(grad(match, argnums=0 if u is None else (0, 1), has_aux=True), in_dims=in_dims)
    for _ in range(steps):
        if u is None:
            x.grad, _ = step_fn(x.detach(), None)                        # (R, B, *shape)
        else:
            (x.grad, gu), _ = step_fn(x.detach(), {k: v.detach() for k, v in u.items()})
            for k in u:
                u[k].grad = gu[k]                                        # (R, F)
        opt.step()
        sched.step()
        if box is not None:
            with torch.no_grad():
                x.clamp_(*box)
    with torch.no_grad():
        _, d = vmap(match, in_dims=in_dims)(x.detach(), None if u is None else {k: v.detach() for k, v in u.items()})  # (R,)
    if not torch.isfinite(d).any():
        raise SettingError(f"lr: every restart's matching loss became NaN or infinite with lr={lr}; lower lr "
                           "or pass clamp")
    best = int(torch.nan_to_num(d, nan=float("inf")).argmin())
    return {"x": x[best].detach(), "labels": y.cpu(), "loss": float(d[best]), "losses": d.double().cpu(),
            "unknown_inputs": None if u is None else {k: torch.sigmoid(v[best].detach()) for k, v in u.items()}}


# ---- scoring -----------------------------------------------------------------------------------
def match_order(recon: Tensor, truth: Tensor) -> Tensor:
    """order (N,) such that recon[order[i]] is matched to truth[i], minimising the summed MSE."""
    image_pair(("truth", truth), ("recon", recon))
    r = recon.detach().double().cpu().flatten(1)                         # (N, D)
    t = truth.detach().double().cpu().flatten(1)                         # (N, D)
    mse = ((t[:, None, :] - r[None, :, :]) ** 2).mean(-1)                # (N true, N recon)
    if not torch.isfinite(mse).all():
        raise SettingError("recon: the images hold NaN or infinite values; matching needs finite pixels")
    rows, cols = linear_sum_assignment(mse.numpy())
    order = np.empty(len(rows), dtype=np.int64)
    order[rows] = cols
    return torch.from_numpy(order)


def matched_psnr(recon: Tensor, truth: Tensor, data_range: float) -> Tensor:
    """PSNR (N,) float64 of each true image against its reconstruction, after the best one-to-one matching.

    The matching minimises the summed MSE (Hungarian algorithm, ``match_order``), since the order of
    a batch is not recoverable from its gradient; the result is in the order of ``truth``.
    """
    order = match_order(recon, truth)
    return psnr(recon[order.to(recon.device)], truth, data_range)
