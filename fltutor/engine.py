"""The client engine: local training of many clients as one batched model, on any device.

Every local-training job of a round is a *row*: one client of one run. The engine stacks
every parameter with a leading row dimension P (``(P, ...)``) and runs the model under
``torch.func.vmap``, so one optimizer step advances all P rows. A single run has P = C
(its cohort); a sweep of R runs has P = R x C, each row with its own hyper-parameters
(learning rate, momentum, mu, ...) as (P,) tensors.

The engine follows the per-client reference loop (``train_client``) step for step: the
same mini-batches in the same order, the same SGD with momentum, and a row whose data are
used up (a smaller client takes fewer steps) simply stops moving while the others finish.

Methods plug in through hooks (see ``train``): a gradient correction (SCAFFOLD), a proximal
weight (FedProx), private parameters with their own step rule and an extra loss
(weight-factorization WAFFLe), extra model inputs, or a whole custom step (pFedMe, APFL),
all run by one loop, ``local_steps``.

Randomness (shuffling, noise) comes from CPU generators derived from (seed, round, client),
so the numbers do not depend on the device, on which other rows share the batch, or on
whether the run was resumed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn, Tensor
from torch.func import functional_call, vmap

Params = dict[str, Tensor]

__all__ = ["Params", "resolve_device", "client_generator", "batch_schedule", "Batches", "make_batches",
           "get_params", "stack_params", "unstack_params", "forward", "row_loss", "train", "mean_gradient", "local_steps",
           "sgd_update", "sgd_step_", "adam_update", "keep_inactive", "train_client", "evaluate", "row_losses", "client_accuracy",
           "broadcast"]


# ---- devices and randomness ------------------------------------------------------------
def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"``: CUDA if available, then Apple MPS, then CPU; otherwise the named device."""
    if device is None or device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device: {device!r} is not a device; use 'auto', 'cpu', 'cuda', 'cuda:0' or 'mps'") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} was asked for, but this torch sees no CUDA GPU; use 'auto' or 'cpu'")
    return dev


def client_generator(seed: int, round_: int, client: int) -> torch.Generator:
    """The CPU generator of one client's shuffling (and noise) in one round of one run.

    Derived from (seed, round, client) instead of carried, so a resumed run equals an
    uninterrupted one and a row's result does not depend on the other rows.
    """
    g = torch.Generator()
    # mod 2**63 keeps torch's seed range for every seed < 2**32 and leaves smaller keys (seed < ~9e6) as they were
    g.manual_seed(((seed * 1_000_003 + round_) * 1_000_003 + client) % 2**63)
    return g


def batch_schedule(num_samples: int, local_epochs: int, batch_size: int,
                   generator: torch.Generator) -> list[Tensor]:
    """Positions of each local mini-batch: a fresh permutation per epoch, last batch may be short."""
    if num_samples < 1:
        raise ValueError("batch_schedule: a client with no training samples cannot train; "
                         "drop it from the partition or give it data")
    batches = []
    for _ in range(local_epochs):
        perm = torch.randperm(num_samples, generator=generator)
        batches.extend(perm.split(batch_size))
    return batches


@dataclass
class Batches:
    """Every row's mini-batch schedule as padded tensors on the device.

    idx (P, S, B): dataset indices (padding points at sample 0); weight (P, S, B): 1/|batch|
    on real samples, 0 on padding, so a row's mean batch loss is (ce * weight).sum(-1);
    active (P, S): whether row p takes step s; n_steps (P,): how many steps each row takes.
    """
    idx: Tensor
    weight: Tensor
    active: Tensor
    n_steps: Tensor

    @property
    def steps(self) -> int:
        return self.idx.shape[1]


