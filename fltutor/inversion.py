"""Model inversion: rebuild a class's typical input from a trained model, and score the result.

- ``invert_class``: Fredrikson et al.'s MI-FACE ("Model inversion attacks that exploit confidence
  information and basic countermeasures", CCS 2015, Alg. 1): gradient descent on the input
  x_i = Process(x_{i-1} - lr * grad c(x_{i-1})) for the cost c(x) = 1 - softmax_target(x) + AuxTerm(x),
  the model held fixed;
- ``psnr``, ``class_means``, ``inversion_report``: the two metrics of weight-factorization
  WAFFLe (Hao et al., IEEE Access 2022, Sec. IV-E, Table 4, Fig. 6, after Zhang et al. CVPR 2020):
  PSNR of each reconstruction against the mean training image of its class, and attack accuracy,
  the fraction of reconstructions that a separately trained evaluation classifier assigns to
  the target class.

Deviations from Fredrikson's Alg. 1: a fixed number of ``steps`` (no early stop on patience or on
a cost threshold); Process is only clipping to ``clamp`` (no denoising or sharpening); AuxTerm is
an optional total-variation and L2 penalty. As in ``privacy``, the target is (model, params, *inputs):
``inputs`` are extra model inputs such as WAFFLe's factor selection b; ``params`` None means the
model's own parameters.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn, Tensor
from torch.func import functional_call

from . import engine
from .checks import SettingError, integer, number, option
from .privacy import _xy, seeded_generator

__all__ = ["invert_class", "psnr", "class_means", "inversion_report"]


def _forward(model: nn.Module, params: engine.Params | None, x: Tensor, *inputs) -> Tensor:
    """Logits of one model; ``params`` None: the model's own."""
    return model(x, *inputs) if params is None else functional_call(model, params, (x, *inputs))


def _classes(name: str, value) -> tuple[list[int], bool]:
    """Class indices as a list, and whether a single class (int) was given."""
    if isinstance(value, Tensor):
        if value.ndim > 1 or value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            raise SettingError(f"{name}: got a {tuple(value.shape)} {value.dtype} tensor; expected integer "
                               "class indices, a 0-D or 1-D integer tensor")
        value = value.tolist()
    single = not isinstance(value, (list, tuple))
    values = [value] if single else list(value)
    if not values:
        raise SettingError(f"{name}: got an empty list; expected at least one class index")
    return [integer(name, v, low=0) for v in values], single


def _tv(x: Tensor) -> Tensor:
    """Anisotropic total variation of each image over its last two dims: (K, ..., H, W) -> (K,)."""
    dh = (x[..., 1:, :] - x[..., :-1, :]).abs().flatten(1).sum(1)   # (K,)
    dw = (x[..., :, 1:] - x[..., :, :-1]).abs().flatten(1).sum(1)   # (K,)
    return dh + dw


def invert_class(model: nn.Module, params: engine.Params | None, target_class, *inputs, shape: Sequence[int],
                 steps: int, lr: float, tv_weight: float = 0.0, l2_weight: float = 0.0,
                 clamp: tuple[float, float] | None = (0.0, 1.0), start: str = "zeros",
                 seed: int | None = None) -> Tensor:
    """MI-FACE (Fredrikson et al. 2015, Alg. 1): the input (1, *shape), or (K, *shape) for K classes.

    Minimises, per image, c(x) = 1 - softmax(model(x))[target] + tv_weight * TV(x) + l2_weight * |x|^2
    by ``steps`` steps of plain gradient descent, clipping to ``clamp`` (None: no clipping) after
    each step and at the start. ``start``: "zeros", or "random" (uniform in ``clamp``, or standard
    normal without it, from ``seeded_generator(seed)``). The K images are one batch whose summed cost
    has each image's own gradient, so a batch equals K separate runs if the model treats samples
    independently (put batch-norm models in eval mode). Where the model ignores its input the
    gradient is 0 and the image stays at its start (with a regulariser, it only shrinks).
    """
    shape = tuple(integer("shape", s, low=1) for s in (shape if isinstance(shape, (list, tuple)) else [shape]))
    steps = integer("steps", steps, low=1)
    lr = number("lr", lr, low=0, low_open=True)
    tv_weight = number("tv_weight", tv_weight, low=0)
    l2_weight = number("l2_weight", l2_weight, low=0)
    start = option("start", start, ["zeros", "random"])
    if tv_weight > 0 and len(shape) < 2:
        raise SettingError(f"tv_weight: got {tv_weight} for inputs of shape {shape}; total variation needs "
                           "images (..., H, W): pass tv_weight=0 for flat inputs")
    if clamp is not None:
        if not isinstance(clamp, (list, tuple)) or len(clamp) != 2:
            raise SettingError(f"clamp: got {clamp!r}; expected a pair (lo, hi) or None")
        lo, hi = number("clamp", clamp[0]), number("clamp", clamp[1])
        if lo >= hi:
            raise SettingError(f"clamp: got ({lo}, {hi}); expected lo < hi, e.g. (0.0, 1.0) for pixels in [0, 1]")
    classes, single = _classes("target_class", target_class)
    if start == "random" and seed is None:
        raise SettingError("seed: got None; start='random' draws the start image, so pass seed=<int>")
    ref = next((p for p in (params.values() if params is not None else model.parameters())
                if p.is_floating_point()), None)
    dtype = ref.dtype if ref is not None else torch.get_default_dtype()
    device = ref.device if ref is not None else torch.device("cpu")
    K = len(classes)
    if start == "zeros":
        x = torch.zeros(K, *shape, dtype=dtype)                     # (K, *shape)
    else:
        g = seeded_generator(seed)
        x = torch.rand(K, *shape, generator=g, dtype=dtype) * (hi - lo) + lo if clamp is not None \
            else torch.randn(K, *shape, generator=g, dtype=dtype)   # (K, *shape)
    x = x.to(device)
    if clamp is not None:
        x = x.clamp(lo, hi)
    target = torch.tensor(classes, device=device)                  # (K,)
    with torch.enable_grad():
        for i in range(steps):
            x = x.detach().requires_grad_(True)
            logits = _forward(model, params, x, *inputs)           # (K, num_classes)
            if i == 0 and int(target.max()) >= logits.shape[-1]:
                raise SettingError(f"target_class: got class {int(target.max())} but the model has "
                                   f"{logits.shape[-1]} classes (0 to {logits.shape[-1] - 1})")
            if i == 0 and not torch.isfinite(logits).all():
                raise SettingError("params: the model gives NaN or infinite logits at the start image; "
                                   "check the model's parameters")
            cost = 1 - logits.softmax(-1).gather(1, target[:, None])[:, 0]  # (K,) Fredrikson's c(x)
            if tv_weight > 0:
                cost = cost + tv_weight * _tv(x)
            if l2_weight > 0:
                cost = cost + l2_weight * (x ** 2).flatten(1).sum(1)
            (grad,) = torch.autograd.grad(cost.sum(), x)            # (K, *shape) each image's own gradient
            x = x.detach() - lr * grad
            if clamp is not None:
                x = x.clamp(lo, hi)                                 # Fredrikson's Process
    if not torch.isfinite(x).all():
        raise SettingError(f"lr: the reconstruction became NaN or infinite with lr={lr}; lower lr or pass clamp")
    return x.detach()


