"""q-FedAvg against its update written by hand (Li et al. 2020, "Fair resource allocation in FL", Alg. 2).

With L = 1/lr, each sampled client k reports F_k (its training loss at the model w it received) and
w_k (its trained model); Delta_k = F_k^q L (w - w_k), h_k = q F_k^(q-1) ||L (w - w_k)||^2 + L F_k^q,
and the server sets w <- w - sum_k Delta_k / sum_k h_k.
"""
import pytest
import torch
import torch.nn.functional as F

from fltutor.engine import client_generator, get_params, train_client
from fltutor.federation import Federation
from fltutor.models import make_model

from tiny import tiny_fed as _fed, cohort as _cohort

BASE = dict(rounds=3, client_fraction=0.5, local_epochs=1, batch_size=10, lr=0.05, seed=0)


def _federation(fed, method="qffl", **kw):
    return Federation("mlp", fed, method, device="cpu", dtype=torch.float64, progress=False, **{**BASE, **kw})


def qffl_reference(fed, *, q, rounds, client_fraction, local_epochs, batch_size, lr, seed):
    """Yields (global model, each client's model, start losses) after every round."""
    model = make_model("mlp", seed=seed).double()
    x, y = fed.x.double(), fed.y
    w = get_params(model)
    L = 1.0 / lr
    for r in range(rounds):
        cohort = _cohort(seed, r, fed.num_clients, client_fraction)
        trained, start_losses = [], []
        for k in cohort:
            idx = torch.as_tensor(fed.train[k])
            model.load_state_dict(w, strict=False)
            with torch.no_grad():  # F_k: the mean training loss of the received model, one client at a time
                start_losses.append(F.cross_entropy(model(x[idx]), y[idx]).item())
            p, _ = train_client(model, w, x[idx], y[idx], local_epochs=local_epochs, batch_size=batch_size, lr=lr,
                                generator=client_generator(seed, r, int(k)))
            trained.append(p)
        dw = [{k: L * (w[k] - p[k]) for k in w} for p in trained]
        sq = [sum(float((d[k] ** 2).sum()) for k in w) for d in dw]
        h = [q * f ** (q - 1) * s + L * f ** q for f, s in zip(start_losses, sq)]
        w = {k: w[k] - sum(f ** q * d[k] for f, d in zip(start_losses, dw)) / sum(h) for k in w}
        yield w, trained, start_losses


def _assert_params(got, want, tol=1e-10):
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=tol, atol=tol)


@pytest.mark.parametrize("q, local_epochs", [(0.001, 1), (0.5, 1), (2.0, 1), (0.5, 2)])
def test_every_round_equals_the_hand_written_update(q, local_epochs):
    """L = 1/lr whatever the number of local epochs (Li et al.'s Alg. 2 estimates L by the inverse step size)."""
    fed = _fed()
    fl = _federation(fed, q=q, local_epochs=local_epochs)
    for w, _, _ in qffl_reference(fed, q=q, **{**BASE, "local_epochs": local_epochs}):
        fl.run_round()
        _assert_params(fl.run_params(0), w)


def test_the_default_q_is_waffles_and_q_matters():
    fed = _fed()
    a, b = _federation(fed, rounds=1), _federation(fed, q=2.0, rounds=1)
    assert a.settings[0]["q"] == 0.001  # WAFFLe's experiments
    a.run(), b.run()
    assert (a.run_params(0)["fc1.weight"] - b.run_params(0)["fc1.weight"]).abs().max() > 1e-8


def test_q_zero_is_the_unweighted_mean_of_the_clients():
    """q = 0: h_k = L for every client, so w - sum L (w - w_k) / (C L) = (1/C) sum_k w_k, whatever L is."""
    fed = _fed()
    fl = _federation(fed, q=0.0)
    for w, trained, _ in qffl_reference(fed, q=0.0, **BASE):
        mean = {k: sum(p[k] for p in trained) / len(trained) for k in w}
        _assert_params(w, mean, tol=1e-12)  # the closed form holds for the hand update too
        fl.run_round()
        _assert_params(fl.run_params(0), mean)


def test_q_zero_equals_fedavg_when_clients_are_equal_sized_and_not_otherwise():
    equal = _fed(sizes=[30] * 8)
    a, b = _federation(equal, q=0.0), _federation(equal, "fedavg")
    a.run(), b.run()
    _assert_params(a.run_params(0), b.run_params(0), tol=1e-12)
    uneven = _fed()
    a, b = _federation(uneven, q=0.0, rounds=1), _federation(uneven, "fedavg", rounds=1)
    a.run(), b.run()  # FedAvg weights clients by size, q-FedAvg with q = 0 equally
    assert (a.run_params(0)["fc1.weight"] - b.run_params(0)["fc1.weight"]).abs().max() > 1e-8


def test_negative_q_is_rejected():
    with pytest.raises(ValueError, match=r"q.*>= 0"):
        _federation(_fed(), q=-1.0, rounds=1).run()
