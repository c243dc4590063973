"""eval_train: the global model's accuracy on every client's training data (GMA Fig. 3a), against a plain loop;
eval_global=False: the test split left unscored, and nothing else changed."""
import numpy as np
import pytest
import torch
from torch.func import functional_call

from fltutor.data import make_federated, standin
from fltutor.federation import Federation


def _data():
    train, test = standin("mnist", 120, seed=1), standin("mnist", 40, train=False, seed=1)
    return make_federated(train, np.array_split(np.random.default_rng(0).permutation(120), 4), test_fraction=0.25,
                          seed=0, test_set=test), train


def test_train_accuracy_is_the_global_model_on_the_clients_training_samples():
    data, train = _data()
    fed = Federation("mlp", data, "fedavg", rounds=2, client_fraction=0.5, local_epochs=1, batch_size=8, lr=0.1,
                     eval_train=True, progress=False)
    fed.run()
    logged = fed.histories[0][-1]["train_acc"]
    idx = np.concatenate(data.train)                       # every client's training samples, by hand
    with torch.no_grad():
        logits = functional_call(fed.model, fed.run_params(0), (train.x[idx],))
    by_hand = 100.0 * float((logits.argmax(1) == train.y[idx]).float().mean())
    assert abs(logged - by_hand) < 1e-4


def test_train_accuracy_is_off_by_default():
    data, _ = _data()
    fed = Federation("mlp", data, "fedavg", rounds=1, client_fraction=0.5, local_epochs=1, batch_size=8, lr=0.1,
                     progress=False)
    fed.run()
    assert "train_acc" not in fed.histories[0][-1] and "global_acc" in fed.histories[0][-1]


def test_eval_global_off_leaves_the_test_split_unscored_and_changes_nothing_else(monkeypatch):
    data, _ = _data()
    kw = dict(rounds=3, client_fraction=0.5, local_epochs=1, batch_size=8, lr=0.1, progress=False)
    on = Federation("mlp", data, "fedavg", **kw)
    on.run()
    monkeypatch.setattr(Federation, "global_accuracy", lambda self, i=0: pytest.fail("the test split was scored"))
    off = Federation("mlp", data, "fedavg", eval_global=False, **kw)
    off.run()
    h_on, h_off = on.histories[0], off.histories[0]
    assert [h["global_acc"] for h in h_off] == [None] * 3 and all(h["global_acc"] is not None for h in h_on)
    assert [h["local_acc_per_client"] for h in h_off] == [h["local_acc_per_client"] for h in h_on]
    for k, v in on.run_params(0).items():
        assert torch.equal(v, off.run_params(0)[k])
    res = off.results()[0]
    assert res["best_global_acc"] is None and res["best_local_acc"] == on.results()[0]["best_local_acc"]


def test_eval_global_must_be_a_bool():
    data, _ = _data()
    with pytest.raises(ValueError, match="eval_global"):
        Federation("mlp", data, "fedavg", rounds=1, eval_global="no", progress=False)