def make_batches(client_indices: Sequence[Tensor], local_epochs: Sequence[int] | int, batch_size: int,
                 generators: Sequence[torch.Generator], *, device=None, dtype=torch.float32) -> Batches:
    """Draw every row's schedule (as ``batch_schedule`` does, same generator calls) and pad it."""
    P = len(client_indices)
    if len(generators) != P:
        raise ValueError(f"make_batches: {P} rows but {len(generators)} generators; pass one per row")
    epochs = [local_epochs] * P if isinstance(local_epochs, int) else list(local_epochs)
    per_epoch = [-(-len(i) // batch_size) for i in client_indices]          # batches per epoch
    n_steps = torch.tensor([e * b for e, b in zip(epochs, per_epoch)])
    S = int(n_steps.max())
    gidx = torch.full((P, S, batch_size), -1, dtype=torch.long)             # (P, S, B), -1 = pad
    for p, (idx, g) in enumerate(zip(client_indices, generators)):
        idx = torch.as_tensor(idx, dtype=torch.long).cpu()
        n, nb = len(idx), per_epoch[p]
        if n < 1:
            raise ValueError("make_batches: a client with no training samples cannot train; "
                             "drop it from the partition or give it data")
        pos = torch.full((epochs[p], nb * batch_size), -1, dtype=torch.long)  # (E, nb*B) padded per epoch
        for e in range(epochs[p]):
            pos[e, :n] = idx[torch.randperm(n, generator=g)]
        gidx[p, : epochs[p] * nb] = pos.view(epochs[p] * nb, batch_size)
    real = gidx >= 0
    counts = real.sum(-1, keepdim=True).clamp(min=1)
    weight = real.to(dtype) / counts.to(dtype)
    return Batches(gidx.clamp(min=0).to(device), weight.to(device), real[:, :, 0].to(device), n_steps.to(device))


# ---- parameters ------------------------------------------------------------------------
def get_params(model: nn.Module) -> Params:
    """A detached copy of the model's parameters, by name."""
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def stack_params(params: Params, rows: int) -> Params:
    """Copy one parameter set ``rows`` times: every tensor gets a leading dim (P, ...)."""
    return {k: v.detach().unsqueeze(0).repeat(rows, *([1] * v.ndim)) for k, v in params.items()}


def unstack_params(params: Params, row: int) -> Params:
    """Row ``row`` of a stacked parameter set, as a copy."""
    return {k: v[row].detach().clone() for k, v in params.items()}


def broadcast(values: Tensor, like: Tensor) -> Tensor:
    """(P,) per-row values shaped to multiply a stacked tensor (P, ...)."""
    return values.view(-1, *([1] * (like.ndim - 1)))


# ---- forward and loss ------------------------------------------------------------------
def forward(model: nn.Module, params: Params, x: Tensor, *inputs) -> Tensor:
    """Logits of P models on P batches: params (P, ...), x (P, B, ...) -> (P, B, K).

    ``inputs`` are extra per-row model inputs (P, ...), e.g. weight-factorization WAFFLe's
    factor selections b; the model is called as ``model(x, *inputs)``.
    """
    return vmap(lambda p, xb, *e: functional_call(model, p, (xb, *e)))(params, x, *inputs)


def row_loss(logits: Tensor, y: Tensor, weight: Tensor) -> Tensor:
    """Each row's mean cross-entropy over its real samples: logits (P, B, K), y, weight (P, B) -> (P,)."""
    P, B = y.shape
    ce = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(P, B)
    return (ce * weight).sum(1)


# ---- step rules --------------------------------------------------------------------------
def sgd_update(p: Tensor, g: Tensor, buf: Tensor | None, lr: Tensor, momentum: Tensor | None,
               weight_decay: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """``torch.optim.SGD``'s rule with per-row rates (P,): g += wd p; buf = m buf + g; p -= lr buf.

    A zero-initialised buffer makes the first step buf = g, as torch does. Returns (p, buf).
    """
    if weight_decay is not None:
        g = g + broadcast(weight_decay, p) * p
    if buf is not None:
        buf = broadcast(momentum, p) * buf + g
        g = buf
    return p - broadcast(lr, p) * g, buf


def sgd_step_(p: Tensor, g: Tensor, buf: Tensor | None, lr: Tensor, on: Tensor | None, *,
              momentum: Tensor | None = None, weight_decay: Tensor | None = None, prox_mu: Tensor | None = None,
              start: Tensor | None = None, correction: Tensor | None = None) -> None:
    """``sgd_update`` in place, for large stacked tensors: no new (P, ...) tensor per step.

    g gets + wd p, + mu (p - start) (FedProx) and + correction (SCAFFOLD); then
    buf = m buf + g and p -= lr buf. ``lr`` must already be 0 for rows that take no step
    (``on`` False); their buffer keeps its value.
    """
    if weight_decay is not None:
        g.addcmul_(p, broadcast(weight_decay, p))
    if prox_mu is not None:
        mu = broadcast(prox_mu, p)
        g.addcmul_(p, mu).addcmul_(start, mu, value=-1.0)
    if correction is not None:
        g.add_(correction)
    if buf is not None:
        if on is None:
            buf.mul_(broadcast(momentum, p)).add_(g)
        else:  # inactive rows: factor 1 and no gradient
            keep = broadcast(on, p)
            buf.mul_(torch.where(keep, broadcast(momentum, p), torch.ones_like(broadcast(momentum, p))))
            buf.addcmul_(g, keep.to(g.dtype))
        g = buf
    p.addcmul_(g, broadcast(lr, p), value=-1.0)


def adam_update(p: Tensor, g: Tensor, m: Tensor, v: Tensor, t: Tensor, lr: Tensor,
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> tuple[Tensor, Tensor, Tensor]:
    """``torch.optim.Adam``'s rule with per-row step counts t (P,) (already advanced) and rates lr (P,)."""
    b1, b2 = betas
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    tt = broadcast(t, p).to(p.dtype)
    step = broadcast(lr, p) * (m / (1 - b1 ** tt)) / ((v / (1 - b2 ** tt)).sqrt() + eps)
    return p - step, m, v


# ---- the one local-training loop -----------------------------------------------------------
State = dict[str, Params]
Step = Callable[[State, Tensor, Tensor, Tensor, int, Tensor | None], tuple[State, Tensor]]


def keep_inactive(new: State, old: State, on: Tensor | None) -> State:
    """Rows that take no step (``on`` False) keep their old state; ``on`` None: every row steps."""
    if on is None:
        return new
    return {grp: {k: torch.where(broadcast(on, t), t, old[grp][k]) for k, t in tensors.items()}
            for grp, tensors in new.items()}


def local_steps(state: State, x: Tensor, y: Tensor, batches: Batches, step: Step) -> tuple[State, Tensor]:
    """Run every row's local steps: ``step(state, xb, yb, weight, s, on) -> (new_state, loss (P,))``.

    ``state`` maps groups ("params", "buf", "private", ...) to stacked tensors (P, ...). ``on``
    (P,) says which rows take step s (None when all do); a row that takes no step must keep its
    whole state (``keep_inactive`` does that for a step that builds new tensors). Returns the
    final state and each row's mean mini-batch loss (P,).
    """
    P = batches.idx.shape[0]
    loss_sum = torch.zeros(P, dtype=x.dtype, device=x.device)
    all_active = bool(batches.active.all())
    for s in range(batches.steps):
        pos = batches.idx[:, s]                                        # (P, B)
        on = batches.active[:, s]                                      # (P,)
        state, loss = step(state, x[pos], y[pos], batches.weight[:, s], s, None if all_active else on)
        loss_sum = loss_sum + loss.detach() * on
    return state, loss_sum / batches.n_steps.to(loss_sum.dtype)


def clip_rows_(grads: Params, clip_norm: Tensor) -> None:
    """Scale each row's gradient, in place, to an L2 norm (over all its tensors) of at most ``clip_norm``
    (P,), as ``torch.nn.utils.clip_grad_norm_`` does for one model (factor max_norm / (norm + 1e-6),
    capped at 1); a row whose ``clip_norm`` is 0 is left alone."""
    norm = sum(g.flatten(1).pow(2).sum(1) for g in grads.values()).sqrt()
    coef = torch.where(clip_norm > 0, (clip_norm / (norm + 1e-6)).clamp(max=1.0), torch.ones_like(norm))
    for g in grads.values():
        g.mul_(broadcast(coef.to(g.dtype), g))


def train(model: nn.Module, params: Params, x: Tensor, y: Tensor, batches: Batches, *, lr: Tensor,
          momentum: Tensor | None = None, weight_decay: Tensor | None = None, prox_mu: Tensor | None = None,
          clip_norm: Tensor | None = None,
          correction: Params | None = None, private: Params | None = None, private_lr: Tensor | None = None,
          private_optimizer: str = "sgd", inputs: Callable | None = None, extra_loss: Callable | None = None,
          project: Callable | None = None) -> tuple[Params, Params, Tensor]:
    """Local SGD of P rows with the method hooks; returns (params, private, mean loss (P,)).

    - ``lr``, ``momentum``, ``weight_decay``, ``prox_mu``: numbers or (P,) per-row values (None: off);
    - ``prox_mu``: FedProx's gradient mu (w - w_start) (Li et al. 2020, eq. 2);
    - ``clip_norm``: each row's mini-batch gradient of ``params`` is clipped to this L2 norm (0 or None:
      off) before weight decay, the proximal term and the correction are added;
    - ``correction``: a constant added to every gradient (SCAFFOLD's c - c_i);
    - ``private``: per-row parameters that train beside ``params`` with their own rule
      (``private_optimizer`` "sgd" or "adam", moments fresh each call, rate ``private_lr``);
    - ``inputs(private, s)``: extra model inputs at step s; ``extra_loss(private, s)``: (P,)
      added to the loss; ``project(private)``: applied after each step (e.g. clamping).
    """
    P = batches.idx.shape[0]
    lr, momentum, weight_decay, prox_mu, private_lr, clip_norm = (
        _rows(v, P, x) for v in (lr, momentum, weight_decay, prox_mu, private_lr, clip_norm))
    names, pnames = list(params), list(private or {})
    use_clip = clip_norm is not None and bool((clip_norm != 0).any())
    use_mom = momentum is not None and bool((momentum != 0).any())
    use_wd = weight_decay is not None and bool((weight_decay != 0).any())
    use_prox = prox_mu is not None and bool((prox_mu != 0).any())
    start = {k: v.detach() for k, v in params.items()}
    state: State = {"params": {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}}
    if use_mom:
        state["buf"] = {k: torch.zeros_like(v) for k, v in start.items()}
    if pnames:
        state["private"] = {k: v.detach() for k, v in private.items()}
        if private_optimizer == "adam":
            state["adam_m"] = {k: torch.zeros_like(v) for k, v in private.items()}
            state["adam_v"] = {k: torch.zeros_like(v) for k, v in private.items()}
            state["adam_t"] = {"t": torch.zeros(batches.idx.shape[0], device=x.device)}
        elif private_optimizer != "sgd":
            raise ValueError(f"private_optimizer must be 'sgd' or 'adam', got {private_optimizer!r}")
    priv_lr = lr if private_lr is None else private_lr

    def step(st: State, xb: Tensor, yb: Tensor, w: Tensor, s: int, on: Tensor | None) -> tuple[State, Tensor]:
        p = st["params"]                       # leaves updated in place below, under no_grad
        q = {k: t.detach().requires_grad_(True) for k, t in st.get("private", {}).items()}
        extra = inputs(q, s) if inputs is not None else ()
        loss = row_loss(forward(model, p, xb, *extra), yb, w)           # (P,)
        total = loss + extra_loss(q, s) if extra_loss is not None else loss
        # rows' parameters are disjoint, so d sum / d p[row] = d loss_row / d p[row]
        grads = torch.autograd.grad(total.sum(), list(p.values()) + list(q.values()))
        g_p, g_q = dict(zip(names, grads[: len(names)])), dict(zip(pnames, grads[len(names):]))
        with torch.no_grad():
            if use_clip:
                clip_rows_(g_p, clip_norm)
            # a row that takes no step gets rate 0 and keeps its momentum buffer (factor 1, no new gradient)
            step_lr = lr if on is None else lr * on
            for k in names:
                sgd_step_(p[k], g_p[k], st["buf"][k] if use_mom else None, step_lr, on,
                          momentum=momentum if use_mom else None, weight_decay=weight_decay if use_wd else None,
                          prox_mu=prox_mu if use_prox else None, start=start[k],
                          correction=None if correction is None else correction[k])
            if pnames:
                old = {g: st[g] for g in ("private", "adam_m", "adam_v", "adam_t") if g in st}
                new: State = {}
                newq = {}
                if private_optimizer == "adam":
                    t = st["adam_t"]["t"] + 1
                    new["adam_t"], new["adam_m"], new["adam_v"] = {"t": t}, {}, {}
                    for k in pnames:
                        newq[k], new["adam_m"][k], new["adam_v"][k] = adam_update(
                            q[k].detach(), g_q[k], st["adam_m"][k], st["adam_v"][k], t, priv_lr)
                else:
                    for k in pnames:
                        newq[k], _ = sgd_update(q[k].detach(), g_q[k], None, priv_lr, None, None)
                new["private"] = project(newq) if project is not None else newq
                st = {**st, **keep_inactive(new, old, on)}
        return st, loss.detach()

    state, mean_loss = local_steps(state, x, y, batches, step)
    return {k: v.detach() for k, v in state["params"].items()}, state.get("private", {}), mean_loss


def mean_gradient(model: nn.Module, params: Params, x: Tensor, y: Tensor, batches: Batches) -> Params:
    """Each row's mean mini-batch gradient at fixed ``params`` over its batches, (P, ...); nothing moves.

    One pass over the rows' schedules with the parameters held where they start: the gradient of
    each client's local loss at the server model (SCAFFOLD's option I). Rows are summed only over
    the steps they take and divided by their step count.
    """
    p = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    total = {k: torch.zeros_like(v, dtype=torch.float64) for k, v in params.items()}
    for s in range(batches.steps):
        pos, on = batches.idx[:, s], batches.active[:, s]
        loss = row_loss(forward(model, p, x[pos]), y[pos], batches.weight[:, s])      # (P,)
        grads = torch.autograd.grad(loss.sum(), list(p.values()))
        for k, g in zip(p, grads):
            total[k] += g.double() * broadcast(on, g)
    n = batches.n_steps.to(torch.float64)
    return {k: (t / broadcast(n, t)).to(params[k].dtype) for k, t in total.items()}


def _rows(value, P: int, like: Tensor) -> Tensor | None:
    """A per-row setting as a (P,) tensor: floats are repeated, tensors checked."""
    if value is None:
        return None
    t = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    if t.ndim == 0:
        return t.repeat(P)
    if t.shape != (P,):
        raise ValueError(f"train: a per-row setting has shape {tuple(t.shape)}, expected ({P},) or a number")
    return t


# ---- the per-client reference loop -------------------------------------------------------
def train_client(model: nn.Module, params: Params, x: Tensor, y: Tensor, *, local_epochs: int,
                 batch_size: int, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
                 prox_mu: float = 0.0, correction: Params | None = None, clip_norm: float = 0.0,
                 generator: torch.Generator) -> tuple[Params, float]:
    """Reference: plain local SGD on one client, the way a tutorial writes it.

    Starts from ``params``, optionally adds FedProx's (mu/2)||w - w_start||^2, and returns
    the trained parameters and the mean mini-batch loss. ``correction`` is a constant added
    to every gradient: SCAFFOLD passes c - c_i (Karimireddy et al. 2020, Alg. 1 line 10).
    ``clip_norm`` > 0 clips the mini-batch loss's gradient with ``torch.nn.utils.clip_grad_norm_``
    before the proximal gradient and the correction are added.
    """
    if not lr > 0:
        raise ValueError(f"lr: {lr!r} must be > 0; WAFFLe uses 0.04 (MNIST) and 0.02 (FMNIST)")
    model.load_state_dict(params, strict=False)
    start = {k: v.detach().clone() for k, v in params.items()}
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    losses = []
    for pos in batch_schedule(len(y), local_epochs, batch_size, generator):
        pos = pos.to(x.device)
        loss = F.cross_entropy(model(x[pos]), y[pos])
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        if clip_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        with torch.no_grad():
            for k, p in model.named_parameters():
                if prox_mu:   # the gradient of (mu/2)||w - w_start||^2
                    p.grad.add_(p - start[k], alpha=prox_mu)
                if correction is not None:
                    p.grad.add_(correction[k])
        opt.step()
    return get_params(model), float(sum(losses) / len(losses))


# ---- evaluation ----------------------------------------------------------------------------
@torch.no_grad()
def evaluate(model: nn.Module, params: Params | None, x: Tensor, y: Tensor, *inputs,
             batch_size: int = 2000) -> tuple[Tensor, Tensor]:
    """Per-sample correctness (n,) bool and loss (n,) of one model (``params`` or its own)."""
    correct, losses = [], []
    for i in range(0, len(y), batch_size):
        xb = x[i:i + batch_size]
        out = model(xb, *inputs) if params is None else functional_call(model, params, (xb, *inputs))
        correct.append(out.argmax(1) == y[i:i + batch_size])
        losses.append(F.cross_entropy(out, y[i:i + batch_size], reduction="none"))
    if not correct:
        return torch.zeros(0, dtype=torch.bool, device=x.device), torch.zeros(0, device=x.device)
    return torch.cat(correct), torch.cat(losses)


def _padded(parts: Sequence[Tensor], device) -> tuple[Tensor, Tensor]:
    """Index lists -> (P, T) padded indices and (P, T) bool of real entries."""
    t_max = max(1, max(len(p) for p in parts))
    pos = torch.zeros(len(parts), t_max, dtype=torch.long)
    real = torch.zeros(len(parts), t_max, dtype=torch.bool)
    for c, p in enumerate(parts):
        pos[c, : len(p)] = torch.as_tensor(p, dtype=torch.long).cpu()
        real[c, : len(p)] = True
    return pos.to(device), real.to(device)


@torch.no_grad()
def _per_row(model: nn.Module, params: Params, per_row_params: bool, x: Tensor, y: Tensor,
             parts: Sequence[Tensor], inputs: Mapping | tuple, chunk_samples: int):
    """Correct-count and loss-sum per row, with row r's model on x[parts[r]] (chunked vmap)."""
    n = len(parts)
    hits = torch.zeros(n, dtype=torch.float64, device=x.device)
    loss = torch.zeros(n, dtype=torch.float64, device=x.device)
    t_max = max(1, max(len(p) for p in parts))
    rows = max(1, chunk_samples // t_max)
    fn = vmap(lambda p, xb, *e: functional_call(model, p, (xb, *e)), in_dims=(0 if per_row_params else None, 0)
              + (0,) * len(inputs))
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        pos, real = _padded(parts[lo:hi], x.device)
        p = {k: v[lo:hi] for k, v in params.items()} if per_row_params else params
        e = tuple(_slice(i, lo, hi) for i in inputs)
        out = fn(p, x[pos], *e)                                                  # (c, T, K)
        yy = y[pos]
        ce = F.cross_entropy(out.flatten(0, 1), yy.flatten(), reduction="none").view(yy.shape)
        hits[lo:hi] = ((out.argmax(-1) == yy) & real).sum(1).double()
        loss[lo:hi] = (ce * real).sum(1).double()
    return hits, loss


def _slice(tree, lo, hi):
    if isinstance(tree, Mapping):
        return {k: v[lo:hi] for k, v in tree.items()}
    return tree[lo:hi]


def eval_chunk(model: nn.Module, device) -> int:
    """How many samples evaluation puts through one forward pass: 512 on a CPU, 20,000 elsewhere.

    On a CPU a block of a few hundred LeNet-5 images stays in the cache and scores about twice
    as fast per image as 20,000 at once (benchmarks/eval_chunk.py); an accelerator wants large
    blocks. A model whose output depends on the rest of its batch (batch norm without running
    statistics, ``ResNet18``) always gets 20,000, so that its accuracy means the same on every
    device (see ``ResNet18``'s docstring). Any other model gives the same predictions at any
    chunk size, up to rounding."""
    batch_dependent = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    return 512 if torch.device(device).type == "cpu" and not batch_dependent else 20000


def row_losses(model: nn.Module, params: Params, x: Tensor, y: Tensor, parts: Sequence[Tensor], *inputs,
               chunk_samples: int | None = None) -> Tensor:
    """Mean loss of row r's model (params (P, ...)) on x[parts[r]], (P,) float64 (q-FFL's F_k).
    ``chunk_samples``: samples per forward pass (None: ``eval_chunk``)."""
    chunk_samples = chunk_samples or eval_chunk(model, x.device)
    _, loss = _per_row(model, params, True, x, y, parts, inputs, chunk_samples)
    sizes = torch.tensor([len(p) for p in parts], dtype=torch.float64, device=x.device)
    return loss / sizes


def client_accuracy(model: nn.Module, params: Params, x: Tensor, y: Tensor, parts: Sequence[Tensor], *inputs,
                    per_client: bool, chunk_samples: int | None = None) -> Tensor:
    """Accuracy (%) of each client's model on its own samples x[parts[k]], (N,) float64.

    ``per_client``: params are stacked (N, ...), one model per client; else one shared model.
    ``inputs``: extra per-client model inputs (N, ...), e.g. each client's factor selection.
    ``chunk_samples``: samples per forward pass (None: ``eval_chunk``).
    """
    chunk_samples = chunk_samples or eval_chunk(model, x.device)
    sizes = torch.tensor([len(p) for p in parts], dtype=torch.float64, device=x.device)
    if not per_client and not inputs:  # one model: a single pass over every client's samples
        idx = torch.cat([torch.as_tensor(p, dtype=torch.long).cpu() for p in parts]).to(x.device)
        owner = torch.repeat_interleave(torch.arange(len(parts), device=x.device),
                                        torch.tensor([len(p) for p in parts], device=x.device))
        correct, _ = evaluate(model, params, x[idx], y[idx], batch_size=chunk_samples)
        hits = torch.bincount(owner, weights=correct.double(), minlength=len(parts))
    else:
        hits, _ = _per_row(model, params, per_client, x, y, parts, inputs, chunk_samples)
    return 100.0 * hits / sizes.clamp(min=1)
