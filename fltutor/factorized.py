"""Weight-factorization WAFFLe (Hao et al., IEEE Access 2022): clients, server and evaluation.

Not the weighted-averaging WAFFLE of ``fltutor.personalized``. Every client's model is
drawn from one shared dictionary (``fltutor.layers``): W_i = W_a diag(r * b_i) W_b. The
client update (Algorithms 1-2) maximizes the ELBO of eq. 11 on its own data, updating the
shared W_a, W_b, r and its *private* variational parameters (pi, c, d). Only the shared
part goes back: a ``ClientMessage`` has no field that could carry private state.

Two methods:
- ``ibp``: WAFFLe. b_i is a concrete (relaxed Bernoulli) sample from q(b) = Bernoulli(pi),
  v ~ Kumaraswamy(c, d), and the IBP prior regularizes both (``fltutor.ibp``).
- ``l1``: the non-Bayesian ablation of Table 8. b_i is replaced by real per-client factor
  scores s_i learned by gradient descent with an L1 penalty l1_weight * ||s_i||_1.

Choices the paper leaves open (each stated where it is made, and checked for sensitivity
in notebook 02): alpha = alpha_ratio * F per layer; concrete temperature 2/3; the KL of
eq. 11 is scaled by 1/|D_i| per mini-batch so that one epoch sums to the ELBO; private
parameters start at the prior (pi_k = prior mean, c = alpha, d = 1, which makes
Kumaraswamy(c, d) = Beta(alpha, 1) exactly); a seen client evaluates with b_i = pi_i (the
posterior mean), an unseen one with b = E_prior[pi] = (alpha / (1 + alpha))^k.

Two more open choices decide the result (notebook 02, section 8): how the private parameters
are stepped (``selection_optimizer``, ``selection_lr``) and the weight of the KL
(``kl_weight``). The defaults here are Algorithm 2 as written, one SGD rate and the full ELBO;
on MNIST they leave every selection at the prior, so WAFFLe then behaves like FedAvg. Notebook
02 and its configs use Adam at 0.1 for the private parameters and a KL weight of 0.1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, Tensor
from torch.func import functional_call, vmap

from . import aggregators, ibp
from .client import Params, adam_step, client_generator, cohort_batches, sgd_step, stack_params
from .layers import factorized_layers, make_factorized_model
from .simulate import FedConfig, FederatedData, FACTORIZED_METHODS, Simulation

__all__ = ["ClientMessage", "init_private", "layer_alphas", "selection", "train_factorized_cohort",
           "aggregate", "FactorizedSimulation", "PRIVATE_SUFFIXES"]

# names of the client-private tensors of one factorized layer, per method
PRIVATE_SUFFIXES = {"ibp": ("pi_logit", "log_c", "log_d"), "l1": ("score",)}


@dataclass(frozen=True)
class ClientMessage:
    """What a cohort sends to the server: the shared parameters and sample counts, nothing else.

    shared: {name: (C, ...)} for W_a, W_b, r and the unfactorized layers; num_samples: (C,).
    """
    shared: Params
    num_samples: Tensor


def layer_alphas(model: nn.Module, alpha_ratio: float) -> dict[str, float]:
    """IBP alpha of each factorized layer: alpha_ratio * F (the paper's Table 9 reports alpha / F)."""
    return {name: alpha_ratio * f for name, f in factorized_layers(model).items()}


def init_private(model: nn.Module, num_clients: int, method: str, alpha_ratio: float) -> Params:
    """Every client's private state at the prior, {"layer.suffix": (N, F)}."""
    out = {}
    for name, f in factorized_layers(model).items():
        if method == "ibp":
            alpha = alpha_ratio * f
            pi = ibp.prior_mean_pi(alpha, f).clamp(1e-4, 1 - 1e-4)
            out[f"{name}.pi_logit"] = torch.log(pi / (1 - pi)).repeat(num_clients, 1)
            out[f"{name}.log_c"] = torch.full((num_clients, f), float(np.log(alpha)))
            out[f"{name}.log_d"] = torch.zeros(num_clients, f)
        else:
            out[f"{name}.score"] = torch.ones(num_clients, f)
    return out


def selection(private: Params, method: str, layers: Sequence[str]) -> dict[str, Tensor]:
    """The factor selection b used at evaluation: pi (ibp) or the scores (l1), {layer: (..., F)}."""
    if method == "ibp":
        return {l: torch.sigmoid(private[f"{l}.pi_logit"]) for l in layers}
    return {l: private[f"{l}.score"] for l in layers}


def _regularizer(private: dict[str, Tensor], u_v: dict[str, Tensor], method: str,
                 alphas: dict[str, float], l1_weight: float, kl_weight: float) -> Tensor:
    """Per-client regularizer of one step, (C,): kl_weight x the IBP KL of eq. 11, or the L1 penalty."""
    terms = []
    for l, alpha in alphas.items():
        if method == "ibp":
            terms.append(kl_weight * ibp.ibp_kl(private[f"{l}.pi_logit"], private[f"{l}.log_c"].exp(),
                                                private[f"{l}.log_d"].exp(), alpha, u_v[l]))
        else:
            terms.append(l1_weight * private[f"{l}.score"].abs().sum(-1))
    return torch.stack(terms).sum(0)


def train_factorized_cohort(model: nn.Module, shared: Params, private: Params, x: Tensor, y: Tensor,
                            client_indices: Sequence[Tensor], *, local_epochs: int, batch_size: int,
                            lr: float, method: str, alpha_ratio: float, temperature: float,
                            l1_weight: float, generators: Sequence[torch.Generator],
                            selection_lr: float | None = None, kl_weight: float = 1.0,
                            selection_optimizer: str = "sgd") -> tuple[ClientMessage, Params, Tensor]:
    """CLIENTUPDATE (Alg. 2) for a cohort: plain SGD on -ELBO / |D_i| for every mini-batch.

    shared: {name: (C, ...)}; private: {"layer.suffix": (C, F)}. Returns the message for
    the server, the new private state (which stays with the clients) and each client's
    mean cross-entropy (C,). ``kl_weight`` scales the IBP KL (1: the ELBO; 0: the data term
    alone, a diagnostic of what the prior holds back). Each client's noise comes from its own generator, after its
    batch schedule, so a client's result does not depend on who else is in the cohort.
    """
    if method not in FACTORIZED_METHODS:
        raise ValueError(f"method {method!r} is not a factorized method; choose one of {FACTORIZED_METHODS}")
    safe, mask, active, counts, n_steps = cohort_batches(client_indices, local_epochs, batch_size,
                                                         generators, x.dtype)
    C, steps = active.shape
    alphas = layer_alphas(model, alpha_ratio)
    layers, widths = list(alphas), [factorized_layers(model)[l] for l in alphas]
    f_tot = sum(widths)
    noise = torch.full((C, steps, 2 * f_tot), 0.5)            # (C, S, 2F): uniforms for b, then for v
    for c, g in enumerate(generators):
        noise[c, : int(n_steps[c])] = torch.rand(int(n_steps[c]), 2 * f_tot, generator=g)
    n_train = torch.tensor([len(i) for i in client_indices], dtype=x.dtype)  # (C,) |D_i|

    s_names, p_names = list(shared), list(private)
    n_sh = len(s_names)
    params = [shared[k].detach().clone().requires_grad_(True) for k in s_names] + \
             [private[k].detach().clone().requires_grad_(True) for k in p_names]
    if selection_optimizer not in ("sgd", "adam"):
        raise ValueError(f"selection_optimizer must be 'sgd' or 'adam', got {selection_optimizer!r}")
    bufs = [torch.zeros_like(t) for t in params]  # momentum 0: only for sgd_step's signature
    if selection_optimizer == "adam":  # the private parameters' moments, fresh every round
        adam_m, adam_v = [torch.zeros_like(t) for t in params[n_sh:]], [torch.zeros_like(t) for t in params[n_sh:]]
        adam_t = torch.zeros(C)
    fwd = vmap(lambda p, xb, b: functional_call(model, p, (xb, b)))
    ce_sum = torch.zeros(C)
    for s in range(steps):
        sh = dict(zip(s_names, params[:n_sh]))
        pr = dict(zip(p_names, params[n_sh:]))
        u_b = dict(zip(layers, noise[:, s, :f_tot].split(widths, dim=1)))   # {layer: (C, F)}
        u_v = dict(zip(layers, noise[:, s, f_tot:].split(widths, dim=1)))
        if method == "ibp":
            b = {l: ibp.relaxed_bernoulli_sample(pr[f"{l}.pi_logit"], temperature, u_b[l]) for l in layers}
        else:
            b = {l: pr[f"{l}.score"] for l in layers}
        xb, yb = x[safe[:, s]], y[safe[:, s]]                               # (C, B, ...), (C, B)
        logits = fwd(sh, xb, b)                                             # (C, B, K)
        ce = F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="none").view(C, batch_size)
        per_client = (ce * mask[:, s]).sum(1) / counts[:, s]               # (C,)
        reg = _regularizer(pr, u_v, method, alphas, l1_weight, kl_weight) / n_train   # (C,) KL / |D_i|
        grads = torch.autograd.grad((per_client + reg).sum(), params)
        with torch.no_grad():
            sgd_step(params[:n_sh], list(grads[:n_sh]), bufs[:n_sh], lr=lr, momentum=0.0, weight_decay=0.0,
                     active=active[:, s])
            if selection_optimizer == "adam":
                adam_step(params[n_sh:], list(grads[n_sh:]), adam_m, adam_v, adam_t, lr=selection_lr or lr,
                          active=active[:, s])
            else:
                sgd_step(params[n_sh:], list(grads[n_sh:]), bufs[n_sh:], lr=selection_lr or lr, momentum=0.0,
                         weight_decay=0.0, active=active[:, s])
            if method == "ibp":  # keep Kumaraswamy parameters in a range where sampling is exact
                for k, t in zip(p_names, params[n_sh:]):
                    if not k.endswith("pi_logit"):
                        t.clamp_(-6.0, 8.0)
            ce_sum += per_client.detach() * active[:, s]
    message = ClientMessage({k: t.detach() for k, t in zip(s_names, params[:n_sh])},
                            torch.tensor([len(i) for i in client_indices], dtype=torch.float64))
    return message, {k: t.detach() for k, t in zip(p_names, params[n_sh:])}, ce_sum / n_steps.to(ce_sum.dtype)


