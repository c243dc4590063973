"""Membership-inference attacks on trained models, and the metrics that score them.

An attack gives each queried sample a score, higher meaning "was in the training set", and is
judged on known members and non-members:

- metrics: ROC curve, AUC (Mann-Whitney U, ties counted half), TPR at a low FPR (Carlini et
  al., "Membership inference attacks from first principles", S&P 2022) and the accuracy/F1
  of weight-factorization WAFFLe's Table 3 (``attack_report``);
- ``loss_threshold_attack``: score = -loss of the sample (Yeom et al., CSF 2018);
- ``logit_attack``: a logistic-regression attacker on the target's logits, fitted on a labelled
  part of the members/non-members and tested on the rest (GMA, TMLR 2023, App. F, after Tople
  et al. 2020);
- ``shadow_attack``: shadow models trained on the attacker's own data, then one attack model
  per class on their sorted softmax outputs (Shokri et al., S&P 2017; WAFFLe, IEEE Access 2022,
  Sec. IV-E, Table 3, with 3 shadow models).

Every attack takes the target as (model, params, *inputs): ``inputs`` are extra model inputs
such as WAFFLe's factor selection b; ``params`` None means the model's own parameters.
Randomness comes from explicit seeds only (``seeded_generator``).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, Tensor
from torch.func import functional_call

from . import engine
from .checks import SettingError, flag, integer, number

__all__ = ["roc_curve", "auc", "tpr_at_fpr", "attack_report", "fit_logistic", "seeded_generator",
           "loss_threshold_attack", "logit_attack", "train_shadows", "fit_shadow_attack", "apply_shadow_attack",
           "shadow_attack"]


# ---- checking arrays ---------------------------------------------------------------------------
def _tensor(name: str, value) -> Tensor:
    """``value`` (tensor, numpy array or list) as a CPU tensor, or an error naming ``name``."""
    if isinstance(value, Tensor):
        return value.detach().cpu()
    try:
        return torch.as_tensor(np.asarray(value))
    except (TypeError, ValueError, RuntimeError) as err:
        raise SettingError(f"{name}: got {type(value).__name__}; expected a tensor, numpy array or list "
                           "of numbers") from err


def _members(is_member, n: int) -> Tensor:
    """Membership flags (n,) as bool, with at least one member and one non-member."""
    m = _tensor("is_member", is_member)
    if m.shape != (n,):
        raise SettingError(f"is_member: got shape {tuple(m.shape)}; expected ({n},), one flag per sample or score")
    if m.dtype != torch.bool:
        if m.is_complex() or not ((m == 0) | (m == 1)).all():
            bad = sorted(set(m[(m != 0) & (m != 1)].tolist()))[:3]
            raise SettingError(f"is_member: got values such as {bad}; expected True/False or 0/1 (1 = member)")
        m = m == 1
    if m.all() or not m.any():
        raise SettingError(f"is_member: {int(m.sum())} members among {n} samples; an attack is scored on "
                           "both members and non-members, so give at least one of each")
    return m


def _scores_members(scores, is_member) -> tuple[Tensor, Tensor]:
    """Checked scores (n,) float64 and membership (n,) bool."""
    s = _tensor("scores", scores)
    if s.ndim != 1 or len(s) == 0 or s.dtype == torch.bool or s.is_complex():
        raise SettingError(f"scores: got shape {tuple(s.shape)} of {s.dtype}; expected a non-empty 1-D array of "
                           "real numbers, one score per queried sample")
    s = s.double()
    if not torch.isfinite(s).all():
        raise SettingError(f"scores: {int((~torch.isfinite(s)).sum())} of {len(s)} are NaN or infinite; "
                           "every score must be finite (clamp the losses or logits first)")
    return s, _members(is_member, len(s))


def _xy(x: Tensor, y: Tensor | None, names: tuple[str, str] = ("x", "y")) -> None:
    """x is a tensor (n, ...) with n >= 1; y (if given) integer labels (n,) >= 0."""
    if not isinstance(x, Tensor) or x.ndim < 1 or len(x) == 0:
        raise SettingError(f"{names[0]}: got {type(x).__name__} of shape {tuple(getattr(x, 'shape', ()))}; "
                           "expected a tensor (n, ...) of samples, n >= 1")
    if y is not None and (not isinstance(y, Tensor) or y.shape != x.shape[:1] or y.is_floating_point()
                          or y.dtype == torch.bool or int(y.min()) < 0):
        raise SettingError(f"{names[1]}: got {tuple(getattr(y, 'shape', ()))} {getattr(y, 'dtype', type(y).__name__)}; "
                           f"expected integer class labels >= 0 of shape ({len(x)},), one per sample of {names[0]}")


def seeded_generator(seed: int, *keys: int) -> torch.Generator:
    """A CPU generator for (seed, *keys): independent streams for any seed in [0, 2**32)."""
    integer("seed", seed, low=0, high=2**32 - 1)
    g = torch.Generator()
    g.manual_seed(int(np.random.SeedSequence([seed, *keys]).generate_state(1, np.uint64)[0]))
    return g


# ---- metrics -----------------------------------------------------------------------------------
def _roc(s: Tensor, m: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """FP counts, TP counts and thresholds of "member iff score >= t", for t = +inf and each distinct score."""
    order = torch.argsort(s, descending=True, stable=True)
    s, m = s[order], m[order]                                       # (n,) highest score first
    last = torch.ones(len(s), dtype=torch.bool)
    last[:-1] = s[1:] != s[:-1]                                     # last sample of each tie group
    zero = torch.zeros(1, dtype=torch.float64)
    fp = torch.cat([zero, (~m).double().cumsum(0)[last]])          # (T + 1,)
    tp = torch.cat([zero, m.double().cumsum(0)[last]])             # (T + 1,)
    return fp, tp, torch.cat([torch.tensor([float("inf")], dtype=torch.float64), s[last]])


def roc_curve(scores, is_member) -> tuple[Tensor, Tensor]:
    """(FPR, TPR) of "member iff score >= t" for t = +inf and every distinct score, (0, 0) to (1, 1)."""
    s, m = _scores_members(scores, is_member)
    fp, tp, _ = _roc(s, m)
    return fp / (~m).sum(), tp / m.sum()


def auc(scores, is_member) -> float:
    """Area under the ROC curve = Mann-Whitney U / (members x non-members), ties counted half."""
    s, m = _scores_members(scores, is_member)
    _, inverse, counts = torch.unique(s, return_inverse=True, return_counts=True)
    below = (counts.cumsum(0) - counts).double()                    # (U,) samples scored strictly lower
    midrank = below + (counts.double() + 1) / 2                     # (U,) 1-based ranks, ties averaged
    n1, n0 = int(m.sum()), int((~m).sum())
    u = midrank[inverse][m].sum() - n1 * (n1 + 1) / 2               # the members' U
    return float(u / (n1 * n0))


def tpr_at_fpr(scores, is_member, fpr: float) -> float:
    """Highest TPR of a threshold whose FPR is at most ``fpr``, without interpolation (Carlini et al.).

    With N non-members the FPR moves in steps of 1/N: below 1/N this is the TPR at FPR 0.
    """
    fpr = number("fpr", fpr, low=0, high=1, low_open=True, high_open=True, hint="Carlini et al. use 0.01 and 0.001")
    s, m = _scores_members(scores, is_member)
    fp, tp, _ = _roc(s, m)
    allowed = fp <= np.floor(fpr * float((~m).sum()) + 1e-9)        # in counts: 0.01 of 300 is 3
    return float(tp[allowed].max() / m.sum())


def attack_report(scores, is_member, threshold: float | None = None) -> dict:
    """Accuracy and F1 at a threshold, AUC, TPR at 1% and 0.1% FPR, on a balanced member/non-member set.

    ``threshold`` None: the threshold with the best accuracy on these very scores (an oracle's
    choice, so an upper bound for a threshold attack; the highest if several tie); else "member
    iff score >= threshold". F1 counts members as positives. Chance accuracy is 50% (WAFFLe Table 3).
    """
    s, m = _scores_members(scores, is_member)
    n1, n0 = int(m.sum()), int((~m).sum())
    if n1 != n0:
        raise SettingError(f"is_member: {n1} members and {n0} non-members; accuracy and F1 are read against "
                           "a 50% chance level, so pass as many non-members as members (subsample the larger side)")
    if threshold is None:
        fp, tp, thresholds = _roc(s, m)                             # balanced: accuracy = 1/2 + (tp - fp) / 2n
        t, rule = float(thresholds[torch.argmax(tp - fp)]), "best accuracy on these scores"
    else:
        t, rule = number("threshold", threshold, hint="a score: member iff score >= threshold"), "given"
    pred = s >= t
    tp, fp, fn = int((pred & m).sum()), int((pred & ~m).sum()), int((~pred & m).sum())
    return {"accuracy": (tp + n0 - fp) / (n1 + n0), "f1": 2 * tp / (2 * tp + fp + fn), "auc": auc(s, m),
            "tpr@1%fpr": tpr_at_fpr(s, m, 0.01), "tpr@0.1%fpr": tpr_at_fpr(s, m, 0.001),
            "threshold": t, "threshold_rule": rule, "members": n1, "non_members": n0}


# ---- the logistic-regression attacker ----------------------------------------------------------
def fit_logistic(features: Tensor, labels: Tensor, mask: Tensor | None = None, *, l2: float = 1e-3,
                 max_iter: int = 1000) -> tuple[Tensor, Tensor]:
    """G independent L2-penalised logistic regressions at once, by full-batch L-BFGS in float64.

    features (G, N, d), labels (G, N) bool, mask (G, N) bool (False: padding). Group g minimises
    its mean binary cross-entropy + l2/2 |w_g|^2 on standardised features (bias not penalised);
    returns (w (G, d), b (G,)) for the raw features: attack logit = features @ w + b.
    """
    l2 = number("l2", l2, low=0, low_open=True, hint="a small penalty keeps separable data finite")
    max_iter = integer("max_iter", max_iter, low=1)
    if features.ndim != 3 or labels.shape != features.shape[:2] or (mask is not None and mask.shape != labels.shape):
        raise SettingError(f"features: got {tuple(features.shape)} with labels {tuple(labels.shape)}; expected "
                           "features (G, N, d), labels and mask (G, N)")
    f, lab = features.detach().cpu().double(), labels.detach().cpu().double()  # (G, N, d), (G, N)
    keep = torch.ones_like(lab) if mask is None else mask.detach().cpu().double()  # (G, N)
    pos = (lab * keep).sum(1)
    if ((pos == 0) | (pos == keep.sum(1))).any():
        raise SettingError("labels: a group has only one label among its samples; each needs both to be fitted")
    count = keep.sum(1)                                             # (G,)
    mean = (f * keep[..., None]).sum(1) / count[:, None]            # (G, d)
    var = (((f - mean[:, None]) ** 2) * keep[..., None]).sum(1) / count[:, None]
    std = torch.where(var > 1e-24, var.sqrt(), torch.ones_like(var))  # a constant feature stays 0
    z = (f - mean[:, None]) / std[:, None]                          # (G, N, d)
    w = torch.zeros(f.shape[0], f.shape[2], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(f.shape[0], dtype=torch.float64, requires_grad=True)
    # the groups share no parameter, so the minimum of the sum is each group's own minimum
    opt = torch.optim.LBFGS([w, b], lr=1, max_iter=max_iter, tolerance_grad=1e-11, tolerance_change=1e-14,
                            history_size=20, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        opt.zero_grad()
        logit = (z * w[:, None]).sum(-1) + b[:, None]               # (G, N)
        bce = F.binary_cross_entropy_with_logits(logit, lab, reduction="none")
        loss = ((bce * keep).sum(1) / count + 0.5 * l2 * (w ** 2).sum(1)).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    w_raw = w.detach() / std                                        # (G, d)
    return w_raw, b.detach() - (w_raw * mean).sum(1)


# ---- attacks -----------------------------------------------------------------------------------
@torch.no_grad()
def _logits(model: nn.Module, params: engine.Params | None, x: Tensor, *inputs, batch_size: int = 2000) -> Tensor:
    """Logits (n, K) of one model on x, in chunks; ``params`` None: the model's own."""
    outs = [model(x[i:i + batch_size], *inputs) if params is None else
            functional_call(model, params, (x[i:i + batch_size], *inputs)) for i in range(0, len(x), batch_size)]
    return torch.cat(outs)


