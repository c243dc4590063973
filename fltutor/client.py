"""Client update: local SGD, one client at a time (reference) or a whole cohort at once.

The cohort engine stacks every parameter with a leading client dimension C and runs the
model under ``torch.func.vmap``; one optimizer step advances all C clients. It follows the
reference loop step for step: the same mini-batches in the same order, the same SGD with
momentum, and a client whose local data are used up (it has fewer samples, so fewer steps)
simply stops moving while the others finish.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn, Tensor
import torch.nn.functional as F
from torch.func import functional_call, vmap

Params = dict[str, Tensor]

__all__ = ["batch_schedule", "train_client", "train_cohort", "cohort_forward", "sgd_step", "adam_step",
           "stack_params", "unstack_params", "get_params", "evaluate", "client_generator",
           "cohort_batches", "train_pfedme_cohort"]


def client_generator(seed: int, round_: int, client: int) -> torch.Generator:
    """The generator for one client's shuffling in one round, derived from (seed, round, client).

    Deriving it instead of carrying generator state makes a resumed run identical to an
    uninterrupted one, and the cohort engine identical to the per-client loop.
    """
    g = torch.Generator()
    g.manual_seed((seed * 1_000_003 + round_) * 1_000_003 + client)
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


def get_params(model: nn.Module) -> Params:
    """A detached copy of the model's parameters, by name."""
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def stack_params(params: Params, num_clients: int) -> Params:
    """Copy one parameter set C times: every tensor gets a leading client dim (C, ...)."""
    return {k: v.detach().unsqueeze(0).repeat(num_clients, *([1] * v.ndim)) for k, v in params.items()}


def unstack_params(params: Params, client: int) -> Params:
    """Client ``client``'s slice of a stacked parameter set."""
    return {k: v[client].detach().clone() for k, v in params.items()}


def sgd_step(params: list[Tensor], grads: list[Tensor], bufs: list[Tensor], *, lr: float,
             momentum: float, weight_decay: float, active: Tensor | None = None) -> None:
    """In-place SGD with heavy-ball momentum, the update rule of ``torch.optim.SGD``.

    g = grad + wd * p;  buf = momentum * buf + g;  p = p - lr * buf. A zero-initialised
    buffer makes the first step buf = g, as torch does. ``active`` (C,) freezes the
    clients that take no step this time, buffer included.
    """
    if active is not None and not bool(active.all()):
        rows = active.nonzero().squeeze(1)  # (A,) the clients that step; the rest keep p and buf
        sub_p = [p[rows] for p in params]
        sub_b = [b[rows] for b in bufs]
        sgd_step(sub_p, [g[rows] for g in grads], sub_b, lr=lr, momentum=momentum,
                 weight_decay=weight_decay)
        for p, b, sp, sb in zip(params, bufs, sub_p, sub_b):
            p.index_copy_(0, rows, sp)
            b.index_copy_(0, rows, sb)
        return
    for p, g, buf in zip(params, grads, bufs):  # in place: these tensors are large (C x weights)
        if weight_decay:
            g = g.add(p, alpha=weight_decay)
        if momentum:
            buf.mul_(momentum).add_(g)
            g = buf
        p.sub_(g, alpha=lr)


def adam_step(params: list[Tensor], grads: list[Tensor], moments: list[Tensor], second: list[Tensor],
              steps: Tensor, *, lr: float, active: Tensor, betas: tuple[float, float] = (0.9, 0.999),
              eps: float = 1e-8) -> None:
    """In-place Adam for C clients stacked on dim 0, the update rule of ``torch.optim.Adam``.

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= lr * m_hat / (sqrt(v_hat) + eps),
    with m_hat = m / (1 - b1^t) and t counted per client. ``active`` (C,) bool: clients with
    no step this time keep p, m, v and t, so each client's result is its own loop's.
    """
    b1, b2 = betas
    steps.add_(active.to(steps.dtype))
    for p, g, m, v in zip(params, grads, moments, second):
        on = active.view(-1, *([1] * (p.dim() - 1)))
        t = steps.view(-1, *([1] * (p.dim() - 1))).clamp(min=1)
        m.copy_(torch.where(on, b1 * m + (1 - b1) * g, m))
        v.copy_(torch.where(on, b2 * v + (1 - b2) * g * g, v))
        step = lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
        p.sub_(torch.where(on, step, torch.zeros_like(step)))


def _check_hparams(local_epochs, batch_size, lr):
    if not (isinstance(local_epochs, int) and local_epochs >= 1):
        raise ValueError(f"local_epochs must be an integer >= 1, got {local_epochs!r}")
    if not (isinstance(batch_size, int) and batch_size >= 1):
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}; WAFFLe uses 0.04 (MNIST) and 0.02 (FMNIST)")


