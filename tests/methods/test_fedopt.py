"""FedOpt with GMA's masks against the server step written by hand from the papers' equations.

GMA (Tenison et al. 2023) Alg. 2 with Reddi et al. 2021's optimizers: the pseudo-gradient
Delta = sum_n s_n / sum(s) (w_n - w); the mask from the sign agreement of the clients' updates
(every client one vote); m and v see the unmasked Delta, v starts at eps^2, no bias correction;
the mask multiplies the final step w + eta_g * mask * m / (sqrt(v) + eps).
"""
import pytest
import torch

from fltutor.engine import client_generator, get_params, train_client
from fltutor.federation import Federation
from fltutor.methods.fedopt import FedOptParams
from fltutor.models import make_model

from tiny import tiny_fed as _fed, cohort as _cohort

BASE = dict(rounds=3, client_fraction=0.5, local_epochs=1, batch_size=10, lr=0.05, seed=0)  # cohorts of 4


def _federation(fed, method="fedopt", **kw):
    return Federation("mlp", fed, method, device="cpu", dtype=torch.float64, progress=False, **{**BASE, **kw})


def hand_mask(updates, aggregation, tau):
    """A = |(1/C) sum_n sign(u_n)| per coordinate; GMA (eq. 3): 1 where A >= tau else A; AND-mask: [A >= tau]."""
    votes = sum(torch.sign(u) for u in updates) / len(updates)
    a = votes.abs()
    if aggregation == "gma":
        return torch.where(a >= tau, torch.ones_like(a), a)
    return (a >= tau).double()


def fedopt_reference(fed, *, server_opt="sgd", server_lr=1.0, aggregation="mean", tau=0.4, beta1=0.9, beta2=0.99,
                     server_eps=1e-3, mu=0.0, rounds, client_fraction, local_epochs, batch_size, lr, seed,
                     momentum=0.0):
    """Clients by train_client, the server step by hand; yields the global model after every round."""
    model = make_model("mlp", seed=seed).double()
    x, y = fed.x.double(), fed.y
    w = get_params(model)
    m = {k: torch.zeros_like(v) for k, v in w.items()}
    v = {k: torch.full_like(t, server_eps ** 2) for k, t in w.items()}            # v_0 = eps^2 (Reddi et al.)
    for r in range(rounds):
        cohort = _cohort(seed, r, fed.num_clients, client_fraction)
        trained, sizes = [], []
        for k in cohort:
            idx = torch.as_tensor(fed.train[k])
            p, _ = train_client(model, w, x[idx], y[idx], local_epochs=local_epochs, batch_size=batch_size, lr=lr,
                                momentum=momentum, prox_mu=mu, generator=client_generator(seed, r, int(k)))
            trained.append(p), sizes.append(len(idx))
        new = {}
        for k in w:
            updates = [p[k] - w[k] for p in trained]
            delta = sum(s * u for s, u in zip(sizes, updates)) / sum(sizes)
            if server_opt == "sgd":
                step = delta
            else:
                m[k] = beta1 * m[k] + (1 - beta1) * delta
                if server_opt == "adagrad":
                    v[k] = v[k] + delta ** 2
                elif server_opt == "adam":
                    v[k] = beta2 * v[k] + (1 - beta2) * delta ** 2
                else:  # yogi
                    v[k] = v[k] - (1 - beta2) * delta ** 2 * torch.sign(v[k] - delta ** 2)
                step = m[k] / (v[k].sqrt() + server_eps)
            if aggregation != "mean":
                step = hand_mask(updates, aggregation, tau) * step
            new[k] = w[k] + server_lr * step
        w = new
        yield w


def _assert_params(got, want, tol=1e-10):
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=tol, atol=tol)


@pytest.mark.parametrize("method,kw", [
    ("fedopt", dict(server_opt="sgd", server_lr=0.7, aggregation="gma")),
    ("fedopt", dict(server_opt="sgd", server_lr=1.5, aggregation="and", tau=0.6)),
    ("fedadam", dict(server_lr=0.01, aggregation="gma")),
    ("fedyogi", dict(server_lr=0.01, aggregation="and", mu=0.5)),
    ("fedadagrad", dict(server_lr=0.02, momentum=0.9)),
    ("fedopt", dict(server_opt="adam", server_lr=0.03, aggregation="gma", tau=0.6, beta1=0.5, beta2=0.9,
                    server_eps=1e-2)),
])
def test_every_round_equals_the_hand_written_server_step(method, kw):
    fed = _fed()
    fl = _federation(fed, method, **kw)
    preset = {"fedadam": "adam", "fedyogi": "yogi", "fedadagrad": "adagrad"}.get(method)
    ref = fedopt_reference(fed, **{**BASE, **kw, **({"server_opt": preset} if preset else {})})
    for w in ref:
        fl.run_round()
        _assert_params(fl.run_params(0), w)


