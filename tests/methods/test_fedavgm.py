"""FedAvgM against a hand-written server-momentum loop, and its special case FedAvg."""
import pytest
import torch

from fltutor import data, partition
from fltutor.engine import client_generator, train_client
from fltutor.federation import Federation
from fltutor.models import make_model

KW = dict(rounds=3, client_fraction=0.5, local_epochs=1, batch_size=16, lr=0.05, seed=1)


@pytest.fixture(scope="module")
def fed():
    tr = data.standin("mnist", 240, seed=0)
    te = data.standin("mnist", 60, train=False, seed=0)
    tr.x, te.x = tr.x.double(), te.x.double()
    parts = partition.dirichlet_quantity(240, 6, 5.0, seed=0)
    return data.make_federated(tr, parts, test_fraction=0.2, seed=0, test_set=te)


def test_fedavgm_equals_a_hand_written_server_momentum_loop(fed):
    beta, eta = 0.7, 0.8
    fl = Federation("logreg", fed, "fedavgm", device="cpu", dtype=torch.float64, progress=False,
                    server_momentum=beta, server_lr=eta, **KW)
    net = make_model("logreg", seed=KW["seed"]).double()
    w = {k: v.detach().clone() for k, v in net.named_parameters()}
    v = {k: torch.zeros_like(t) for k, t in w.items()}
    for r in range(KW["rounds"]):
        cohort = fl.sample_clients(0, r)
        outs, sizes = [], []
        for k in cohort:
            idx = torch.as_tensor(fed.train[k])
            p, _ = train_client(net, w, fed.x[idx], fed.y[idx], local_epochs=1, batch_size=16, lr=0.05,
                                generator=client_generator(KW["seed"], r, int(k)))
            outs.append(p)
            sizes.append(len(idx))
        n = torch.tensor(sizes, dtype=torch.float64)
        for key in w:  # v <- beta v + sum_k n_k/n (w_k - w); w <- w + eta v
            delta = sum(nk / n.sum() * (o[key] - w[key]) for nk, o in zip(n, outs))
            v[key] = beta * v[key] + delta
            w[key] = w[key] + eta * v[key]
        fl.run_round()
        for key in w:
            torch.testing.assert_close(fl.run_params(0)[key], w[key], rtol=0, atol=1e-12)


def test_fedavgm_without_momentum_is_fedavg(fed):
    a = Federation("logreg", fed, "fedavgm", device="cpu", dtype=torch.float64, progress=False,
                   server_momentum=0.0, **KW)
    b = Federation("logreg", fed, "fedavg", device="cpu", dtype=torch.float64, progress=False, **KW)
    a.run(), b.run()
    for k in b.global_params:
        torch.testing.assert_close(a.global_params[k], b.global_params[k], rtol=0, atol=1e-12)


@pytest.mark.parametrize("bad", [{"server_momentum": 1.0}, {"server_momentum": -0.1}, {"server_lr": 0.0}])
def test_bad_parameters_are_refused(fed, bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        Federation("logreg", fed, "fedavgm", device="cpu", progress=False, **KW, **bad)
