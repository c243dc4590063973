"""The cohort engine against the per-client reference loop and torch.optim.SGD."""
import pytest
import torch

from fltutor.client import (adam_step, batch_schedule, client_generator, get_params, sgd_step, stack_params,
                            train_client, train_cohort)
from fltutor.models import make_model


def _data(n=400, shape=(1, 28, 28), seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)


# float64: batched and per-client kernels round differently (~1e-8 in float32), and on noise
# inputs a max-pool tie can turn that into 1e-4 after a few steps even for the reference loop
# run twice from starts 3e-8 apart. In float64 rounding is ~1e-16 and the check can be tight.
@pytest.mark.parametrize("model_name,momentum,prox_mu,wd,dtype", [
    ("mlp", 0.0, 0.0, 0.0, torch.float32),
    ("mlp", 0.9, 0.0, 0.0, torch.float64),       # momentum buffers must freeze while a small client waits
    ("lenet5", 0.9, 0.5, 1e-3, torch.float64),   # convolutions, FedProx term and weight decay together
])
def test_cohort_equals_reference_loop_with_unequal_clients(model_name, momentum, prox_mu, wd, dtype):
    x, y = _data()
    x = x.to(dtype)
    model = make_model(model_name, seed=0).to(dtype)
    start = get_params(model)
    sizes = [37, 80, 13, 64]  # different numbers of steps and short last batches
    offsets = torch.tensor([0] + sizes).cumsum(0)
    idx = [torch.arange(int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:])]
    kw = dict(local_epochs=2, batch_size=10, lr=0.05, momentum=momentum, prox_mu=prox_mu, weight_decay=wd)
    ref = [train_client(model, start, x[i], y[i], generator=client_generator(3, 1, c), **kw)
           for c, i in enumerate(idx)]
    out, losses = train_cohort(model, stack_params(start, 4), x, y, idx,
                               generators=[client_generator(3, 1, c) for c in range(4)], **kw)
    for c in range(4):
        for k in start:
            tol = 1e-5 if dtype == torch.float32 else 1e-10
            torch.testing.assert_close(out[k][c], ref[c][0][k], rtol=tol, atol=tol)
        assert losses[c].item() == pytest.approx(ref[c][1], rel=1e-4)
    # and the clients really moved, by different amounts
    moved = [float((out["fc1.weight"][c] - start["fc1.weight"]).norm()) for c in range(4)]
    assert min(moved) > 0 and len(set(round(m, 6) for m in moved)) == 4


def test_sgd_step_matches_torch_optim():
    torch.manual_seed(0)
    p_ref = torch.randn(3, 5, requires_grad=True)
    opt = torch.optim.SGD([p_ref], lr=0.1, momentum=0.9, weight_decay=0.01)
    p = p_ref.detach().clone()
    buf = torch.zeros_like(p)
    for _ in range(4):
        g = torch.randn(3, 5)
        p_ref.grad = g.clone()
        opt.step()
        sgd_step([p], [g], [buf], lr=0.1, momentum=0.9, weight_decay=0.01)
    torch.testing.assert_close(p, p_ref.detach())


def test_sgd_step_inactive_clients_do_not_move():
    p = torch.ones(3, 2)
    buf = torch.full((3, 2), 0.5)
    sgd_step([p], [torch.ones(3, 2)], [buf], lr=1.0, momentum=0.9, weight_decay=0.0,
             active=torch.tensor([True, False, True]))
    torch.testing.assert_close(p[1], torch.ones(2))
    torch.testing.assert_close(buf[1], torch.full((2,), 0.5))
    torch.testing.assert_close(p[0], torch.full((2,), 1 - (0.45 + 1)))


def test_adam_step_matches_torch_optim_per_client():
    """Three clients stacked; client 1 skips steps 2 and 3. Each must follow its own torch Adam."""
    torch.manual_seed(0)
    start = torch.randn(3, 4)
    refs = [start[c].clone().requires_grad_(True) for c in range(3)]
    opts = [torch.optim.Adam([r], lr=0.05) for r in refs]
    p, m, v, t = start.clone(), torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3)
    for s in range(5):
        g = torch.randn(3, 4)
        active = torch.tensor([True, s not in (2, 3), True])
        for c in range(3):
            if active[c]:
                refs[c].grad = g[c].clone()
                opts[c].step()
        adam_step([p], [g], [m], [v], t, lr=0.05, active=active)
    torch.testing.assert_close(t, torch.tensor([5.0, 3.0, 5.0]))
    for c in range(3):
        torch.testing.assert_close(p[c], refs[c].detach())


def test_batch_schedule_is_a_permutation_per_epoch():
    sched = batch_schedule(23, 3, 5, torch.Generator().manual_seed(0))
    assert [len(b) for b in sched] == [5, 5, 5, 5, 3] * 3
    for e in range(3):
        assert sorted(torch.cat(sched[5 * e:5 * e + 5]).tolist()) == list(range(23))


def test_bad_hyperparameters():
    x, y = _data(20)
    model = make_model("logreg", seed=0)
    with pytest.raises(ValueError, match="lr must be > 0"):
        train_client(model, get_params(model), x, y, local_epochs=1, batch_size=4, lr=0.0,
                     generator=torch.Generator())
    with pytest.raises(ValueError, match="one per client"):
        train_cohort(model, stack_params(get_params(model), 2), x, y, [torch.arange(5), torch.arange(5, 9)],
                     local_epochs=1, batch_size=4, lr=0.1, generators=[torch.Generator()])
