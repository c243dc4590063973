"""FedAvg and FedProx in the Federation against a hand-written round loop of ``train_client`` calls."""
import numpy as np
import pytest
import torch

from fltutor import partition
from fltutor.data import make_federated, standin
from fltutor.engine import client_generator, get_params, train_client
from fltutor.federation import Federation
from fltutor.models import make_model

SIZES = [23, 41, 12, 35, 50, 18, 29, 44]  # uneven clients: the sample weights matter, last batches are short
BASE = dict(rounds=3, client_fraction=0.5, local_epochs=2, batch_size=10, lr=0.05, seed=0)


def _fed(sizes=SIZES, seed=0):
    """Clients of the given sizes on stand-in MNIST (learnable: class prototypes plus noise)."""
    train = standin("mnist", sum(sizes), seed=seed)
    test = standin("mnist", 100, train=False, seed=seed)
    cuts = np.cumsum(sizes)[:-1]
    parts = np.split(np.random.default_rng(seed).permutation(sum(sizes)), cuts)
    return make_federated(train, parts, test_fraction=0.25, seed=seed, test_set=test)


def _federation(fed, method="fedavg", **kw):
    return Federation("mlp", fed, method, device="cpu", dtype=torch.float64, progress=False, **{**BASE, **kw})


def _cohort(seed, round0, num_clients, fraction):
    """The cohort drawn independently of the library: round(C N) clients without replacement, sorted."""
    m = max(1, int(round(fraction * num_clients)))
    return np.sort(np.random.default_rng([seed, round0]).choice(num_clients, size=m, replace=False))


def fedavg_reference(fed, *, rounds, client_fraction, local_epochs, batch_size, lr, seed, mu=0.0, momentum=0.0):
    """McMahan et al. 2017, Alg. 1 (with Li et al. 2020's proximal term): one train_client per sampled client,
    then the sample-weighted mean. Yields (cohort, global params, mean train loss) after every round."""
    model = make_model("mlp", seed=seed).double()
    x, y = fed.x.double(), fed.y
    w = get_params(model)
    for r in range(rounds):
        cohort = _cohort(seed, r, fed.num_clients, client_fraction)
        trained, sizes, losses = [], [], []
        for k in cohort:
            idx = torch.as_tensor(fed.train[k])
            p, loss = train_client(model, w, x[idx], y[idx], local_epochs=local_epochs, batch_size=batch_size,
                                   lr=lr, momentum=momentum, prox_mu=mu, generator=client_generator(seed, r, int(k)))
            trained.append(p), sizes.append(len(idx)), losses.append(loss)
        w = {k: sum(n * p[k] for n, p in zip(sizes, trained)) / sum(sizes) for k in w}
        yield cohort, w, float(np.mean(losses))


def _assert_params(got, want, tol=1e-10):
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=tol, atol=tol)


@pytest.mark.parametrize("method,kw", [
    ("fedavg", {}),
    ("fedavg", dict(momentum=0.9)),
    ("fedprox", {}),                       # the name presets mu = 1
    ("fedavg", dict(mu=0.3, momentum=0.5)),
])
def test_every_round_equals_the_per_client_loop(method, kw):
    fed = _fed()
    fl = _federation(fed, method, **kw)
    mu = kw.get("mu", 1.0 if method == "fedprox" else 0.0)
    ref = fedavg_reference(fed, mu=mu, **{**BASE, **{k: v for k, v in kw.items() if k != "mu"}})
    for r, (cohort, w, loss) in enumerate(ref):
        entry = fl.run_round()[0]
        assert entry["round"] == r + 1 and entry["clients"] == cohort.tolist()
        assert entry["train_loss"] == pytest.approx(loss, rel=1e-10)
        _assert_params(fl.run_params(0), w)
    assert fl.settings[0]["mu"] == mu


