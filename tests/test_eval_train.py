"""eval_train: the global model's accuracy on every client's training data (GMA Fig. 3a), against a plain loop."""
import numpy as np
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