def loss_threshold_attack(model: nn.Module, params: engine.Params | None, x: Tensor, y: Tensor, is_member,
                          *inputs, threshold: float | None = None) -> dict:
    """Yeom et al.: score = -cross-entropy of each sample; ``attack_report`` plus "scores" (n,).

    Yeom's attacker says "member" when the loss is below the mean training loss L: pass
    ``threshold=-L``. None: the best-accuracy threshold (see ``attack_report``). No randomness.
    """
    _xy(x, y)
    m = _members(is_member, len(x))
    logits = _logits(model, params, x, *inputs).double()           # (n, K)
    if int(y.max()) >= logits.shape[-1]:
        raise SettingError(f"y: has label {int(y.max())} but the model has {logits.shape[-1]} classes")
    scores = -F.cross_entropy(logits, y.to(logits.device), reduction="none")  # (n,)
    return {**attack_report(scores, m, threshold), "scores": scores}


def _split(m: Tensor, train_fraction: float, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Stratified split: the same fraction of members and of non-members goes to the attacker's training part."""
    train, test = [], []
    for side, name in ((m, "members"), (~m, "non-members")):
        idx = side.nonzero().flatten()
        idx = idx[torch.randperm(len(idx), generator=generator)]
        cut = int(round(train_fraction * len(idx)))
        if cut < 1 or cut >= len(idx):
            raise SettingError(f"train_fraction: {train_fraction} leaves {cut} of {len(idx)} {name} for fitting "
                               f"and {len(idx) - cut} for testing; both need some: pass more samples or a "
                               "fraction nearer 0.5")
        train.append(idx[:cut]), test.append(idx[cut:])
    return torch.cat(train).sort().values, torch.cat(test).sort().values


def logit_attack(model: nn.Module, params: engine.Params | None, x: Tensor, is_member, *inputs,
                 train_fraction: float = 0.5, sort: bool = False, l2: float = 1e-3, seed: int) -> dict:
    """GMA App. F: logistic regression on the target's logits, fitted on part of the members/non-members.

    The attacker knows the membership of a random ``train_fraction`` of each side (Tople et al.'s
    split), fits on their logits and says "member" when its probability is >= 1/2; the report is
    on the held-out rest. Deviation: GMA trains 5000 epochs; we solve to the penalised optimum.
    ``sort``: sort each logit vector first, so the attacker ignores which class is which.
    """
    _xy(x, None)
    m = _members(is_member, len(x))
    train_fraction = number("train_fraction", train_fraction, low=0, high=1, low_open=True, high_open=True)
    sort = flag("sort", sort)
    train, test = _split(m, train_fraction, seeded_generator(seed, 0))
    feats = _logits(model, params, x, *inputs).double().cpu()      # (n, K)
    if sort:
        feats = feats.sort(-1, descending=True).values
    w, b = fit_logistic(feats[train][None], m[train][None], l2=l2)  # (1, K), (1,)
    scores = feats[test] @ w[0] + b[0]                              # (n_test,) attack logits
    return {**attack_report(scores, m[test], 0.0), "scores": scores, "train_idx": train, "test_idx": test,
            "weights": w[0], "bias": float(b[0])}


def train_shadows(model: nn.Module, params: engine.Params | None, x: Tensor, y: Tensor, *, num_shadows: int,
                  in_size: int | None = None, local_epochs: int, batch_size: int, lr: float, momentum: float = 0.0,
                  weight_decay: float = 0.0, seed: int) -> tuple[engine.Params, list[Tensor], list[Tensor]]:
    """Shadow models as the rows of one engine job: (params (S, ...), in-indices, out-indices).

    Shadow k draws two disjoint random sets of ``in_size`` samples (None: half) from the
    attacker's (x, y), with ``seeded_generator(seed, 1, k)``: "in", its training set (Shokri et
    al. match the target's training-set size), and "out", held back. All start from ``params``
    (None: the model's own), as an FL client starts from the global model, and run local SGD
    shuffled by ``seeded_generator(seed, 2, k)``. Unlike Shokri et al., shadows' sets may overlap.
    """
    num_shadows = integer("num_shadows", num_shadows, low=1, hint="WAFFLe Table 3 uses 3")
    local_epochs, batch_size = integer("local_epochs", local_epochs, low=1), integer("batch_size", batch_size, low=1)
    lr = number("lr", lr, low=0, low_open=True)
    momentum = number("momentum", momentum, low=0, high=1, high_open=True)
    weight_decay = number("weight_decay", weight_decay, low=0)
    _xy(x, y, ("shadow_x", "shadow_y"))
    half = integer("in_size", len(y) // 2 if in_size is None else in_size, low=1, high=len(y) // 2,
                   hint=f"the attacker's {len(y)} samples hold at most {len(y) // 2} disjoint in/out pairs")
    ins, outs = [], []
    for k in range(num_shadows):
        perm = torch.randperm(len(y), generator=seeded_generator(seed, 1, k))
        ins.append(perm[:half].sort().values), outs.append(perm[half:2 * half].sort().values)
    gens = [seeded_generator(seed, 2, k) for k in range(num_shadows)]
    batches = engine.make_batches(ins, local_epochs, batch_size, gens, device=x.device, dtype=x.dtype)
    start = engine.stack_params(engine.get_params(model) if params is None else params, num_shadows)
    trained, _, _ = engine.train(model, start, x, y, batches, lr=lr, momentum=momentum, weight_decay=weight_decay)
    return trained, ins, outs


def _sorted_log_odds(logits: Tensor, k: int) -> Tensor:
    """The k largest softmax probabilities as log-odds log(p / (1 - p)): (..., K) -> (..., k) float64.

    log(1 - p_i) is the log-sum-exp of the other logits minus that of all: p = 1 - 1e-20 stays finite.
    """
    z = logits.double().sort(-1, descending=True).values           # (..., K)
    eye = torch.eye(z.shape[-1], dtype=torch.bool, device=z.device)[:k]  # (k, K)
    others = z.unsqueeze(-2).masked_fill(eye, float("-inf")).logsumexp(-1)  # (..., k)
    return z[..., :k] - others


def fit_shadow_attack(shadow_model: nn.Module, shadow_params: engine.Params | None, shadow_x: Tensor,
                      shadow_y: Tensor, *, num_shadows: int = 3, in_size: int | None = None, local_epochs: int,
                      batch_size: int, lr: float, momentum: float = 0.0, weight_decay: float = 0.0, top_k: int = 3,
                      l2: float = 1e-3, seed: int) -> dict:
    """The attacker's half of Shokri et al.: shadow models, then one logistic attack model per class.

    Depends only on the attacker's data, so one fit serves every target of the same data
    (``apply_shadow_attack``). Returns {"classes", "weights" (C, top_k), "bias" (C,), "top_k",
    "records" (shadow records per class)}.
    """
    top_k = integer("top_k", top_k, low=1, hint="Salem et al. (NDSS 2019) use the top 3")
    shadows, ins, outs = train_shadows(shadow_model, shadow_params, shadow_x, shadow_y, num_shadows=num_shadows,
                                       in_size=in_size, local_epochs=local_epochs, batch_size=batch_size, lr=lr,
                                       momentum=momentum, weight_decay=weight_decay, seed=seed)
    order = torch.stack([torch.cat([i, o]) for i, o in zip(ins, outs)])  # (S, 2h): in first, then out
    with torch.no_grad():
        out = engine.forward(shadow_model, shadows, shadow_x[order])  # (S, 2h, K)
    K, h = out.shape[-1], order.shape[1] // 2
    if int(shadow_y.max()) >= K:
        raise SettingError(f"shadow_y: has label {int(shadow_y.max())} but the shadow model has {K} classes")
    if top_k > K:
        raise SettingError(f"top_k: got {top_k}; expected at most the number of classes, {K}")
    feats = _sorted_log_odds(out, top_k).flatten(0, 1).cpu()       # (S*2h, k) one record per shadow sample
    inside = torch.tensor([True] * h + [False] * h).repeat(len(ins))  # (S*2h,)
    cls = shadow_y[order].flatten().cpu()                           # (S*2h,)
    classes = sorted(set(cls.tolist()))
    groups = [(cls == c).nonzero().flatten() for c in classes]      # each class's records
    usable = [bool(inside[g].any() and not inside[g].all()) for g in groups]
    classes = [c for c, u in zip(classes, usable) if u]
    groups = [g for g, u in zip(groups, usable) if u]
    if not classes:
        raise SettingError("shadow_y: no class has both in and out shadow samples; give the attacker more data")
    idx = torch.nn.utils.rnn.pad_sequence(groups, batch_first=True)  # (C, Nmax) padded per class
    real = torch.nn.utils.rnn.pad_sequence([torch.ones(len(g), dtype=torch.bool) for g in groups], batch_first=True)
    w, b = fit_logistic(feats[idx], inside[idx], real, l2=l2)       # (C, k), (C,) one attack model per class
    return {"classes": classes, "weights": w, "bias": b, "top_k": top_k, "num_classes": K,
            "records": [len(g) for g in groups]}


def apply_shadow_attack(attack: dict, model: nn.Module, params: engine.Params | None, x: Tensor, y: Tensor,
                        is_member, *inputs) -> dict:
    """Score a target with a fitted shadow attack: ``attack_report``, "scores" and "per_class"."""
    _xy(x, y)
    m = _members(is_member, len(x))
    target = _logits(model, params, x, *inputs)                     # (n, K)
    if target.shape[-1] != attack["num_classes"]:
        raise SettingError(f"shadow_model: gives {attack['num_classes']} classes but the target gives "
                           f"{target.shape[-1]}; the shadows must mimic the target's output")
    classes, y = attack["classes"], y.cpu()
    missing = sorted(set(y.tolist()) - set(classes))
    if missing:
        raise SettingError(f"shadow_y: the shadows have no attack model for class(es) {missing} (they need both in "
                           f"and out samples of each class); give the attacker more samples of class {missing[0]}")
    w, b = attack["weights"], attack["bias"]
    row = torch.tensor([classes.index(c) for c in y.tolist()])      # (n,) each sample's attack model
    scores = (_sorted_log_odds(target, attack["top_k"]).cpu() * w[row]).sum(-1) + b[row]  # (n,) attack logits
    per_class = []
    for r, (c, n_rec) in enumerate(zip(classes, attack["records"])):
        s, mc = scores[row == r], m[row == r]                       # this class's target samples
        per_class.append({"class": c, "shadow_records": n_rec, "members": int(mc.sum()),
                          "non_members": int((~mc).sum()),
                          "accuracy": float(((s >= 0) == mc).double().mean()) if len(s) else float("nan"),
                          "auc": auc(s, mc) if mc.any() and not mc.all() else float("nan"),
                          "weights": w[r], "bias": float(b[r])})
    return {**attack_report(scores, m, 0.0), "scores": scores, "per_class": per_class}


def shadow_attack(model: nn.Module, params: engine.Params | None, x: Tensor, y: Tensor, is_member, *inputs,
                  shadow_x: Tensor, shadow_y: Tensor, shadow_model: nn.Module | None = None,
                  shadow_params: engine.Params | None = None, num_shadows: int = 3, in_size: int | None = None,
                  local_epochs: int, batch_size: int, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
                  top_k: int = 3, l2: float = 1e-3, seed: int) -> dict:
    """Shokri et al. as in WAFFLe Table 3: shadow models, then one attack model per class.

    The shadows (``train_shadows`` on ``shadow_x, shadow_y``; architecture ``shadow_model``,
    default the target's) label their in/out samples; per true class, a logistic regression
    learns in/out from the ``top_k`` sorted softmax probabilities and is applied to the target;
    "member" when its probability is >= 1/2. Deviation: the probabilities enter as log-odds
    log(p / (1 - p)), a monotone map of each (the same information) under which 1 - 1e-6 and
    1 - 1e-3 lie far apart, as Carlini et al. scale confidences; a linear attacker on raw
    probabilities cannot tell them apart. Logistic regression rather than Shokri's MLP: a few
    sorted confidences are a low-dimensional, nearly monotone signal, and a convex fit has one
    answer, needs no tuning and can be tested. Sorting the confidences (Salem et al., NDSS 2019;
    Shokri's attack models see the whole vector in class order) hides whether the top class is the
    true one; a label-aware attack (the loss threshold) can do better on a target that errs
    confidently. Returns ``attack_report``, "scores", "per_class".
    ``fit_shadow_attack`` and ``apply_shadow_attack`` are its two halves, for many targets.
    """
    _xy(x, y)
    _members(is_member, len(x))
    if shadow_model is None and inputs:
        raise SettingError("shadow_model: the target takes extra inputs (e.g. WAFFLe's b), which the attacker "
                           "does not have; pass a plain model of the same shape for the shadows")
    attack = fit_shadow_attack(model if shadow_model is None else shadow_model, shadow_params, shadow_x, shadow_y,
                               num_shadows=num_shadows, in_size=in_size, local_epochs=local_epochs,
                               batch_size=batch_size, lr=lr, momentum=momentum, weight_decay=weight_decay,
                               top_k=top_k, l2=l2, seed=seed)
    return apply_shadow_attack(attack, model, params, x, y, is_member, *inputs)
