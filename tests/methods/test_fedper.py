"""FedPer (Arivazhagan et al. 2019) against a per-client loop: the base is averaged, each head stays home."""
import copy

import numpy as np
import pytest
import torch
from torch import nn

from fltutor.engine import client_generator, get_params, train_client
from fltutor.federation import Federation
from fltutor.methods.fedper import FedPerParams
from fltutor.models import make_model

from tiny import tiny_fed as _fed, cohort as _cohort

BASE = dict(rounds=3, client_fraction=0.5, local_epochs=2, batch_size=10, lr=0.05, seed=0)


class ThreeLayers(nn.Module):
    """A small 784-16-12-10 perceptron: three layers, so two can be personal."""

    def __init__(self):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            self.fc1, self.fc2, self.fc3 = nn.Linear(784, 16), nn.Linear(16, 12), nn.Linear(12, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x.flatten(1))))))


def _federation(fed, model="mlp", **kw):
    return Federation(model, fed, "fedper", device="cpu", dtype=torch.float64, progress=False, **{**BASE, **kw})


def fedper_reference(fed, net, head, *, rounds, client_fraction, local_epochs, batch_size, lr, seed):
    """A client trains (global base, its own head); the server averages the bases by sample count.
    Yields (global params, every client's head) after every round."""
    model = copy.deepcopy(net).double()
    x, y = fed.x.double(), fed.y
    g = get_params(model)
    heads = [{k: g[k].clone() for k in head} for _ in range(fed.num_clients)]
    for r in range(rounds):
        bases, sizes = [], []
        for k in _cohort(seed, r, fed.num_clients, client_fraction):
            idx = torch.as_tensor(fed.train[k])
            p, _ = train_client(model, {**g, **heads[k]}, x[idx], y[idx], local_epochs=local_epochs,
                                batch_size=batch_size, lr=lr, generator=client_generator(seed, r, int(k)))
            heads[k] = {h: p[h] for h in head}
            bases.append({b: v for b, v in p.items() if b not in head}), sizes.append(len(idx))
        g = {**g, **{b: sum(n * p[b] for n, p in zip(sizes, bases)) / sum(sizes) for b in bases[0]}}
        yield g, heads


@pytest.mark.parametrize("model,layers,head", [
    ("mlp", 1, ["fc2.weight", "fc2.bias"]),
    (ThreeLayers(), 2, ["fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]),
])
def test_every_round_equals_the_per_client_loop(model, layers, head):
    fed = _fed()
    fl = _federation(fed, model, personal_layers=layers)
    net = make_model("mlp", seed=0) if model == "mlp" else model
    init = get_params(copy.deepcopy(net).double())
    for g, heads in fedper_reference(fed, net, head, **BASE):
        fl.run_round()
        for k, v in g.items():
            torch.testing.assert_close(fl.run_params(0)[k], v, rtol=1e-10, atol=1e-10)
        em = fl.eval_model(0)
        assert em.per_client
        for c in range(fed.num_clients):  # a client scores with the global base and its own head
            for k in g:
                want = heads[c][k] if k in head else g[k]
                torch.testing.assert_close(em.params[k][c], want, rtol=1e-10, atol=1e-10)
    for k in head:  # the server never averages a head: its copy stays the initial one
        torch.testing.assert_close(fl.run_params(0)[k], init[k], rtol=0, atol=0)
    trained = {c for h in fl.history for c in h["clients"]}
    assert 0 < len(trained) < fed.num_clients
    em = fl.eval_model(0)
    for c in range(fed.num_clients):  # trained heads moved, the others did not
        moved = not torch.equal(em.params[head[0]][c], init[head[0]])
        assert moved == (c in trained)


def test_scores_use_base_and_own_head_and_there_is_no_global_model():
    fed = _fed()
    fl = _federation(fed)
    fl.run()
    *_, (g, heads) = fedper_reference(fed, make_model("mlp", seed=0), ["fc2.weight", "fc2.bias"], **BASE)
    net = make_model("mlp", seed=0).double()
    want = []
    for c, t in enumerate(fed.test):
        net.load_state_dict({**g, **heads[c]}, strict=False)
        with torch.no_grad():
            want.append(100.0 * (net(fed.x[t].double()).argmax(1) == fed.y[t]).double().mean().item())
    np.testing.assert_allclose(fl.local_accuracy(0), want, atol=1e-9)
    assert fl.history[-1]["global_acc"] is None


@pytest.mark.parametrize("layers", [0, -1, 1.5, True, "1"])
def test_personal_layers_must_be_a_positive_integer(layers):
    with pytest.raises(ValueError, match="personal_layers"):
        FedPerParams(personal_layers=layers)


@pytest.mark.parametrize("model,layers", [("mlp", 2), ("mlp", 5), (ThreeLayers(), 3)])
def test_keeping_every_layer_home_is_refused(model, layers):
    with pytest.raises(ValueError, match="personal_layers.*Local-only"):
        _federation(_fed(), model, personal_layers=layers)
