"""pFedMe (Dinh et al. 2020, Alg. 1) against its inner loop written per client by hand.

For every mini-batch, the personal model theta takes K gradient steps on
f(theta; batch) + lam/2 ||theta - w_i||^2 (theta starts at the received model and carries over
between batches, as in the authors' code), then the client's copy of the global model moves
w_i <- w_i - lr lam (w_i - theta). The server mixes w <- (1 - beta) w + beta avg(w_i), the average
weighted by training samples as in the authors' code (Alg. 1 writes the plain mean over S clients).
"""
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from fltutor.engine import batch_schedule, client_generator, get_params
from fltutor.federation import Federation
from fltutor.methods.pfedme import PFedMeParams
from fltutor.models import make_model

from tiny import tiny_fed as _fed, cohort as _cohort

BASE = dict(rounds=3, client_fraction=0.25, local_epochs=1, batch_size=10, lr=0.05, seed=0)
PFEDME = dict(pfedme_lambda=15.0, pfedme_steps=5, pfedme_lr=0.1, pfedme_beta=1.0)  # Dinh et al.'s defaults


def _federation(fed, **kw):
    return Federation("mlp", fed, "pfedme", device="cpu", dtype=torch.float64, progress=False,
                      **{**BASE, **PFEDME, **kw})


def pfedme_reference(fed, *, pfedme_lambda, pfedme_steps, pfedme_lr, pfedme_beta, rounds, client_fraction,
                     local_epochs, batch_size, lr, seed, pfedme_train_all=False):
    """Yields (global model, {client: theta}) after every round. pfedme_train_all: Alg. 1 as written, every
    client trains every round and only the sampled ones' w_i are averaged."""
    lam = pfedme_lambda
    model = make_model("mlp", seed=seed).double()
    x, y = fed.x.double(), fed.y
    w = get_params(model)
    thetas = {}
    for r in range(rounds):
        local, sizes = [], []
        sampled = _cohort(seed, r, fed.num_clients, client_fraction)
        for k in range(fed.num_clients) if pfedme_train_all else sampled:
            idx = torch.as_tensor(fed.train[k])
            wl = {n: t.clone() for n, t in w.items()}
            theta = {n: t.clone() for n, t in w.items()}
            for pos in batch_schedule(len(idx), local_epochs, batch_size, client_generator(seed, r, int(k))):
                xb, yb = x[idx[pos]], y[idx[pos]]
                for _ in range(pfedme_steps):  # approximately solve the Moreau envelope's inner problem
                    th = {n: t.detach().requires_grad_(True) for n, t in theta.items()}
                    loss = F.cross_entropy(functional_call(model, th, (xb,)), yb)
                    grads = dict(zip(th, torch.autograd.grad(loss, list(th.values()))))
                    theta = {n: th[n].detach() - pfedme_lr * (grads[n] + lam * (th[n].detach() - wl[n])) for n in th}
                wl = {n: wl[n] - lr * lam * (wl[n] - theta[n]) for n in wl}
            thetas[int(k)] = theta
            if k in sampled:
                local.append(wl), sizes.append(len(idx))
        avg = {n: sum(s * p[n] for s, p in zip(sizes, local)) / sum(sizes) for n in w}
        w = {n: (1 - pfedme_beta) * w[n] + pfedme_beta * avg[n] for n in w}
        yield w, dict(thetas)


@pytest.mark.parametrize("kw", [
    {},
    dict(pfedme_lambda=5.0, pfedme_steps=2, pfedme_lr=0.05, pfedme_beta=1.5, local_epochs=2),
    dict(pfedme_train_all=True),
])
def test_every_round_equals_the_hand_written_inner_loop(kw):
    fed = _fed()
    fl = _federation(fed, **kw)
    for w, thetas in pfedme_reference(fed, **{**BASE, **PFEDME, **kw}):
        fl.run_round()
        for n in w:
            torch.testing.assert_close(fl.run_params(0)[n], w[n], rtol=1e-10, atol=1e-10)
        em = fl.eval_model(0)
        assert em.per_client
        for c in range(fed.num_clients):  # a client scores with its own theta, or the global model if unseen
            for n in w:
                want = thetas[c][n] if c in thetas else w[n]
                torch.testing.assert_close(em.params[n][c], want, rtol=1e-10, atol=1e-10)
    if kw.get("pfedme_train_all"):   # every theta moved, though a quarter of the clients reach the server
        assert len(thetas) == fed.num_clients and fl.seen[0].all()
    else:
        assert 0 < len(thetas) < fed.num_clients  # both kinds of client are checked


def test_beta_mixes_old_and_averaged_models():
    """One round with beta = 0.5 lands halfway between the start and the beta = 1 round."""
    fed = _fed()
    runs = {b: _federation(fed, pfedme_beta=b, rounds=1) for b in (0.5, 1.0)}
    start = {n: t.clone() for n, t in runs[1.0].run_params(0).items()}
    for f in runs.values():
        f.run()
    for n, t in start.items():
        torch.testing.assert_close(runs[0.5].run_params(0)[n], 0.5 * t + 0.5 * runs[1.0].run_params(0)[n],
                                   rtol=1e-12, atol=1e-12)
    assert (runs[1.0].run_params(0)["fc1.weight"] - start["fc1.weight"]).abs().max() > 1e-6


def test_unseen_clients_score_with_the_global_model():
    fed = _fed()
    fl = _federation(fed, rounds=2)
    fl.run()
    seen = fl.seen[0].tolist()
    assert not all(seen) and any(seen)
    net = make_model("mlp", seed=0).double()
    net.load_state_dict(fl.run_params(0), strict=False)
    acc = fl.local_accuracy(0)
    with torch.no_grad():
        for c, t in enumerate(fed.test):
            if not seen[c]:
                want = 100.0 * (net(fed.x[t].double()).argmax(1) == fed.y[t]).double().mean().item()
                assert acc[c] == pytest.approx(want, abs=1e-9)
        glob = 100.0 * (net(fed.x_test.double()).argmax(1) == fed.y_test).double().mean().item()
    assert fl.history[-1]["global_acc"] == pytest.approx(glob)


@pytest.mark.parametrize("kw", [dict(pfedme_steps=0), dict(pfedme_steps=True), dict(pfedme_steps=2.0),
                                dict(pfedme_lambda=0.0), dict(pfedme_lr=-0.1), dict(pfedme_beta=2.5),
                                dict(pfedme_beta=0.0), dict(pfedme_train_all=1)])
def test_bad_parameters_are_rejected(kw):
    with pytest.raises(ValueError, match="pfedme"):
        PFedMeParams(**kw)