def train_client(model: nn.Module, params: Params, x: Tensor, y: Tensor, *, local_epochs: int,
                 batch_size: int, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
                 prox_mu: float = 0.0, correction: Params | None = None,
                 generator: torch.Generator) -> tuple[Params, float]:
    """Reference: plain local SGD on one client, the way a tutorial writes it.

    Starts from ``params``, optionally adds FedProx's (mu/2)||w - w_start||^2, and returns
    the trained parameters and the mean mini-batch loss. ``correction`` is a constant added
    to every gradient: SCAFFOLD passes c - c_i (Karimireddy et al. 2020, Alg. 1 line 10).
    """
    _check_hparams(local_epochs, batch_size, lr)
    model.load_state_dict(params, strict=False)
    start = {k: v.detach().clone() for k, v in params.items()}
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    losses = []
    for pos in batch_schedule(len(y), local_epochs, batch_size, generator):
        loss = F.cross_entropy(model(x[pos]), y[pos])
        losses.append(loss.item())
        if prox_mu:
            loss = loss + 0.5 * prox_mu * sum(((p - start[k]) ** 2).sum() for k, p in model.named_parameters())
        opt.zero_grad()
        loss.backward()
        if correction is not None:
            with torch.no_grad():
                for k, p in model.named_parameters():
                    p.grad.add_(correction[k])
        opt.step()
    return get_params(model), float(sum(losses) / len(losses))


def cohort_forward(model: nn.Module, params: Params, x: Tensor) -> Tensor:
    """Logits of C models on C batches: params (C, ...), x (C, B, ...) -> (C, B, K)."""
    return vmap(lambda p, xb: functional_call(model, p, (xb,)))(params, x)


def train_cohort(model: nn.Module, params: Params, x: Tensor, y: Tensor,
                 client_indices: Sequence[Tensor], *, local_epochs: int, batch_size: int, lr: float,
                 momentum: float = 0.0, weight_decay: float = 0.0, prox_mu: float = 0.0,
                 correction: Params | None = None,
                 generators: Sequence[torch.Generator]) -> tuple[Params, Tensor]:
    """Train C clients together as one batched model; same result as C calls to ``train_client``.

    params: stacked start parameters, each (C, ...); x, y: the whole dataset; client_indices[c]:
    client c's training indices into it. Returns the trained stacked parameters and each
    client's mean mini-batch loss (C,). ``correction`` (stacked, (C, ...)) is added to each
    client's gradient at every step, as in ``train_client``.
    """
    _check_hparams(local_epochs, batch_size, lr)
    safe, mask, active, counts, n_steps = cohort_batches(client_indices, local_epochs, batch_size,
                                                         generators, x.dtype)
    C, steps = active.shape

    names = list(params)
    p = [params[k].detach().clone().requires_grad_(True) for k in names]
    start = [t.detach().clone() for t in p]
    bufs = [torch.zeros_like(t) for t in p]
    loss_sum = torch.zeros(C)
    for s in range(steps):
        xb, yb = x[safe[:, s]], y[safe[:, s]]             # (C, B, ...), (C, B)
        logits = cohort_forward(model, dict(zip(names, p)), xb)  # (C, B, K)
        ce = F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="none").view(C, batch_size)
        per_client = (ce * mask[:, s]).sum(1) / counts[:, s]   # (C,) each client's mean batch loss
        loss = per_client.sum()  # clients' parameters are disjoint: d loss / d p[c] = d loss_c / d p[c]
        grads = list(torch.autograd.grad(loss, p))
        with torch.no_grad():
            if prox_mu:  # FedProx: the gradient of (mu/2)||w - w_start||^2, added without autograd
                grads = [g.add(t - t0, alpha=prox_mu) for g, t, t0 in zip(grads, p, start)]
            if correction is not None:  # SCAFFOLD: g - c_i + c, constant over the local steps
                grads = [g.add(correction[k]) for g, k in zip(grads, names)]
            sgd_step(p, grads, bufs, lr=lr, momentum=momentum, weight_decay=weight_decay,
                     active=active[:, s])
            loss_sum += per_client.detach() * active[:, s]
    return {k: t.detach() for k, t in zip(names, p)}, loss_sum / n_steps.to(loss_sum.dtype)