def image_pair(first: tuple[str, Tensor], second: tuple[str, Tensor]) -> None:
    """Check two named image batches (N, ...) of the same shape, naming the argument that is wrong."""
    for name, t in (first, second):
        if not isinstance(t, Tensor) or t.ndim < 2 or len(t) == 0:
            raise SettingError(f"{name}: got {type(t).__name__} of shape {tuple(getattr(t, 'shape', ()))}; "
                               "expected a tensor (N, ...) of N >= 1 images")
    if first[1].shape != second[1].shape:
        raise SettingError(f"{second[0]}: got shape {tuple(second[1].shape)}; expected the shape of {first[0]}, "
                           f"{tuple(first[1].shape)}")


def psnr(a: Tensor, b: Tensor, data_range: float) -> Tensor:
    """Peak signal-to-noise ratio per image in dB, 10 log10(data_range^2 / MSE): (N, ...) x2 -> (N,) float64.

    Identical images (MSE 0) give +inf, as 10 log10(r^2 / 0) does.
    """
    data_range = number("data_range", data_range, low=0, low_open=True, hint="1.0 for pixels in [0, 1]")
    image_pair(("a", a), ("b", b))
    mse = ((a.detach().double() - b.detach().double().to(a.device)) ** 2).flatten(1).mean(1)  # (N,)
    if not torch.isfinite(mse).all():
        raise SettingError("a: the images hold NaN or infinite values; PSNR needs finite pixels")
    return 10 * torch.log10(data_range ** 2 / mse)                  # (N,) inf where mse == 0


def class_means(x: Tensor, y: Tensor, num_classes: int) -> Tensor:
    """The mean image of each class, (K, ...) in x's dtype; a class without samples is all NaN."""
    _xy(x, y)
    num_classes = integer("num_classes", num_classes, low=1)
    if int(y.max()) >= num_classes:
        raise SettingError(f"y: has label {int(y.max())}; expected labels below num_classes={num_classes}")
    sums = torch.zeros(num_classes, *x.shape[1:], dtype=x.dtype, device=x.device).index_add_(0, y.to(x.device), x)
    counts = torch.bincount(y, minlength=num_classes).to(x.device, x.dtype)  # (K,)
    return sums / counts.view(-1, *([1] * (x.ndim - 1)))           # (K, ...) 0/0 = NaN when empty


def inversion_report(recon: Tensor, x_train: Tensor, y_train: Tensor, classes, eval_model: nn.Module,
                     eval_params: engine.Params | None, *eval_inputs, data_range: float) -> dict:
    """WAFFLe Table 4: PSNR of each reconstruction against its class's mean training image, and attack accuracy.

    recon (K, ...) holds one reconstruction of each of ``classes`` (K,). Attack accuracy is the
    fraction that ``eval_model`` (argmax of its logits, ties to the lowest class) assigns to the
    target class; a classifier that ignores its input thus scores 1/K on K distinct classes 0..K-1,
    chance. "mean_psnr" is +inf if any reconstruction equals its class mean exactly.
    """
    cls, _ = _classes("classes", classes)
    _xy(x_train, y_train, ("x_train", "y_train"))
    if not isinstance(recon, Tensor) or recon.shape != (len(cls), *x_train.shape[1:]):
        raise SettingError(f"recon: got shape {tuple(getattr(recon, 'shape', ()))}; expected "
                           f"({len(cls)}, {', '.join(map(str, x_train.shape[1:]))}), one image per class in classes")
    present = set(y_train.tolist())
    missing = [c for c in cls if c not in present]
    if missing:
        raise SettingError(f"classes: {missing} have no sample in y_train, so there is no class mean to compare with")
    means = class_means(x_train, y_train, max(max(cls), int(y_train.max())) + 1)[cls]  # (K, ...)
    scores = psnr(recon, means.to(recon.dtype), data_range)         # (K,)
    with torch.no_grad():
        pred = _forward(eval_model, eval_params, recon, *eval_inputs).argmax(-1).cpu()  # (K,)
    hit = pred == torch.tensor(cls)
    return {"psnr": scores, "mean_psnr": float(scores.mean()), "attack_accuracy": float(hit.double().mean()),
            "predicted": pred, "classes": cls}