def aggregate(global_params: Params, message: ClientMessage) -> Params:
    """Server step of Alg. 1 line 10: average the shared parameters, weighted by sample count."""
    missing = set(global_params) ^ set(message.shared)
    if missing:
        raise ValueError(f"aggregate: the message's parameters differ from the global ones in {sorted(missing)}; "
                         "a client must send exactly the shared dictionary")
    return aggregators.fedavg(global_params, message.shared, message.num_samples)


class FactorizedSimulation(Simulation):
    """The round loop of ``Simulation`` with WAFFLe clients: shared dictionary, private selections.

    ``private`` holds every client's variational parameters (N, F) per layer and
    ``seen`` (N,) which clients have trained at least once; neither ever reaches the server.
    """

    def __init__(self, model: str, data: FederatedData, config: FedConfig, **kw):
        if config.method not in FACTORIZED_METHODS:
            raise ValueError(f"FactorizedSimulation runs methods {FACTORIZED_METHODS}, got {config.method!r}; "
                             "use Simulation for the others")
        if not isinstance(model, str):
            raise ValueError("FactorizedSimulation: pass the baseline model's name (e.g. 'mlp'); "
                             "its factorized twin is built from fltutor.layers")
        net = make_factorized_model(model, seed=config.seed, num_factors=config.num_factors)
        self.layers = list(factorized_layers(net))
        self.private = init_private(net, data.num_clients, config.method, config.alpha_ratio)
        self.seen = torch.zeros(data.num_clients, dtype=torch.bool)
        super().__init__(net, data, config, **kw)  # model_name is the class's, e.g. IBPMLP

    def run_round(self) -> dict:
        cfg, r = self.config, self.round
        cohort = self.sample_clients(r)
        rows = torch.as_tensor(cohort)
        idx = [torch.as_tensor(self.data.train[k]) for k in cohort]
        gens = [client_generator(cfg.seed, r, int(k)) for k in cohort]
        message, private, ce = train_factorized_cohort(
            self.model, stack_params(self.global_params, len(cohort)), {k: v[rows] for k, v in self.private.items()},
            self.data.x, self.data.y, idx, local_epochs=cfg.local_epochs, batch_size=cfg.batch_size, lr=cfg.lr,
            method=cfg.method, alpha_ratio=cfg.alpha_ratio, temperature=cfg.temperature,
            l1_weight=cfg.l1_weight, generators=gens, selection_lr=cfg.selection_lr, kl_weight=cfg.kl_weight,
            selection_optimizer=cfg.selection_optimizer)
        for k, v in private.items():  # private state stays on the clients
            self.private[k][rows] = v
        self.seen[rows] = True
        self.global_params = aggregate(self.global_params, message)
        self.round += 1
        entry = {"round": self.round, "clients": cohort.tolist(), "train_loss": float(ce.mean())}
        if self.round % cfg.eval_every == 0 or self.round == cfg.rounds:
            entry.update(self.evaluate())
            entry["active_factors"] = self.active_factors()
        self.history.append(entry)
        return entry

    # ---- evaluation ----------------------------------------------------------------
    def unseen_selection(self) -> dict[str, Tensor]:
        """b of a client that never trained: the IBP prior mean (ibp) or the initial scores 1 (l1)."""
        alphas = layer_alphas(self.model, self.config.alpha_ratio)
        if self.config.method == "ibp":
            return {l: ibp.prior_mean_pi(alphas[l], factorized_layers(self.model)[l]) for l in self.layers}
        return {l: torch.ones(factorized_layers(self.model)[l]) for l in self.layers}

    def client_selection(self) -> dict[str, Tensor]:
        """b of every client at evaluation, {layer: (N, F)}: its own if seen, else the unseen one."""
        own = selection(self.private, self.config.method, self.layers)
        unseen = self.unseen_selection()
        seen = self.seen.view(-1, 1)
        return {l: torch.where(seen, own[l], unseen[l].unsqueeze(0)) for l in self.layers}

    @torch.no_grad()
    def local_accuracy(self) -> np.ndarray:
        """Accuracy (%) of every client on its local test set, each with its own factor selection."""
        d, b = self.data, self.client_selection()
        fwd = vmap(lambda xb, bb: functional_call(self.model, self.global_params, (xb, bb)))
        acc = np.zeros(d.num_clients)
        chunk = 32
        for lo in range(0, d.num_clients, chunk):
            ks = list(range(lo, min(lo + chunk, d.num_clients)))
            t_max = max(len(d.test[k]) for k in ks)
            pos = torch.zeros(len(ks), t_max, dtype=torch.long)   # (C, T) test indices, padded
            real = torch.zeros(len(ks), t_max, dtype=torch.bool)
            for c, k in enumerate(ks):
                pos[c, : len(d.test[k])] = torch.as_tensor(d.test[k])
                real[c, : len(d.test[k])] = True
            pred = fwd(d.x[pos], {l: v[ks] for l, v in b.items()}).argmax(-1)  # (C, T)
            hits = ((pred == d.y[pos]) & real).sum(1).double()
            acc[lo: lo + len(ks)] = (100.0 * hits / real.sum(1)).numpy()
        return acc

    @torch.no_grad()
    def global_accuracy(self) -> float | None:
        """Accuracy (%) on the dataset's test split of the model an unseen client would use."""
        if self.data.x_test is None:
            return None
        b = self.unseen_selection()
        hits = 0
        for i in range(0, len(self.data.y_test), 2000):
            out = functional_call(self.model, self.global_params, (self.data.x_test[i:i + 2000], b))
            hits += (out.argmax(1) == self.data.y_test[i:i + 2000]).sum().item()
        return 100.0 * hits / len(self.data.y_test)

    def active_factors(self, threshold: float = 0.5) -> dict[str, float]:
        """Mean number of factors per seen client with b > threshold, per layer."""
        b = selection(self.private, self.config.method, self.layers)
        if not bool(self.seen.any()):
            return {l: 0.0 for l in self.layers}
        return {l: float((b[l][self.seen].abs() > threshold).sum(1).double().mean()) for l in self.layers}

    # ---- checkpoints ---------------------------------------------------------------
    def _state(self) -> dict:
        return {**super()._state(), "private": self.private, "seen": self.seen}

    def _restore(self, state: dict) -> None:
        self.private, self.seen = state["private"], state["seen"]

    def results(self) -> dict:
        out = super().results()
        out["final"]["active_factors"] = next((h["active_factors"] for h in reversed(self.history)
                                                if "active_factors" in h), None)
        return out

