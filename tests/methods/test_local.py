"""Local-only training: each client's model is its own train_client loop over the rounds it was sampled."""
import numpy as np
import torch

from fltutor.engine import client_generator, get_params, train_client
from fltutor.checkpoint import CheckpointError, read_checkpoint
from fltutor.federation import Federation
from fltutor.models import make_model

from tiny import tiny_fed as _fed, cohort as _cohort

BASE = dict(rounds=3, client_fraction=0.25, local_epochs=2, batch_size=10, lr=0.05, seed=0)


def _federation(fed, **kw):
    return Federation("mlp", fed, "local", device="cpu", dtype=torch.float64, progress=False, **{**BASE, **kw})


def local_reference(fed, *, rounds, client_fraction, local_epochs, batch_size, lr, seed, momentum=0.0):
    """Every client keeps its own model; a sampled client trains it alone. Returns (models, trained clients)."""
    model = make_model("mlp", seed=seed).double()
    x, y = fed.x.double(), fed.y
    models = [get_params(model) for _ in range(fed.num_clients)]
    trained = set()
    for r in range(rounds):
        for k in _cohort(seed, r, fed.num_clients, client_fraction):
            idx = torch.as_tensor(fed.train[k])
            models[k], _ = train_client(model, models[k], x[idx], y[idx], local_epochs=local_epochs,
                                        batch_size=batch_size, lr=lr, momentum=momentum,
                                        generator=client_generator(seed, r, int(k)))
            trained.add(int(k))
    return models, trained


def test_each_client_model_is_its_own_training_loop():
    fed = _fed()
    fl = _federation(fed, momentum=0.9)
    init = {k: v.clone() for k, v in fl.run_params(0).items()}
    fl.run()
    models, trained = local_reference(fed, **BASE, momentum=0.9)
    sampled = [k for h in fl.history for k in h["clients"]]
    assert any(sampled.count(k) > 1 for k in sampled)  # some client trains twice: its model carries over
    assert 0 < len(trained) < fed.num_clients           # and some client never trains
    assert set(sampled) == trained
    em = fl.eval_model(0)
    assert em.per_client
    for k in range(fed.num_clients):
        for name in init:
            torch.testing.assert_close(em.params[name][k], models[k][name], rtol=1e-10, atol=1e-10)
    for name in init:  # nothing reaches the server
        assert torch.equal(fl.run_params(0)[name], init[name])
    for k in set(range(fed.num_clients)) - trained:  # a client never sampled still holds the initial model
        assert torch.equal(em.params["fc1.weight"][k], init["fc1.weight"])
    assert fl.seen[0].tolist() == [k in trained for k in range(fed.num_clients)]


def test_scores_are_each_clients_own_model_and_there_is_no_global_model():
    fed = _fed()
    fl = _federation(fed)
    fl.run()
    models, _ = local_reference(fed, **BASE)
    net = make_model("mlp", seed=0).double()
    want = []
    for k, t in enumerate(fed.test):
        net.load_state_dict(models[k], strict=False)
        with torch.no_grad():
            want.append(100.0 * (net(fed.x[t].double()).argmax(1) == fed.y[t]).double().mean().item())
    np.testing.assert_allclose(fl.local_accuracy(0), want, atol=1e-9)
    assert fl.history[-1]["global_acc"] is None and fl.global_accuracy(0) is None
    assert fl.results()[0]["best_global_acc"] is None


def test_resume_equals_uninterrupted(tmp_path):
    """The clients' models are private state (clients.pt): a resumed run continues from them."""
    fed = _fed()
    kw = dict(rounds=4)
    full = _federation(fed, **kw)
    full.run()
    _federation(fed, out_dir=tmp_path, checkpoint_every=1, **kw).run(rounds=2)
    assert read_checkpoint(tmp_path, parties=())["round"] == 2
    resumed = _federation(fed, out_dir=tmp_path, **kw)
    assert resumed.round == 2
    resumed.run()
    assert full.history == resumed.history
    a, b = full.eval_model(0).params, resumed.eval_model(0).params
    for k in a:
        assert torch.equal(a[k], b[k])