def test_the_proximal_term_changes_the_model():
    """So that the FedProx case above can fail: mu = 1 and mu = 0 give different models."""
    fed = _fed()
    a, b = _federation(fed, "fedavg", rounds=1), _federation(fed, "fedprox", rounds=1)
    a.run(), b.run()
    assert (a.run_params(0)["fc1.weight"] - b.run_params(0)["fc1.weight"]).abs().max() > 1e-6


def test_scores_are_the_global_models_accuracy_by_hand():
    fed = _fed()
    fl = _federation(fed, rounds=2)
    fl.run()
    model = make_model("mlp", seed=0).double()
    model.load_state_dict(fl.run_params(0), strict=False)
    with torch.no_grad():
        pred = model(fed.x.double()).argmax(1)
        want = [100.0 * (pred[t] == fed.y[t]).double().mean().item() for t in map(torch.as_tensor, fed.test)]
        glob = 100.0 * (model(fed.x_test.double()).argmax(1) == fed.y_test).double().mean().item()
    np.testing.assert_allclose(fl.local_accuracy(0), want, atol=1e-9)
    last = fl.history[-1]
    assert last["local_acc"] == pytest.approx(np.mean(want)) and last["global_acc"] == pytest.approx(glob)
    assert last["local_acc_per_client"] == pytest.approx(want, abs=1e-4)


def test_same_seed_same_numbers_other_seed_other_numbers():
    fed = _fed()
    runs = [_federation(fed, rounds=2, seed=s) for s in (0, 0, 1)]
    for f in runs:
        f.run()
    _assert_params(runs[0].run_params(0), runs[1].run_params(0), tol=0)
    assert runs[0].history == runs[1].history
    assert not torch.equal(runs[0].run_params(0)["fc1.weight"], runs[2].run_params(0)["fc1.weight"])


def test_a_sweep_run_equals_that_run_alone():
    fed = _fed()
    sweep = _federation(fed, "fedavg", rounds=2, runs=[dict(lr=0.05, mu=0.0), dict(lr=0.1, mu=0.5, seed=1)])
    sweep.run()
    for i, (lr, mu, seed) in enumerate([(0.05, 0.0, 0), (0.1, 0.5, 1)]):
        *_, (_, w, _) = fedavg_reference(fed, **{**BASE, "rounds": 2, "lr": lr, "seed": seed}, mu=mu)
        _assert_params(sweep.run_params(i), w)


def test_client_sampling_fraction():
    fl = _federation(_fed(), client_fraction=0.3)
    cohorts = [fl.sample_clients(0, r) for r in range(20)]
    assert all(len(c) == 2 and len(set(c.tolist())) == 2 for c in cohorts)  # round(0.3 * 8) = 2, no repeats
    assert all(0 <= k < 8 for c in cohorts for k in c)
    assert len({tuple(c) for c in cohorts}) > 5


def test_fedavg_beats_chance_on_learnable_standin():
    train, test = standin("mnist", 1200, seed=0), standin("mnist", 200, train=False, seed=0)
    groups = [((1, 3, 5, 7, 9), 8), ((0, 2, 4, 6, 8), 2)]
    fed = make_federated(train, partition.multimodal(train.y, groups, 2, seed=0), test_fraction=0.2, seed=0,
                         test_set=test, groups=partition.client_groups(groups))
    fl = Federation("mlp", fed, "fedavg", device="cpu", progress=False, rounds=6, client_fraction=0.5,
                    local_epochs=2, batch_size=10, lr=0.05, seed=0)
    fl.run()
    assert fl.history[-1]["global_acc"] > 30  # 10 classes: chance is 10%


@pytest.mark.parametrize("kw,match", [(dict(mu_typo=1.0), "unknown setting"), (dict(method="fedsgd"), "unknown")])
def test_bad_settings_are_rejected(kw, match):
    method = kw.pop("method", "fedavg")
    with pytest.raises(ValueError, match=match):
        _federation(_fed(), method, **kw)
