"""The threat model's plumbing: Federation.intercept reads exactly the messages a round sends,
without changing anything, and Method.intercept takes from them only what was sent."""
import numpy as np
import pytest
import torch

from fltutor import methods
from fltutor.federation import Federation

from methods.tiny import METHOD_SETTINGS, tiny_fed  # tests/ is on sys.path (pytest rootdir insertion)


def _fed(name, **kw):
    s = {"rounds": 3, "client_fraction": 0.5, "local_epochs": 1, "batch_size": 8, "lr": 0.05, "seed": 3,
         **METHOD_SETTINGS.get(name, {}), **kw}
    return Federation("mlp", tiny_fed(), name, device="cpu", dtype=torch.float64, progress=False, **s)


@pytest.mark.parametrize("name", methods.names())
def test_intercept_reads_the_message_the_round_sends_and_changes_nothing(name):
    fed = _fed(name)
    fed.run_round()                       # a second round starts from trained private state
    cohort = fed.sample_clients(0, fed.round)
    before = ({k: v.clone() for k, v in fed.global_params.items()}, {k: v.clone() for k, v in fed.private.items()},
              fed.round, fed.seen.clone())
    got = fed.intercept(cohort)
    again = fed.intercept(list(reversed(cohort.tolist())))   # another order, one client at a time below
    assert set(got) == set(int(k) for k in cohort)
    # nothing moved
    assert fed.round == before[2] and torch.equal(fed.seen, before[3])
    for k, v in before[0].items():
        assert torch.equal(fed.global_params[k], v)
    for k, v in before[1].items():
        assert torch.equal(fed.private[k], v)
    # the round itself sends the same messages (recorded where the loop hands them on)
    sent = {}
    real = fed._client_update

    def record(m0, job):
        out = real(m0, job)
        for j, k in enumerate(job.clients.tolist()):
            sent[k] = {n: v[j] for n, v in out[0].items()}
        return out

    fed._client_update = record
    fed.run_round()
    assert set(sent) == set(got)
    for k in got:
        assert set(sent[k]) == set(got[k])
        for n in got[k]:
            torch.testing.assert_close(got[k][n], sent[k][n], rtol=0, atol=1e-12)
            torch.testing.assert_close(again[k][n], sent[k][n], rtol=0, atol=1e-12)


def test_intercept_one_client_alone_equals_it_in_a_cohort():
    fed = _fed("fedavg")
    a = fed.intercept([1, 4, 6])
    b = fed.intercept(4)
    for n in b[4]:
        torch.testing.assert_close(a[4][n], b[4][n], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", methods.names())
def test_method_intercept_gives_model_parameters_only_and_what_was_sent(name):
    fed = _fed(name)
    msg = fed.intercept(2)[2]
    m = fed.methods[0]
    g = fed.run_params(0)
    got = m.intercept(msg, g)
    assert set(got) <= set(g)
    for k, v in got.items():
        assert v.shape == g[k].shape
        assert torch.equal(v, msg[k]), k          # the model the client sent, not the global one or a copy of it
    if name == "local":
        assert got == {} and msg == {}
    elif name == "fedper":
        head = m.head(g)
        assert head and set(got) == set(g) - set(head)
    else:
        assert set(got) == set(g)
    assert name == "local" or any(not torch.equal(v, g[k]) for k, v in got.items())   # it trained: not the global
    for attr in ("message_holds", "client_keeps", "server_holds"):
        text = getattr(m, attr)
        assert isinstance(text, str) and text


def test_intercept_checks_its_arguments():
    fed = _fed("fedavg")
    with pytest.raises(ValueError, match="clients"):
        fed.intercept(8)
    with pytest.raises(ValueError, match="clients"):
        fed.intercept([])
    with pytest.raises(ValueError, match="run"):
        fed.intercept(0, run=1)
    assert np.array_equal(sorted(fed.intercept(np.array([0, 3]))), [0, 3])
