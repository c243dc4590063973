"""The batched engine against the per-client reference loop, torch.optim and slow per-client loops."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fltutor import engine
from fltutor.engine import (Batches, adam_update, batch_schedule, client_accuracy, client_generator, get_params,
                            make_batches, resolve_device, row_losses, sgd_update, stack_params, train,
                            train_client, unstack_params)
from fltutor.models import make_model



SIZES = [27, 50, 13, 44]  # different numbers of steps and short last batches


def _data(n=200, shape=(1, 28, 28), seed=0, classes=10):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, *shape, generator=g), torch.randint(0, classes, (n,), generator=g)


def _parts(sizes=SIZES):
    offsets = torch.tensor([0] + list(sizes)).cumsum(0)
    return [torch.arange(int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:])]


def _gens(seed, rows, round_=1):
    return [client_generator(seed, round_, c) for c in range(rows)]


class Gated(nn.Module):
    """A small MLP whose hidden units are scaled by an optional extra input (a stand-in for WAFFLe's b)."""

    def __init__(self, d=12, hidden=8, k=5):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, k)

    def forward(self, x, gate=None):
        h = torch.tanh(self.fc1(x))                                 # (B, hidden)
        if gate is not None:
            h = h * (gate["h"] if isinstance(gate, dict) else gate)
        return self.fc2(h)