def cohort_batches(client_indices: Sequence[Tensor], local_epochs: int, batch_size: int,
                   generators: Sequence[torch.Generator], dtype=torch.float32):
    """Every client's mini-batch schedule as padded tensors, for the cohort engines.

    Returns ``safe`` (C, S, B) dataset indices (padding points at sample 0), ``mask``
    (C, S, B) real samples, ``active`` (C, S) whether client c takes step s, ``counts``
    (C, S) batch sizes, and ``n_steps`` (C,) how many steps each client takes.
    """
    C = len(client_indices)
    if len(generators) != C:
        raise ValueError(f"cohort_batches: {C} clients but {len(generators)} generators; pass one per client")
    schedules = [batch_schedule(len(idx), local_epochs, batch_size, g)
                 for idx, g in zip(client_indices, generators)]
    steps = max(len(s) for s in schedules)
    gidx = torch.full((C, steps, batch_size), -1, dtype=torch.long)  # (C, S, B) dataset index, -1 = pad
    for c, (idx, sched) in enumerate(zip(client_indices, schedules)):
        idx = torch.as_tensor(idx, dtype=torch.long)
        for s, pos in enumerate(sched):
            gidx[c, s, : len(pos)] = idx[pos]
    mask = gidx >= 0
    active = mask[:, :, 0]
    counts = mask.sum(2).clamp(min=1).to(dtype if dtype.is_floating_point else torch.float32)
    n_steps = torch.tensor([len(sc) for sc in schedules])
    return gidx.clamp(min=0), mask, active, counts, n_steps


def train_pfedme_cohort(model: nn.Module, params: Params, x: Tensor, y: Tensor,
                        client_indices: Sequence[Tensor], *, local_epochs: int, batch_size: int, lr: float,
                        personal_lr: float, lam: float, inner_steps: int,
                        generators: Sequence[torch.Generator]) -> tuple[Params, Params, Tensor]:
    """pFedMe's client update (Dinh et al. 2020, Alg. 1) for a cohort: (local w, personal theta, loss).

    For each mini-batch, theta takes ``inner_steps`` gradient steps on
    f(theta; batch) + lam/2 ||theta - w||^2 (theta carries over between batches, as in the
    authors' code), then w <- w - lr * lam * (w - theta). Both start at ``params`` (C, ...).
    """
    _check_hparams(local_epochs, batch_size, lr)
    safe, mask, active, counts, n_steps = cohort_batches(client_indices, local_epochs, batch_size,
                                                         generators, x.dtype)
    C, steps = active.shape
    names = list(params)
    w = [params[k].detach().clone() for k in names]
    theta = [t.clone() for t in w]
    loss_sum = torch.zeros(C)
    for s in range(steps):
        xb, yb = x[safe[:, s]], y[safe[:, s]]   # (C, B, ...), (C, B)
        on = active[:, s]
        for _ in range(inner_steps):
            th = [t.requires_grad_(True) for t in theta]
            logits = cohort_forward(model, dict(zip(names, th)), xb)  # (C, B, K)
            ce = F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="none").view(C, batch_size)
            per_client = (ce * mask[:, s]).sum(1) / counts[:, s]      # (C,)
            grads = torch.autograd.grad(per_client.sum(), th)
            with torch.no_grad():
                theta = [torch.where(_rows(on, t), t - personal_lr * (g + lam * (t - w0)), t)
                         for t, g, w0 in zip(th, grads, w)]
        with torch.no_grad():
            w = [torch.where(_rows(on, w0), w0 - lr * lam * (w0 - t), w0) for w0, t in zip(w, theta)]
            loss_sum += per_client.detach() * active[:, s]
    return ({k: t for k, t in zip(names, w)}, {k: t.detach() for k, t in zip(names, theta)},
            loss_sum / n_steps.to(loss_sum.dtype))


def _rows(active: Tensor, like: Tensor) -> Tensor:
    """(C,) bool broadcast to the shape of a stacked tensor (C, ...)."""
    return active.view(-1, *([1] * (like.ndim - 1)))


@torch.no_grad()
def evaluate(model: nn.Module, params: Params | None, x: Tensor, y: Tensor, *,
             batch_size: int = 2000) -> tuple[Tensor, Tensor]:
    """Per-sample correctness (n,) bool and loss (n,) of one model (``params`` or its own)."""
    if params is not None:
        model.load_state_dict(params, strict=False)
    correct, losses = [], []
    for i in range(0, len(y), batch_size):
        out = model(x[i:i + batch_size])
        correct.append(out.argmax(1) == y[i:i + batch_size])
        losses.append(F.cross_entropy(out, y[i:i + batch_size], reduction="none"))
    if not correct:
        return torch.zeros(0, dtype=torch.bool), torch.zeros(0)
    return torch.cat(correct), torch.cat(losses)
