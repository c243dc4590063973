"""The privacy audit: what each method hands an attacker, and what the attacks make of it.

Threat model (both WAFFLe papers' and GMA's): an attacker intercepts what one client sends in
one round, or breaches the server. ``attack_targets`` turns a trained ``Federation`` into the
models such an attacker can query, each a ``Target``:

- view "message": the model read off client k's next message (``Method.intercept``). What was
  not sent, the attacker fills in, and ``guess`` says how: FedPer's head is fitted on the
  attacker's own data with the base frozen ("probe"); weight-factorization WAFFLe's selection
  b is the IBP prior mean ("prior", what the server itself uses for a client it has not seen),
  every factor on ("ones"), read off the update ("update": the factors whose W_a columns moved,
  ``selection_attack.selection_from_update``), fitted on the attacker's data with the
  dictionary frozen ("fitted") or the client's own ("true", an upper bound: the attacker also
  broke into the device). A Local client sends nothing: no target.
- view "server": the model the server holds (``Method.global_model``), where it has one.
- view "client": the model client k itself scores with (a stolen device), for reference.

``membership_rows`` runs the loss-threshold, logit and shadow-model attacks on one target with
the client's training samples as members and its held-out samples as non-members;
``inversion_rows`` runs MI-FACE for every class and scores it as WAFFLe's Table 4 does. Both
return tidy rows (one per metric) for ``fltutor.results``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from . import engine
from .checks import integer, number
from .federation import Federation
from .inversion import invert_class, inversion_report
from .methods.waffle_ibp import WaffleIBP
from .models import make_model
from .privacy import apply_shadow_attack, fit_shadow_attack, logit_attack, loss_threshold_attack

__all__ = ["GUESSES", "METRICS", "Target", "headline_target", "attack_targets", "fit_missing", "fit_shadow",
           "train_evaluator",
           "membership_rows", "inversion_rows", "audit"]

GUESSES = ("prior", "ones", "update", "fitted", "true")   # weight-factorization WAFFLe's b, as the attacker fills it
METRICS = ("accuracy", "f1", "auc", "tpr@1%fpr", "tpr@0.1%fpr")


def headline_target(method: str) -> tuple[str, str]:
    """(view, guess) of the row a summary table reports for ``method``: its intercepted message, with the guess an
    attacker needs to query it (weight-factorization WAFFLe's b from the prior; FedPer's head fitted by a probe);
    Local sends nothing, so its device is the only target."""
    if method == "local":
        return "client", ""
    if method.startswith("waffle_ibp"):
        return "message", "prior"
    return "message", "probe" if method == "fedper" else ""


@dataclass
class Target:
    """One model an attacker can query: parameters, extra inputs, and where they came from."""
    method: str
    view: str                     # "message", "server" or "client"
    guess: str                    # how the attacker filled in what was not sent ("" if nothing was missing)
    params: engine.Params
    inputs: tuple = ()
    holds: str = ""               # the method's words for what this view holds
    extra: dict = field(default_factory=dict)   # e.g. how well the guessed b matches the true one

    @property
    def label(self) -> str:
        return f"{self.method} {self.view}" + (f" ({self.guess})" if self.guess else "")


def _logits(model: nn.Module, params: engine.Params, x: Tensor, *inputs) -> Tensor:
    return functional_call(model, params, (x, *inputs))


def fit_missing(model: nn.Module, sent: engine.Params, init: engine.Params, x: Tensor, y: Tensor, *, steps: int,
                lr: float, batch_size: int, seed: int) -> engine.Params:
    """The attacker completes a partial model: the parameters in ``init`` are fitted on (x, y), ``sent`` frozen.

    Adam on the cross-entropy of mini-batches drawn with ``seed``; returns ``sent`` and the fitted rest.
    """
    steps, batch_size = integer("steps", steps, low=1), integer("batch_size", batch_size, low=1)
    lr = number("lr", lr, low=0, low_open=True)
    frozen = {k: v.detach() for k, v in sent.items()}
    free = {k: v.detach().clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.Adam(list(free.values()), lr=lr)
    g = torch.Generator().manual_seed(seed)
    with torch.enable_grad():
        for _ in range(steps):
            idx = torch.randint(len(y), (min(batch_size, len(y)),), generator=g).to(x.device)
            loss = F.cross_entropy(_logits(model, {**frozen, **free}, x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {**frozen, **{k: v.detach() for k, v in free.items()}}


def attack_targets(fed: Federation, client: int, *, public_x: Tensor, public_y: Tensor, run: int = 0,
                   guesses=GUESSES, fit_steps: int = 300, fit_lr: float = 0.05, seed: int = 0) -> list[Target]:
    """Every model an attacker can query about ``client`` of run ``run`` (see the module docstring).

    ``public_x, public_y``: the attacker's own labelled data (on fed's device), used to fit what
    was not sent (FedPer's head, WAFFLe's b) with ``fit_steps`` Adam steps at ``fit_lr``.
    """
    from .selection_attack import fit_selection, selection_from_update, selection_recovery
    m = fed.methods[run]
    name = fed.method_name
    for gss in guesses:
        if gss not in GUESSES:
            raise ValueError(f"guesses: {gss!r} is not a way to fill in b; choose from {GUESSES}")
    g = fed.run_params(run)
    msg = fed.intercept(client, run)[client]
    sent = m.intercept(msg, g)
    out: list[Target] = []
    fit = dict(steps=fit_steps, lr=fit_lr, batch_size=64, seed=seed)
    if sent and isinstance(m, WaffleIBP):
        like = next(iter(g.values()))
        truth = m.client_selection({k: v[run] for k, v in fed.private.items()}, fed.seen[run])
        truth = {l: b[client] for l, b in truth.items()}                          # {layer: (F,)}
        for gss in guesses:
            if gss == "prior":
                b = m.unseen_selection(like)
            elif gss == "ones":
                b = {l: torch.ones_like(v) for l, v in truth.items()}
            elif gss == "update":
                b = selection_from_update(msg, g, m.widths)
            elif gss == "fitted":
                b = fit_selection(fed.model, sent, public_x, public_y, m.widths, **fit)
            else:
                b = truth
            rec = selection_recovery(b, truth) if gss in ("prior", "update", "fitted") else {}
            out.append(Target(name, "message", gss, sent, ({l: v.to(like) for l, v in b.items()},),
                              m.message_holds, {"selection": rec}))
    elif sent:
        missing = {k: v for k, v in g.items() if k not in sent}
        if missing:   # FedPer: the head never leaves the client; the attacker fits one on its own data
            params = fit_missing(fed.model, sent, missing, public_x, public_y, **fit)
            out.append(Target(name, "message", "probe", params, (), m.message_holds))
        else:
            out.append(Target(name, "message", "", sent, (), m.message_holds))
    gm = m.global_model(g, fed.server[run])
    if gm is not None:
        out.append(Target(name, "server", "", gm[0], tuple(gm[1]), m.server_holds))
    em = fed.eval_model(run)
    params = {k: v[client] for k, v in em.params.items()} if em.per_client else em.params
    inputs = tuple({l: b[client] for l, b in t.items()} if isinstance(t, dict) else t[client] for t in em.inputs)
    out.append(Target(name, "client", "", params, inputs, m.client_keeps))
    return out


def train_evaluator(model_name: str, x: Tensor, y: Tensor, *, epochs: int, lr: float, batch_size: int = 64,
                    seed: int = 0) -> tuple[nn.Module, engine.Params]:
    """The separately trained classifier that judges inversions (WAFFLe Table 4): plain SGD with momentum."""
    epochs = integer("epochs", epochs, low=1)
    model = make_model(model_name, seed=seed).to(x.device, x.dtype)
    params = engine.get_params(model)
    params, _ = engine.train_client(model, params, x, y, local_epochs=epochs, batch_size=batch_size, lr=lr,
                                    momentum=0.9, generator=torch.Generator().manual_seed(seed))
    return model, params


def _rows(target: Target, client: int, attack: str, report: dict, **extra) -> list[dict]:
    return [{"method": target.method, "view": target.view, "guess": target.guess, "client": client,
             "attack": attack, **extra, "metric": k, "value": float(report[k])} for k in METRICS if k in report]


def membership_rows(model: nn.Module, target: Target, fed_data, client: int, shadow: dict, *, seed: int,
                    max_samples: int | None = None) -> tuple[list[dict], dict]:
    """Loss-threshold, logit and shadow-model attacks on one target about one client's training data.

    Members: the client's training samples; non-members: its held-out samples, as many of each
    (the smaller count, at most ``max_samples``, drawn with ``seed``). ``shadow``: a fitted
    ``privacy.fit_shadow_attack``. Returns (tidy rows, {attack: report with scores}).
    """
    device = next(iter(target.params.values())).device
    members, others = np.asarray(fed_data.train[client]), np.asarray(fed_data.test[client])
    n = min(len(members), len(others), max_samples or len(members))
    rng = np.random.default_rng([seed, client, 11])
    idx = np.concatenate([rng.choice(members, n, replace=False), rng.choice(others, n, replace=False)])
    x = fed_data.x[torch.as_tensor(idx)].to(device, next(iter(target.params.values())).dtype)
    y = fed_data.y[torch.as_tensor(idx)].to(device)
    is_member = torch.cat([torch.ones(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)])
    reports = {"loss": loss_threshold_attack(model, target.params, x, y, is_member, *target.inputs),
               "logit": logit_attack(model, target.params, x, is_member, *target.inputs, seed=seed),
               "shadow": apply_shadow_attack(shadow, model, target.params, x, y, is_member, *target.inputs)}
    for rep in reports.values():   # which queried samples were members, aligned with rep["scores"]
        rep["is_member"] = is_member[rep["test_idx"]] if "test_idx" in rep else is_member
    rows = [r for a, rep in reports.items() for r in _rows(target, client, a, rep)]
    return rows, reports


def inversion_rows(model: nn.Module, target: Target, x_ref: Tensor, y_ref: Tensor, evaluator, client: int, *,
                   num_classes: int, steps: int, lr: float, tv_weight: float = 0.0,
                   bounds: tuple[float, float] = (0.0, 1.0)) -> tuple[list[dict], Tensor]:
    """MI-FACE on every class of one target, scored against the class means of (x_ref, y_ref) (WAFFLe Table 4).

    ``bounds``: pixels 0 and 1 in the data's units (``data.pixel_bounds``): the images are clipped
    to them and PSNR uses data range hi - lo. Returns (rows: "psnr" in dB and "attack_accuracy" in
    [0, 1], the reconstructions (K, ...) in the data's units).
    """
    classes = list(range(num_classes))
    recon = invert_class(model, target.params, classes, *target.inputs, shape=tuple(x_ref.shape[1:]), steps=steps,
                         lr=lr, tv_weight=tv_weight, clamp=tuple(bounds))
    eval_model, eval_params = evaluator
    rep = inversion_report(recon, x_ref, y_ref, classes, eval_model, eval_params, data_range=bounds[1] - bounds[0])
    base = {"method": target.method, "view": target.view, "guess": target.guess, "client": client,
            "attack": "inversion"}
    return [{**base, "metric": "psnr", "value": rep["mean_psnr"]},
            {**base, "metric": "attack_accuracy", "value": rep["attack_accuracy"]}], recon


def fit_shadow(model_name: str, x: Tensor, y: Tensor, *, in_size: int, epochs: int, lr: float, batch_size: int,
               num_shadows: int = 3, seed: int = 0) -> dict:
    """Shokri's shadows for the audit: ``num_shadows`` fresh ``model_name`` networks on the attacker's data."""
    shadow_model = make_model(model_name, seed=seed).to(x.device, x.dtype)
    return fit_shadow_attack(shadow_model, None, x, y, num_shadows=num_shadows, in_size=in_size, local_epochs=epochs,
                             batch_size=batch_size, lr=lr, seed=seed)


def audit(fed: Federation, pd, *, clients, shadow: dict, evaluator, run: int = 0, guesses=GUESSES,
          inversion_steps: int = 300, inversion_lr: float = 0.1, max_samples: int | None = None, fit_steps: int = 300,
          fit_lr: float = 0.05, seed: int = 0, label: dict | None = None,
          bounds: tuple[float, float] = (0.0, 1.0)) -> tuple[list[dict], dict]:
    """Every attack on every target of run ``run`` about each of ``clients``; tidy rows and the raw material.

    ``pd``: the ``scenarios.PrivacyData`` the federation trained on (the attacker's data is
    ``pd.attacker``); ``shadow``: ``fit_shadow``'s attack models; ``evaluator``: (model, params)
    of ``train_evaluator``; ``bounds``: ``data.pixel_bounds`` of the dataset (for the inversions).
    Rows: one per (target, client, attack, metric), plus the method's local
    accuracy ("utility", "local_acc" of the client and "mean_local_acc" over all) and, for WAFFLe's
    guessed b, how well it matches the true one ("selection"). ``label`` adds columns (e.g. seed).
    Returns (rows, {"scores": {(target label, client, attack): (scores, is_member)},
    "reconstructions": {(target label, client): (K, ...)}}).
    """
    label = dict(label or {})
    dev, dt = fed.device, fed.dtype
    xa = pd.fed.x[torch.as_tensor(pd.attacker)].to(dev, dt)
    ya = pd.fed.y[torch.as_tensor(pd.attacker)].to(dev)
    acc = fed.local_accuracy(run)
    rows, scores, recons = [], {}, {}
    num_classes = int(pd.fed.y.max()) + 1
    for k in clients:
        k = int(k)
        base = {"method": fed.method_name, "client": k}
        rows += [{**base, "view": "client", "guess": "", "attack": "utility", **label, "metric": "local_acc",
                  "value": float(acc[k])},
                 {**base, "view": "client", "guess": "", "attack": "utility", **label, "metric": "mean_local_acc",
                  "value": float(acc.mean())}]
        tr = torch.as_tensor(np.asarray(pd.fed.train[k]))
        x_ref, y_ref = pd.fed.x[tr].to(dev, dt), pd.fed.y[tr].to(dev)
        for t in attack_targets(fed, k, public_x=xa, public_y=ya, run=run, guesses=guesses, fit_steps=fit_steps,
                                fit_lr=fit_lr, seed=seed):
            mr, reports = membership_rows(fed.model, t, pd.fed, k, shadow, seed=seed, max_samples=max_samples)
            ir, recon = inversion_rows(fed.model, t, x_ref, y_ref, evaluator, k, num_classes=num_classes,
                                       steps=inversion_steps, lr=inversion_lr, bounds=bounds)
            sel = t.extra.get("selection", {}).get("overall", {})
            sr = [{"method": t.method, "view": t.view, "guess": t.guess, "client": k, "attack": "selection",
                   "metric": m, "value": float(v)} for m, v in sel.items() if m in ("spearman", "precision", "auc")]
            for r in mr + ir + sr:
                rows.append({**{c: r[c] for c in ("method", "view", "guess", "client", "attack")}, **label,
                             "metric": r["metric"], "value": r["value"]})
            for a, rep in reports.items():
                scores[(t.label, k, a)] = (rep["scores"].cpu(), rep["is_member"])
            recons[(t.label, k)] = recon.cpu()
    return rows, {"scores": scores, "reconstructions": recons}