def _gated(seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return Gated().to(dtype)


# ---- ported from the old tests of fltutor.client ------------------------------------------------
# float64: batched and per-client kernels round differently (~1e-8 in float32), and on noise
# inputs a max-pool tie can turn that into 1e-4 after a few steps even for the reference loop
# run twice from starts 3e-8 apart. In float64 rounding is ~1e-16 and the check can be tight.
@pytest.mark.parametrize("model_name,momentum,prox_mu,wd,dtype", [
    ("mlp", 0.0, 0.0, 0.0, torch.float32),
    ("mlp", 0.9, 0.0, 0.0, torch.float64),       # momentum buffers must freeze while a small client waits
    ("lenet5", 0.9, 0.5, 1e-3, torch.float64),   # convolutions, FedProx term and weight decay together
])
def test_engine_equals_reference_loop_with_unequal_clients(model_name, momentum, prox_mu, wd, dtype):
    x, y = _data()
    x = x.to(dtype)
    model = make_model(model_name, seed=0).to(dtype)
    start = get_params(model)
    idx = _parts()
    kw = dict(lr=0.05, momentum=momentum, prox_mu=prox_mu, weight_decay=wd)
    ref = [train_client(model, start, x[i], y[i], local_epochs=2, batch_size=10, generator=client_generator(3, 1, c),
                        **kw) for c, i in enumerate(idx)]
    batches = make_batches(idx, 2, 10, _gens(3, 4), dtype=dtype)
    out, private, losses = train(model, stack_params(start, 4), x, y, batches, **kw)
    assert private == {}
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    for c in range(4):
        for k in start:
            torch.testing.assert_close(out[k][c], ref[c][0][k], rtol=tol, atol=tol)
        assert losses[c].item() == pytest.approx(ref[c][1], rel=1e-4)
    # and the clients really moved, by different amounts
    moved = [float((out["fc1.weight"][c] - start["fc1.weight"]).norm()) for c in range(4)]
    assert min(moved) > 0 and len(set(round(m, 6) for m in moved)) == 4


def test_batch_schedule_is_a_permutation_per_epoch():
    sched = batch_schedule(23, 3, 5, torch.Generator().manual_seed(0))
    assert [len(b) for b in sched] == [5, 5, 5, 5, 3] * 3
    for e in range(3):
        assert sorted(torch.cat(sched[5 * e:5 * e + 5]).tolist()) == list(range(23))
    assert not torch.equal(torch.cat(sched[:5]), torch.cat(sched[5:10]))  # a fresh permutation each epoch


def test_bad_hyperparameters():
    x, y = _data(20)
    model = make_model("logreg", seed=0)
    with pytest.raises(ValueError, match="lr: 0(.0)? must be > 0"):
        train_client(model, get_params(model), x, y, local_epochs=1, batch_size=4, lr=0.0,
                     generator=torch.Generator())
    with pytest.raises(ValueError, match="one per row"):
        make_batches([torch.arange(5), torch.arange(5, 9)], 1, 4, [torch.Generator()])
    with pytest.raises(ValueError, match="no training samples"):
        make_batches([torch.arange(5), torch.arange(0)], 1, 4, _gens(0, 2))
    with pytest.raises(ValueError, match="no training samples"):
        batch_schedule(0, 1, 4, torch.Generator())
    batches = make_batches(_parts([5, 4]), 1, 4, _gens(0, 2))
    with pytest.raises(ValueError, match=r"expected \(2,\)"):
        train(model, stack_params(get_params(model), 2), x, y, batches, lr=torch.tensor([0.1, 0.1, 0.1]))
    with pytest.raises(ValueError, match="private_optimizer"):
        train(model, stack_params(get_params(model), 2), x, y, batches, lr=0.1,
              private={"q": torch.zeros(2, 3)}, private_optimizer="rmsprop")


# ---- make_batches ------------------------------------------------------------------------------
def test_make_batches_draws_batch_schedule_batches_and_pads():
    parts = [torch.arange(100, 123), torch.arange(7), torch.arange(50, 90)]  # 23, 7, 40 samples
    epochs, B = [2, 3, 1], 5
    batches = make_batches(parts, epochs, B, _gens(4, 3), dtype=torch.float64)
    ref_gens = _gens(4, 3)
    expected_steps = [2 * 5, 3 * 2, 1 * 8]
    assert batches.n_steps.tolist() == expected_steps
    assert batches.steps == max(expected_steps) == batches.idx.shape[1]
    assert batches.idx.shape == batches.weight.shape == (3, 10, B)
    for p, (part, e) in enumerate(zip(parts, epochs)):
        sched = batch_schedule(len(part), e, B, ref_gens[p])
        assert len(sched) == expected_steps[p]
        for s in range(batches.steps):
            if s < len(sched):
                n = len(sched[s])
                assert batches.active[p, s]
                assert batches.idx[p, s, :n].tolist() == part[sched[s]].tolist()
                assert torch.all(batches.idx[p, s, n:] == 0)                   # padding points at sample 0
                torch.testing.assert_close(batches.weight[p, s, :n], torch.full((n,), 1 / n, dtype=torch.float64))
                assert torch.all(batches.weight[p, s, n:] == 0)
            else:
                assert not batches.active[p, s]
                assert torch.all(batches.weight[p, s] == 0)
        # the same generator calls: both generators are in the same state afterwards
        g_engine = _gens(4, 3)[p]
        make_batches([part], e, B, [g_engine])
        assert torch.equal(torch.rand(4, generator=g_engine), torch.rand(4, generator=ref_gens[p]))
    # a row's weights sum to one per step it takes, so (ce * weight).sum is its mean batch loss
    torch.testing.assert_close(batches.weight.sum(-1), batches.active.to(torch.float64))


def test_make_batches_of_a_row_does_not_depend_on_the_other_rows():
    parts = _parts()
    alone = make_batches(parts[2:3], 2, 10, [client_generator(0, 5, 2)])
    together = make_batches(parts, 2, 10, [client_generator(0, 5, c) for c in range(4)])
    n = int(alone.n_steps[0])
    assert torch.equal(together.idx[2, :n], alone.idx[0, :n])
    assert int(together.n_steps[2]) == n and not together.active[2, n:].any()


# ---- train against the per-client reference loop ---------------------------------------------------
TRAIN_CASES = {
    "sgd": dict(),
    "momentum_wd": dict(momentum=0.9, weight_decay=1e-3),
    "prox": dict(prox_mu=0.5),
    "correction": dict(correction=True),
    "correction_momentum_prox": dict(correction=True, momentum=0.5, prox_mu=0.1),
    "per_row_lr": dict(lr=[0.01, 0.05, 0.1, 0.03]),
    "per_row_everything": dict(lr=[0.01, 0.05, 0.1, 0.03], momentum=[0.0, 0.9, 0.5, 0.0],
                               weight_decay=[0.0, 1e-3, 0.0, 1e-2], prox_mu=[0.0, 0.0, 1.0, 0.3]),
    "epochs_per_row": dict(local_epochs=[1, 3, 2, 2], momentum=0.9),
    "clip": dict(clip_norm=0.05),
    # row 0 unclipped, row 3's bound never binds; clipping comes before the proximal term and the correction
    "clip_per_row_correction_momentum_prox": dict(clip_norm=[0.0, 0.05, 0.3, 100.0], correction=True, momentum=0.5,
                                                  prox_mu=0.1),
}


@pytest.mark.parametrize("case", list(TRAIN_CASES))
def test_train_equals_per_client_reference_loop(case):
    spec = dict(TRAIN_CASES[case])
    x, y = _data()
    x = x.double()
    model = make_model("mlp", seed=1).double()
    start = get_params(model)
    idx, P = _parts(), len(SIZES)
    epochs = spec.pop("local_epochs", 2)
    epochs = epochs if isinstance(epochs, list) else [epochs] * P
    per_row = {k: spec.get(k, 0.0) for k in ("momentum", "weight_decay", "prox_mu", "clip_norm")}
    per_row["lr"] = spec.get("lr", 0.05)
    per_row = {k: v if isinstance(v, list) else [v] * P for k, v in per_row.items()}
    correction = None
    if spec.get("correction"):
        g = torch.Generator().manual_seed(9)
        correction = {k: 0.01 * torch.randn(P, *v.shape, generator=g, dtype=torch.float64) for k, v in start.items()}
    ref = [train_client(model, start, x[i], y[i], local_epochs=epochs[c], batch_size=10,
                        generator=client_generator(7, 2, c),
                        correction=None if correction is None else unstack_params(correction, c),
                        **{k: v[c] for k, v in per_row.items()}) for c, i in enumerate(idx)]
    batches = make_batches(idx, epochs, 10, _gens(7, P, round_=2), dtype=torch.float64)
    rate = {k: (torch.tensor(v, dtype=torch.float64) if isinstance(spec.get(k), list) else v[0])
            for k, v in per_row.items()}
    out, _, losses = train(model, stack_params(start, P), x, y, batches, correction=correction, **rate)
    for c in range(P):
        for k in start:
            torch.testing.assert_close(out[k][c], ref[c][0][k], rtol=1e-10, atol=1e-10)
        assert losses[c].item() == pytest.approx(ref[c][1], rel=1e-10)
    moved = [float((out["fc2.weight"][c] - start["fc2.weight"]).norm()) for c in range(P)]
    assert min(moved) > 1e-3 and len(set(round(m, 8) for m in moved)) == P


def test_clip_norm_binds_and_zero_leaves_gradients_alone():
    """clip_norm 0 is bit-for-bit no clipping; a small bound shortens every step (each step then moves the
    row by at most lr * clip_norm, so K steps by at most K lr clip_norm); a huge one changes nothing."""
    x, y = _data()
    model = make_model("mlp", seed=1)
    start = get_params(model)
    idx, P = _parts(), len(SIZES)
    batches = make_batches(idx, 1, 10, _gens(7, P), dtype=torch.float32)
    plain, _, _ = train(model, stack_params(start, P), x, y, batches, lr=0.05)
    off, _, _ = train(model, stack_params(start, P), x, y, batches, lr=0.05, clip_norm=0.0)
    loose, _, _ = train(model, stack_params(start, P), x, y, batches, lr=0.05, clip_norm=1e6)
    tight, _, _ = train(model, stack_params(start, P), x, y, batches, lr=0.05, clip_norm=0.01)
    for k in start:
        assert torch.equal(off[k], plain[k])
        torch.testing.assert_close(loose[k], plain[k], rtol=1e-6, atol=1e-6)
    dist = lambda out, c: float(torch.cat([(out[k][c] - start[k]).flatten() for k in start]).norm())  # noqa: E731
    for c in range(P):
        steps = int(batches.n_steps[c])
        assert dist(tight, c) <= steps * 0.05 * 0.01 * (1 + 1e-5)
        assert dist(tight, c) < dist(plain, c) / 5


def test_train_does_not_change_its_inputs():
    x, y = _data(100)
    model = make_model("logreg", seed=0)
    params = stack_params(get_params(model), 2)
    before = {k: v.clone() for k, v in params.items()}
    train(model, params, x, y, make_batches(_parts([30, 50]), 1, 10, _gens(0, 2)), lr=0.1, momentum=0.9)
    for k in params:
        assert torch.equal(params[k], before[k])


# ---- private parameters: SGD for the shared part, Adam for the private part -------------------------
def _holey(batches: Batches, row: int, holes) -> Batches:
    """The same schedule, with row ``row`` taking no step at ``holes`` (it resumes afterwards)."""
    active = batches.active.clone()
    active[row, list(holes)] = False
    return Batches(batches.idx, batches.weight, active, active.sum(1))


@pytest.mark.parametrize("private_optimizer", ["adam", "sgd"])
def test_private_parameters_follow_torch_optimizers_row_by_row(private_optimizer):
    x, y = _data(300, shape=(12,), seed=3, classes=5)
    x = x.double()
    model = _gated()
    start = get_params(model)
    sizes, P = [23, 41, 17], 3
    idx = _parts(sizes)
    g = torch.Generator().manual_seed(1)
    gate0 = 1 + 0.1 * torch.randn(P, 8, generator=g, dtype=torch.float64)              # (P, hidden)
    lr, plr, mom, wd = [0.05, 0.1, 0.02], [0.1, 0.05, 0.2], 0.9, 1e-3
    holes = {1: {2, 3, 6}}                                                              # row 1 pauses, then resumes
    batches = _holey(make_batches(idx, 2, 8, _gens(5, P), dtype=torch.float64), 1, holes[1])

    def extra(q, s):
        return 0.05 * (1 + 0.2 * s) * (q["gate"] ** 2).sum(-1)                         # (P,), changes with s

    def project(q):
        return {"gate": q["gate"].clamp(0.9, 1.1)}

    out, priv, losses = train(model, stack_params(start, P), x, y, batches, lr=torch.tensor(lr, dtype=torch.float64),
                              momentum=mom, weight_decay=wd, private={"gate": gate0},
                              private_lr=torch.tensor(plr, dtype=torch.float64), private_optimizer=private_optimizer,
                              inputs=lambda q, s: (q["gate"],), extra_loss=extra, project=project)
    for p in range(P):  # one row, by hand, with torch.optim
        net = copy.deepcopy(model)
        net.load_state_dict(start, strict=False)
        gate = gate0[p].clone().requires_grad_(True)
        opt = torch.optim.SGD(net.parameters(), lr=lr[p], momentum=mom, weight_decay=wd)
        opt_q = (torch.optim.Adam if private_optimizer == "adam" else torch.optim.SGD)([gate], lr=plr[p])
        seen = []
        for s, pos in enumerate(batch_schedule(sizes[p], 2, 8, client_generator(5, 1, p))):
            if s in holes.get(p, ()):
                continue
            pos = idx[p][pos]
            loss = F.cross_entropy(net(x[pos], gate), y[pos])
            seen.append(loss.item())
            opt.zero_grad(), opt_q.zero_grad()
            (loss + extra({"gate": gate}, s)).backward()
            opt.step(), opt_q.step()
            with torch.no_grad():
                gate.clamp_(0.9, 1.1)
        for k, v in net.named_parameters():
            torch.testing.assert_close(out[k][p], v.detach(), rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(priv["gate"][p], gate.detach(), rtol=1e-10, atol=1e-10)
        assert losses[p].item() == pytest.approx(sum(seen) / len(seen), rel=1e-10)
    assert int(batches.n_steps[1]) == 2 * 6 - 3
    assert not torch.allclose(priv["gate"], gate0)   # the private part did move
    assert bool(((priv["gate"] == 1.1) | (priv["gate"] == 0.9)).any())  # and the projection was used


def test_local_steps_keeps_rows_that_take_no_step():
    """A step that adds 1 to every row: each row ends with its own number of steps."""
    x, y = torch.arange(40.0).view(40, 1), torch.zeros(40, dtype=torch.long)
    batches = make_batches(_parts([9, 25, 3]), 1, 4, _gens(0, 3))
    seen_rows = []

    def step(st, xb, yb, w, s, on=None):
        seen_rows.append(xb[:, 0, 0].clone())
        new = {"n": {"count": st["n"]["count"] + 1}}
        if on is not None:
            new = {"n": {"count": torch.where(on, new["n"]["count"], st["n"]["count"])}}
        return new, (xb[..., 0] * w).sum(1)                                            # (P,) mean x of the batch

    state, mean = engine.local_steps({"n": {"count": torch.zeros(3)}}, x, y, batches, step)
    assert state["n"]["count"].tolist() == [3.0, 7.0, 1.0]
    assert batches.n_steps.tolist() == [3, 7, 1]
    # each row's loss is the mean over its own steps of its batch's mean x (short last batches included)
    parts = _parts([9, 25, 3])
    expected = []
    for c, part in enumerate(parts):
        sched = batch_schedule(len(part), 1, 4, client_generator(0, 1, c))
        expected.append(sum(float(x[part[pos], 0].mean()) for pos in sched) / len(sched))
    assert mean.tolist() == pytest.approx(expected, rel=1e-6)
    assert expected[2] == pytest.approx(35.0)
    assert torch.equal(seen_rows[0], x[batches.idx[:, 0, 0], 0])


# ---- the step rules against torch.optim --------------------------------------------------------------
def test_sgd_update_matches_torch_optim_per_row():
    torch.manual_seed(0)
    lr, mom, wd = [0.1, 0.05, 0.2], [0.9, 0.0, 0.5], [0.01, 0.0, 0.1]
    start = torch.randn(3, 4, 5, dtype=torch.float64)
    refs = [start[c].clone().requires_grad_(True) for c in range(3)]
    opts = [torch.optim.SGD([r], lr=lr[c], momentum=mom[c], weight_decay=wd[c]) for c, r in enumerate(refs)]
    p, buf = start.clone(), torch.zeros_like(start)
    t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    for _ in range(4):
        g = torch.randn(3, 4, 5, dtype=torch.float64)
        for c in range(3):
            refs[c].grad = g[c].clone()
            opts[c].step()
        p, buf = sgd_update(p, g, buf, t(lr), t(mom), t(wd))
    for c in range(3):
        torch.testing.assert_close(p[c], refs[c].detach(), rtol=1e-12, atol=1e-12)
    # without momentum or weight decay: plain p - lr g, and no buffer
    q, none = sgd_update(start, g, None, t(lr), None, None)
    assert none is None
    torch.testing.assert_close(q, start - t(lr).view(3, 1, 1) * g)


def test_adam_update_matches_torch_optim_per_row():
    """Three rows stacked; row 1 skips steps 2 and 3. Each must follow its own torch Adam."""
    torch.manual_seed(0)
    lr = [0.05, 0.01, 0.2]
    start = torch.randn(3, 4, dtype=torch.float64)
    refs = [start[c].clone().requires_grad_(True) for c in range(3)]
    opts = [torch.optim.Adam([r], lr=lr[c]) for c, r in enumerate(refs)]
    p, m, v, t = start.clone(), torch.zeros(3, 4, dtype=torch.float64), torch.zeros(3, 4, dtype=torch.float64), \
        torch.zeros(3)
    for s in range(6):
        g = torch.randn(3, 4, dtype=torch.float64)
        active = torch.tensor([True, s not in (2, 3), True])
        for c in range(3):
            if active[c]:
                refs[c].grad = g[c].clone()
                opts[c].step()
        t_new = t + active.float()
        p_new, m_new, v_new = adam_update(p, g, m, v, t_new, torch.tensor(lr, dtype=torch.float64))
        keep = active.view(3, 1)
        p, m, v, t = torch.where(keep, p_new, p), torch.where(keep, m_new, m), torch.where(keep, v_new, v), t_new
    torch.testing.assert_close(t, torch.tensor([6.0, 4.0, 6.0]))
    for c in range(3):
        torch.testing.assert_close(p[c], refs[c].detach(), rtol=1e-12, atol=1e-12)


# ---- evaluation against a slow per-client loop --------------------------------------------------------
def _eval_setup():
    x, y = _data(200, shape=(12,), seed=5, classes=5)
    x = x.double()
    model = _gated()
    sizes = [7, 30, 1, 55, 12]
    g = torch.Generator().manual_seed(2)
    parts = [torch.randperm(200, generator=g)[:n] for n in sizes]      # overlapping, unequal, unsorted
    N = len(sizes)
    per_client = {k: v + 0.3 * torch.randn(N, *v.shape, generator=g, dtype=torch.float64)
                  for k, v in get_params(model).items()}
    gates = {"h": torch.rand(N, 8, generator=g, dtype=torch.float64) * 2}
    return model, x, y, parts, per_client, gates


@pytest.mark.parametrize("per_client", [False, True])
@pytest.mark.parametrize("with_inputs", [False, True])
@pytest.mark.parametrize("chunk_samples", [40, 20000])
def test_client_accuracy_and_row_losses_equal_a_slow_loop(per_client, with_inputs, chunk_samples):
    model, x, y, parts, stacked, gates = _eval_setup()
    params = stacked if per_client else get_params(model)
    inputs = (gates,) if with_inputs else ()
    acc = client_accuracy(model, params, x, y, parts, *inputs, per_client=per_client, chunk_samples=chunk_samples)
    slow_acc, slow_loss = [], []
    for k, part in enumerate(parts):
        pk = unstack_params(stacked, k) if per_client else params
        extra = ({"h": gates["h"][k]},) if with_inputs else ()
        out = functional_call(model, pk, (x[part], *extra))
        slow_acc.append(100.0 * (out.argmax(1) == y[part]).double().mean().item())
        slow_loss.append(F.cross_entropy(out, y[part]).item())
    assert acc.dtype == torch.float64 and acc.shape == (len(parts),)
    assert acc.tolist() == pytest.approx(slow_acc, abs=1e-9)
    assert len(set(slow_acc)) > 2  # the clients' accuracies differ: the check can tell rows apart
    if per_client:
        losses = row_losses(model, params, x, y, parts, *inputs, chunk_samples=chunk_samples)
        assert losses.tolist() == pytest.approx(slow_loss, rel=1e-10)


def test_eval_chunk_is_small_on_a_cpu_only_for_models_that_score_samples_independently():
    lenet, bn, gn = (make_model(n, seed=0) for n in ("lenet5", "resnet18_bn", "resnet18_gn"))
    assert engine.eval_chunk(lenet, "cpu") == 512 and engine.eval_chunk(gn, torch.device("cpu")) == 512
    assert engine.eval_chunk(bn, "cpu") == 20000                 # batch statistics: the whole split in one pass
    assert engine.eval_chunk(lenet, torch.device("cuda")) == 20000


def test_chunked_accuracy_equals_one_forward_pass_of_every_sample():
    # 1,300 samples: the CPU's default 512 takes three passes, the last one short
    g = torch.Generator().manual_seed(5)
    model = make_model("lenet5", seed=1)
    x, y = torch.randn(1300, 1, 28, 28, generator=g), torch.randint(0, 10, (1300,), generator=g)
    parts = [torch.arange(0, 700), torch.arange(700, 1300)]
    with torch.no_grad():
        hits = (model(x).argmax(1) == y).double()
    ref = [100 * hits[p].mean().item() for p in parts]
    params = get_params(model)
    for per_client, ps in ((False, params), (True, {k: torch.stack([v, v]) for k, v in params.items()})):
        got = client_accuracy(model, ps, x, y, parts, per_client=per_client)
        assert got.tolist() == pytest.approx(ref, abs=1e-9)


def test_forward_and_row_loss_equal_per_row_calls():
    model, x, y, parts, stacked, gates = _eval_setup()
    xb = torch.stack([x[p[:1]] for p in parts])                               # (P, 1, 12)
    yb = torch.stack([y[p[:1]] for p in parts])                               # (P, 1)
    logits = engine.forward(model, stacked, xb, gates)                        # (P, 1, K)
    for k in range(len(parts)):
        ref = functional_call(model, unstack_params(stacked, k), (xb[k], {"h": gates["h"][k]}))
        torch.testing.assert_close(logits[k], ref)
    w = torch.ones(len(parts), 1, dtype=torch.float64)
    torch.testing.assert_close(engine.row_loss(logits, yb, w),
                               F.cross_entropy(logits[:, 0], yb[:, 0], reduction="none"))


def test_stack_and_unstack_params_round_trip():
    params = get_params(make_model("logreg", seed=0))
    stacked = stack_params(params, 3)
    assert stacked["fc.weight"].shape == (3, 10, 784)
    stacked["fc.weight"][1] += 1.0
    assert torch.equal(unstack_params(stacked, 0)["fc.weight"], params["fc.weight"])  # copies, not views
    assert torch.equal(unstack_params(stacked, 1)["fc.weight"], params["fc.weight"] + 1.0)


# ---- devices ----------------------------------------------------------------------------------------
def test_resolve_device_cpu_and_auto(monkeypatch):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    mps = getattr(torch.backends, "mps", None)
    has_mps = mps is not None and mps.is_available()
    expected = "cuda" if torch.cuda.is_available() else ("mps" if has_mps else "cpu")
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    if mps is not None:
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    if mps is not None:
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
        assert resolve_device("auto") == torch.device("mps")


def test_resolve_device_rejects_bad_settings(monkeypatch):
    with pytest.raises(ValueError, match="device: 'gpu0' is not a device"):
        resolve_device("gpu0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device: 'cuda'.*no CUDA GPU"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="device: 'cuda:0'"):
        resolve_device("cuda:0")


def test_mean_gradient_is_each_clients_mean_minibatch_gradient_at_fixed_params():
    """SCAFFOLD's option I (and weighted WAFFLE's control="I"): every row's mini-batch gradients at the server
    model, averaged over the steps that row takes. Written out with autograd, one client and one batch at a time,
    on unequal clients with short last batches and two epochs, so a wrong step count or a padded step would show."""
    torch.manual_seed(0)
    model = make_model("mlp", seed=0).double()
    x, y = torch.randn(60, 1, 28, 28, dtype=torch.float64), torch.randint(0, 10, (60,))
    w = {k: v.detach() for k, v in get_params(model).items()}
    idx = [torch.arange(0, 7), torch.arange(7, 20), torch.arange(20, 60)]          # 7, 13, 40 samples; batch 4
    gens = lambda: [client_generator(3, 1, k) for k in range(3)]                    # noqa: E731
    batches = make_batches(idx, 2, 4, gens(), dtype=torch.float64)
    got = engine.mean_gradient(model, engine.stack_params(w, 3), x, y, batches)
    for row, (i, g) in enumerate(zip(idx, gens())):
        steps = batch_schedule(len(i), 2, 4, g)
        assert len(steps) == 2 * -(-len(i) // 4)
        want = {k: torch.zeros_like(v) for k, v in w.items()}
        for pos in steps:
            wp = {k: v.clone().requires_grad_(True) for k, v in w.items()}           # the same point every step
            loss = F.cross_entropy(functional_call(model, wp, (x[i[pos]],)), y[i[pos]])
            for k, gk in zip(wp, torch.autograd.grad(loss, list(wp.values()))):
                want[k] += gk / len(steps)
        for k in w:
            torch.testing.assert_close(got[k][row], want[k], rtol=0, atol=1e-12)


def test_fedprox_and_scaffold_terms_are_the_gradients_of_their_losses():
    """FedProx adds (mu/2)||w - w_start||^2 to the loss and SCAFFOLD the linear term <c - c_i, w> (whose gradient is
    the constant correction). Written as losses and differentiated by autograd, stepped by torch.optim.SGD with
    momentum and weight decay, per client: the engine, which adds both terms to the gradient by hand, must agree."""
    torch.manual_seed(1)
    model = make_model("mlp", seed=0).double()
    x, y = torch.randn(40, 1, 28, 28, dtype=torch.float64), torch.randint(0, 10, (40,))
    w0 = {k: v.detach() for k, v in get_params(model).items()}
    corr = {k: 0.05 * torch.randn(2, *v.shape, dtype=torch.float64) for k, v in w0.items()}   # (P, ...) per row
    idx, mu, lr, mom, wd = [torch.arange(0, 17), torch.arange(17, 40)], 0.3, 0.05, 0.9, 1e-3
    gens = lambda: [client_generator(0, 2, k) for k in range(2)]                               # noqa: E731
    batches = make_batches(idx, 2, 5, gens(), dtype=torch.float64)
    got, _, _ = train(model, stack_params(w0, 2), x, y, batches, lr=lr, momentum=mom, weight_decay=wd, prox_mu=mu,
                      correction=corr)
    for row, (i, g) in enumerate(zip(idx, gens())):
        net = copy.deepcopy(model)
        net.load_state_dict(w0, strict=False)
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=mom, weight_decay=wd)
        for pos in batch_schedule(len(i), 2, 5, g):
            params = dict(net.named_parameters())
            loss = (F.cross_entropy(net(x[i[pos]]), y[i[pos]])
                    + mu / 2 * sum(((params[k] - w0[k]) ** 2).sum() for k in w0)
                    + sum((corr[k][row] * params[k]).sum() for k in w0))
            opt.zero_grad()
            loss.backward()
            opt.step()
        for k, v in net.named_parameters():
            torch.testing.assert_close(got[k][row], v.detach(), rtol=0, atol=1e-10)
