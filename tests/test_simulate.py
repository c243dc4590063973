"""The round loop: engines agree, runs are reproducible, resume equals an uninterrupted run."""
import json

import numpy as np
import pytest
import torch

from fltutor import partition
from fltutor.data import standin
from fltutor.simulate import FedConfig, Simulation, make_federated


def _fed(seed=0, n=600):
    train = standin("mnist", n, seed=seed)
    test = standin("mnist", 200, train=False, seed=seed)
    groups = [((1, 3, 5, 7, 9), 8), ((0, 2, 4, 6, 8), 2)]
    parts = partition.multimodal(train.y, groups, 2, seed=seed)
    return make_federated(train, parts, test_fraction=0.2, seed=seed, test_set=test,
                          groups=partition.client_groups(groups), group_names=("majority", "minority"))


def _cfg(**kw):
    base = dict(method="fedavg", rounds=4, client_fraction=0.3, local_epochs=2, batch_size=10, lr=0.05, seed=0)
    return FedConfig(**{**base, **kw})


def _final(sim):
    return torch.cat([v.flatten() for v in sim.global_params.values()])


@pytest.mark.parametrize("method", ["fedavg", "fedprox", "qffl", "local"])
def test_cohort_engine_equals_loop_engine(method):
    fed = _fed()
    a = Simulation("mlp", fed, _cfg(method=method, engine="cohort"), progress=False)
    b = Simulation("mlp", fed, _cfg(method=method, engine="loop"), progress=False)
    a.run(), b.run()
    np.testing.assert_allclose(a.history[-1]["local_acc_per_client"], b.history[-1]["local_acc_per_client"], atol=1e-6)
    torch.testing.assert_close(_final(a), _final(b), rtol=1e-4, atol=1e-5)


def test_same_seed_same_numbers_other_seed_other_numbers():
    fed = _fed()
    runs = [Simulation("mlp", fed, _cfg(seed=s), progress=False) for s in (0, 0, 1)]
    for r in runs:
        r.run()
    assert torch.equal(_final(runs[0]), _final(runs[1]))
    assert runs[0].history == runs[1].history
    assert not torch.equal(_final(runs[0]), _final(runs[2]))


@pytest.mark.parametrize("method", ["fedavg", "local"])
def test_resume_equals_uninterrupted(tmp_path, method):
    fed = _fed()
    full = Simulation("mlp", fed, _cfg(method=method), progress=False)
    full.run()
    first = Simulation("mlp", fed, _cfg(method=method), out_dir=tmp_path, checkpoint_every=1, progress=False)
    first.run(rounds=2)  # "interrupted" after two rounds
    resumed = Simulation("mlp", fed, _cfg(method=method), out_dir=tmp_path, progress=False)
    assert resumed.round == 2
    resumed.run()
    assert torch.equal(_final(full), _final(resumed))
    assert full.history == resumed.history
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["rounds_done"] == 4 and len(saved["history"]) == 4


def test_resume_accepts_a_checkpoint_made_before_new_config_fields(tmp_path):
    fed = _fed()
    Simulation("mlp", fed, _cfg(), out_dir=tmp_path, checkpoint_every=1, progress=False).run(rounds=1)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    del state["config"]["pfedme_lambda"], state["config"]["alpha_ratio"]  # as written by an older fltutor
    torch.save(state, tmp_path / "checkpoint.pt")
    assert Simulation("mlp", fed, _cfg(), out_dir=tmp_path, progress=False).round == 1


def test_resume_refuses_a_different_run(tmp_path):
    fed = _fed()
    Simulation("mlp", fed, _cfg(), out_dir=tmp_path, progress=False).run(rounds=1)
    with pytest.raises(ValueError, match="lr: 0.05 there vs 0.1 here"):
        Simulation("mlp", fed, _cfg(lr=0.1), out_dir=tmp_path, progress=False)


def test_local_only_keeps_personal_models_and_fedavg_learns():
    fed = _fed()
    loc = Simulation("mlp", fed, _cfg(method="local", rounds=3), progress=False)
    loc.run()
    trained = set(c for h in loc.history for c in h["clients"])
    untouched = [k for k in range(fed.num_clients) if k not in trained]
    w = loc.client_params["fc1.weight"]
    for k in untouched:  # a client never sampled still holds the initial model
        assert torch.equal(w[k], loc.global_params["fc1.weight"])
    for k in trained:
        assert not torch.equal(w[k], loc.global_params["fc1.weight"])
    assert loc.history[-1]["global_acc"] is None


def test_fedavg_beats_chance_on_learnable_standin():
    sim = Simulation("mlp", _fed(n=1200), _cfg(rounds=6, client_fraction=0.5), progress=False)
    sim.run()
    assert sim.history[-1]["global_acc"] > 30  # 10 classes: chance is 10%


def test_client_sampling_fraction():
    sim = Simulation("mlp", _fed(), _cfg(client_fraction=0.3), progress=False)
    cohorts = [sim.sample_clients(r) for r in range(20)]
    assert all(len(c) == 3 and len(set(c)) == 3 for c in cohorts)  # round(0.3 * 10) = 3, no repeats
    assert len({tuple(c) for c in cohorts}) > 5


@pytest.mark.parametrize("kw,match", [
    (dict(method="fedsgd"), "unknown"),
    (dict(client_fraction=0.0), "client_fraction"),
    (dict(rounds=0), "rounds must be"),
    (dict(lr=-1.0), "lr must be > 0"),
])
def test_bad_config(kw, match):
    with pytest.raises(ValueError, match=match):
        _cfg(**kw)


def test_cifar10_path_on_standin_tensors():
    # CIFAR-10 cannot be downloaded here: run its model and multimodal preset on same-shape stand-ins
    train, test = standin("cifar10", 400, seed=0), standin("cifar10", 100, train=False, seed=0)
    groups = [(c, max(1, n // 18)) for c, n in partition.MULTIMODAL_PRESETS["cifar10"]]  # 5 + 1 clients
    parts = partition.multimodal(train.y, groups, 2, seed=0)
    fed = make_federated(train, parts, test_fraction=0.2, seed=0, test_set=test, groups=partition.client_groups(groups))
    sims = [Simulation("cnn_cifar", fed, _cfg(rounds=1, client_fraction=0.5, engine=e), progress=False) for e in ("cohort", "loop")]
    for s in sims:
        s.run()
    assert len(sims[0].history[-1]["local_acc_per_client"]) == 6
    torch.testing.assert_close(_final(sims[0]), _final(sims[1]), rtol=1e-4, atol=1e-4)