def test_the_masks_change_the_step():
    """So that the masked cases above can fail: with tau = 0.6 and 4 clients, a 2:2 or 3:1 vote is damped."""
    fed = _fed()
    runs = {a: _federation(fed, aggregation=a, tau=0.6, rounds=1) for a in ("mean", "gma", "and")}
    for f in runs.values():
        f.run()
    w = {a: f.run_params(0)["fc1.weight"] for a, f in runs.items()}
    assert (w["mean"] - w["gma"]).abs().max() > 1e-6 and (w["gma"] - w["and"]).abs().max() > 1e-6


def test_gma_with_tau_zero_is_plain_averaging():
    """tau = 0: every agreement A >= 0, so the mask is all ones and server SGD at rate 1 gives FedAvg."""
    fed = _fed()
    avg = _federation(fed, "fedavg", momentum=0.9)
    gma0 = _federation(fed, aggregation="gma", tau=0.0, momentum=0.9)
    gma4 = _federation(fed, aggregation="gma", tau=0.4, momentum=0.9)
    for f in (avg, gma0, gma4):
        f.run()
    _assert_params(gma0.run_params(0), avg.run_params(0), tol=1e-12)
    assert any(not torch.allclose(gma4.run_params(0)[k], avg.run_params(0)[k]) for k in avg.run_params(0))


def test_server_sgd_at_rate_one_without_mask_is_fedavg():
    fed = _fed()
    a, b = _federation(fed, "fedavg", mu=0.2), _federation(fed, "fedopt", mu=0.2)  # defaults: sgd, 1.0, mean
    a.run(), b.run()
    _assert_params(b.run_params(0), a.run_params(0), tol=1e-12)
    assert b.settings[0]["server_opt"] == "sgd" and b.settings[0]["server_lr"] == 1.0


def test_the_aliases_preset_the_server_optimizer():
    fed = _fed()
    a = _federation(fed, "fedadam", server_lr=0.01, rounds=2)
    b = _federation(fed, "fedopt", server_opt="adam", server_lr=0.01, rounds=2)
    a.run(), b.run()
    _assert_params(a.run_params(0), b.run_params(0), tol=0)
    assert a.settings[0]["server_opt"] == "adam"


def test_masked_adaptive_run_resumes(tmp_path):
    """The server's moments m and v live in the checkpoint: a resumed run equals an uninterrupted one."""
    fed = _fed()
    kw = dict(aggregation="gma", server_opt="yogi", server_lr=0.01, rounds=4)
    full = _federation(fed, **kw)
    full.run()
    _federation(fed, out_dir=tmp_path, checkpoint_every=2, **kw).run(rounds=2)
    resumed = _federation(fed, out_dir=tmp_path, **kw)
    assert resumed.round == 2
    resumed.run()
    _assert_params(resumed.run_params(0), full.run_params(0), tol=0)
    assert resumed.history == full.history


@pytest.mark.parametrize("kw,match", [
    (dict(aggregation="median"), "aggregation"),
    (dict(tau=1.5), "tau"),
    (dict(server_opt="rmsprop"), "server_opt"),
    (dict(server_lr=0.0), "server_lr"),
])
def test_bad_parameters_are_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        FedOptParams(**kw)


@pytest.mark.parametrize("method", ["fedadagrad", "fedadam", "fedyogi"])
def test_adaptive_presets_take_a_small_server_rate(method):
    """An adaptive server steps by up to about server_lr per coordinate wherever the update outgrows eps, however
    small it is: at FedAvg's rate 1 the preset would move weights by ~0.4-0.7 in round one. The presets default to
    0.01 (the rate this package's tables use); one round from them stays within 2 x 0.01 of the start."""
    fed = _fed()
    fl = Federation("mlp", fed, method, device="cpu", dtype=torch.float64, progress=False, **{**BASE, "rounds": 1})
    assert fl.methods[0].params.server_lr == 0.01
    start = {k: v.clone() for k, v in fl.run_params(0).items()}
    fl.run()
    step = max((fl.run_params(0)[k] - v).abs().max().item() for k, v in start.items())
    assert 1e-6 < step <= 2 * 0.01
