"""Weight-factorization WAFFLe (Hao et al., IEEE Access 2022) through ``Federation``: the batched
client update against a per-client loop with torch.optim, the first step against the ELBO
gradient of eq. 11 written by hand, the server never sees private state, seen/unseen
evaluation by hand, checkpoint/resume of private state, config errors and the L1 ablation."""
import copy

import pytest
import torch
import torch.nn.functional as F

from fltutor import ibp, layers, scenarios
from fltutor.data import standin
from fltutor.engine import batch_schedule, client_generator
from fltutor.checkpoint import CheckpointError, read_checkpoint
from fltutor.federation import Federation
from fltutor.methods.base import Round

DT = torch.float64
F_FACTORS = 6
PRIVATE_SUFFIXES = ("pi_logit", "log_c", "log_d", "score")


def _data(seed=0):
    """Ten clients (8 odd-digit, 2 even-digit) on stand-in MNIST, about 48 training samples each."""
    train = standin("mnist", 600, seed=seed)
    test = standin("mnist", 200, train=False, seed=seed)
    groups = [((1, 3, 5, 7, 9), 8), ((0, 2, 4, 6, 8), 2)]
    return scenarios.waffle_ibp_data("mnist", "multimodal", seed=seed, groups=groups, train_set=train, test_set=test)


def _fed(data, method="waffle_ibp", **kw):
    base = dict(rounds=2, client_fraction=0.3, local_epochs=1, batch_size=10, lr=0.05, seed=0, num_factors=F_FACTORS)
    return Federation("mlp", data, method, device="cpu", dtype=DT, progress=False, **{**base, **kw})


def _net(params=None):
    """An independent factorized MLP (F = 6), optionally loaded with ``params``."""
    net = layers.make_factorized_model("mlp", seed=0, num_factors=F_FACTORS).to(DT)
    if params is not None:
        net.load_state_dict(params, strict=False)
    return net


def _accuracy(net, x, y, parts, b_rows):
    """Accuracy (%) of client k with selection b_rows[k] on x[parts[k]], by a plain loop."""
    out = []
    for k, part in enumerate(parts):
        idx = torch.as_tensor(part)
        with torch.no_grad():
            pred = net(x[idx], {"fc1": b_rows[k]}).argmax(1)
        out.append(100.0 * (pred == y[idx]).double().mean().item())
    return out


# ---- the client update against a per-client loop ---------------------------------------------
def _reference_client(shared, private, x, y, idx, *, seed, round0, client, local_epochs, batch_size, lr,
                      selection, selection_optimizer, selection_lr, alpha_ratio, temperature, kl_weight, l1_weight):
    """Algorithm 2 for one client, the way a tutorial writes it: one module, torch.optim for both parts."""
    net = _net(shared)
    q = {k: v.clone().requires_grad_(True) for k, v in private.items()}               # (F,) each
    opt_w = torch.optim.SGD(net.parameters(), lr=lr)
    opt_q = (torch.optim.Adam if selection_optimizer == "adam" else torch.optim.SGD)(list(q.values()), lr=selection_lr)
    g = client_generator(seed, round0, client)
    sched = batch_schedule(len(idx), local_epochs, batch_size, g)      # the batch permutations first,
    u = torch.rand(len(sched), 2 * F_FACTORS, generator=g).to(DT)     # then uniforms for b and v per step
    alpha = alpha_ratio * F_FACTORS
    losses = []
    for s, pos in enumerate(sched):
        if selection == "ibp":
            b = ibp.relaxed_bernoulli_sample(q["fc1.pi_logit"], temperature, u[s, :F_FACTORS])
            reg = kl_weight * ibp.ibp_kl(q["fc1.pi_logit"], q["fc1.log_c"].exp(), q["fc1.log_d"].exp(), alpha,
                                         u[s, F_FACTORS:])
        else:
            b = q["fc1.score"]
            reg = l1_weight * q["fc1.score"].abs().sum()
        ce = F.cross_entropy(net(x[idx[pos]], {"fc1": b}), y[idx[pos]])
        losses.append(ce.item())
        opt_w.zero_grad()
        opt_q.zero_grad()
        (ce + reg / len(idx)).backward()                                 # the KL spread over one epoch's batches
        opt_w.step()
        opt_q.step()
        with torch.no_grad():
            for k in q:
                if k.endswith(("log_c", "log_d")):
                    q[k].clamp_(-6.0, 8.0)
    return ({k: v.detach() for k, v in net.named_parameters()}, {k: v.detach() for k, v in q.items()},
            sum(losses) / len(losses))


@pytest.mark.parametrize("method,opt,sel_lr", [("waffle_ibp", "sgd", None), ("waffle_ibp_l1", "sgd", None),
                                               ("waffle_ibp", "adam", 0.1)])
def test_rounds_equal_a_per_client_loop_with_torch_optim(method, opt, sel_lr):
    data = _data()
    kw = dict(local_epochs=2, lr=0.05, selection_optimizer=opt, selection_lr=sel_lr, l1_weight=0.5, kl_weight=0.7,
              alpha_ratio=0.8, temperature=2 / 3)
    fed = _fed(data, method, **kw)
    selection = fed.methods[0].params.selection
    x, y = data.x.to(DT), data.y
    glob = {k: v.clone() for k, v in fed.run_params(0).items()}
    private = {k: v[0].clone() for k, v in fed.private.items()}                      # (N, F)
    assert torch.equal(glob["fc1.w_a"], _net().fc1.w_a)                               # the model is the named one
    for r in range(2):
        cohort = fed.sample_clients(0, r)
        entry = fed.run_round()[0]
        assert entry["clients"] == cohort.tolist()
        outs, sizes, losses = [], [], []
        for k in cohort:
            idx = torch.as_tensor(data.train[k])
            shared, priv, loss = _reference_client(
                glob, {n: v[k] for n, v in private.items()}, x, y, idx, seed=0, round0=r, client=int(k),
                local_epochs=2, batch_size=10, lr=0.05, selection=selection, selection_optimizer=opt,
                selection_lr=0.05 if sel_lr is None else sel_lr, alpha_ratio=0.8, temperature=2 / 3,
                kl_weight=0.7, l1_weight=0.5)
            for n in priv:
                private[n][k] = priv[n]
            outs.append(shared), sizes.append(len(idx)), losses.append(loss)
        n_tot = sum(sizes)
        glob = {n: sum(s * o[n] for s, o in zip(sizes, outs)) / n_tot for n in glob}  # FedAvg of the shared part
        for n in private:
            torch.testing.assert_close(fed.private[n][0], private[n], rtol=0, atol=1e-10)
        for n in glob:
            torch.testing.assert_close(fed.run_params(0)[n], glob[n], rtol=0, atol=1e-10)
        assert entry["train_loss"] == pytest.approx(sum(losses) / len(losses), abs=1e-10)


@pytest.mark.parametrize("kl_weight", [1.0, 0.0])
def test_first_step_gradient_is_the_elbo_of_eq11(kl_weight):
    """One SGD step moves pi_logit by -lr * d(CE + w KL / |D_i|)/d pi_logit, computed here densely by hand."""
    data = _data()
    lr, tau, alpha = 0.05, 2 / 3, 0.8 * F_FACTORS
    fed = _fed(data, rounds=1, batch_size=1000, lr=lr, temperature=tau, kl_weight=kl_weight)   # one full batch
    before = {n: v[0].clone() for n, v in fed.private.items()}
    net = _net(fed.run_params(0))
    k = int(fed.sample_clients(0, 0)[0])
    fed.run_round()
    idx = torch.as_tensor(data.train[k])
    g = client_generator(0, 0, k)                                  # replay: the permutation, then the uniforms
    perm = torch.randperm(len(idx), generator=g)
    u = torch.rand(1, 2 * F_FACTORS, generator=g)[0].to(DT)
    logit = before["fc1.pi_logit"][k].clone().requires_grad_(True)
    c, d = before["fc1.log_c"][k].exp(), before["fc1.log_d"][k].exp()
    b = torch.sigmoid((logit + torch.log(u[:F_FACTORS] / (1 - u[:F_FACTORS]))) / tau)    # concrete sample
    w = sum(b[j] * net.fc1.r[j] * torch.outer(net.fc1.w_a[:, j], net.fc1.w_b[j]) for j in range(F_FACTORS))  # eq. 3
    xb, yb = data.x[idx[perm]].to(DT).flatten(1), data.y[idx[perm]]
    out = net.fc2(torch.relu(xb @ w.T + net.fc1.bias))
    v = (1 - (1 - u[F_FACTORS:]) ** (1 / d)) ** (1 / c)            # Kumaraswamy(c, d) by its inverse CDF
    pi_prior = torch.cumprod(v, 0)                                  # eq. 6
    q = torch.sigmoid(logit)
    kl = (q * torch.log(q / pi_prior) + (1 - q) * torch.log((1 - q) / (1 - pi_prior))).sum() \
        + ibp.kl_kumaraswamy_beta(c, d, alpha).sum()                # the KL of v is 0 at the prior start
    loss = F.cross_entropy(out, yb) + kl_weight * kl / len(idx)
    grad, = torch.autograd.grad(loss, logit)
    torch.testing.assert_close(fed.private["fc1.pi_logit"][0, k], before["fc1.pi_logit"][k] - lr * grad,
                               rtol=0, atol=1e-9)
    assert not torch.allclose(grad, torch.zeros_like(grad))


def test_kl_weight_changes_the_selection_update():
    """The two ELBO weights above must move pi differently (else the check could not tell them apart)."""
    data = _data()
    a, b = (_fed(data, rounds=1, batch_size=1000, kl_weight=w) for w in (0.0, 1.0))
    a.run(), b.run()
    assert not torch.allclose(a.private["fc1.pi_logit"], b.private["fc1.pi_logit"], rtol=0, atol=1e-6)


# ---- privacy: the server sees only the shared dictionary -----------------------------------------
def _no_private_values(tensors, private_rows):
    """True if no private row (F,) sits, whole, among the values of any tensor."""
    return not any(torch.isin(row, t.flatten()).all() for t in tensors for row in private_rows)


@pytest.mark.parametrize("method", ["waffle_ibp", "waffle_ibp_l1"])
def test_private_state_never_reaches_the_server(method, monkeypatch, tmp_path):
    data = _data()
    fed = _fed(data, method, out_dir=tmp_path)
    before = {k: v.clone() for k, v in fed.private.items()}
    seen_messages = []
    m = fed.methods[0]
    real = m.aggregate
    monkeypatch.setattr(m, "aggregate", lambda g, s, msg, rnd: seen_messages.append(msg) or real(g, s, msg, rnd))
    fed.run_round()
    (msg,) = seen_messages
    names = {n for n, _ in fed.model.named_parameters()}
    assert set(msg) == set(fed.global_params) == names == {"fc1.w_a", "fc1.w_b", "fc1.r", "fc1.bias",
                                                           "fc2.weight", "fc2.bias"}
    assert not any(k.endswith(PRIVATE_SUFFIXES) for k in msg)
    cohort = fed.history[-1]["clients"]
    others = [k for k in range(data.num_clients) if k not in cohort]
    rows = [v[0, k] for v in list(fed.private.values()) + list(before.values()) for k in cohort]
    assert _no_private_values(msg.values(), rows)
    for k, v in fed.private.items():  # trained on the cohort's devices, untouched elsewhere
        assert not torch.equal(v[0, cohort], before[k][0, cohort])
        assert torch.equal(v[0, others], before[k][0, others])
    # the server's checkpoint holds no private state either: that lives in each client's clients/<k>.pt
    fed.save_checkpoint()
    ck = read_checkpoint(tmp_path)
    srv, cli = ck["server"], ck["clients"][cohort[0]]
    assert set(cli["private"]) == set(fed.private)
    keys, tensors = [], []

    def walk(o, key=""):
        if isinstance(o, torch.Tensor):
            keys.append(key), tensors.append(o)
        elif isinstance(o, dict):
            for kk, vv in o.items():
                keys.append(str(kk))
                walk(vv, str(kk))
        elif isinstance(o, (list, tuple)):
            for vv in o:
                walk(vv, key)
    walk({k: v for k, v in srv.items() if k != "identity"})
    assert tensors and not any(k.endswith(PRIVATE_SUFFIXES) for k in keys)
    assert _no_private_values([t.to(DT) for t in tensors], [v[0, k] for v in fed.private.values() for k in cohort])


def test_aggregate_refuses_a_message_with_other_fields():
    data = _data()
    fed = _fed(data)
    g = fed.run_params(0)
    bad = {**{k: v.unsqueeze(0) for k, v in g.items()}, "fc1.pi_logit": torch.zeros(1, F_FACTORS, dtype=DT)}
    rnd = Round(clients=torch.tensor([0]).numpy(), sizes=torch.ones(1, dtype=DT), n_steps=torch.ones(1),
                round=0, num_clients=data.num_clients)
    with pytest.raises(ValueError, match="shared dictionary"):
        fed.methods[0].aggregate(g, {}, bad, rnd)


# ---- evaluation: seen clients score with their own b, unseen ones with the prior mean -------------
def test_unseen_clients_use_the_prior_mean():
    data = _data()
    fed = _fed(data, alpha_ratio=0.5)
    b = ibp.prior_mean_pi(0.5 * F_FACTORS, F_FACTORS, dtype=DT)       # (alpha / (1 + alpha))^k, alpha = 3
    net = _net(fed.run_params(0))
    x = data.x.to(DT)
    assert fed.local_accuracy(0).tolist() == pytest.approx(_accuracy(net, x, data.y, data.test, [b] * 10), abs=1e-9)
    with torch.no_grad():
        want = 100 * (net(data.x_test.to(DT), {"fc1": b}).argmax(1) == data.y_test).double().mean().item()
    assert fed.global_accuracy(0) == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("hard", [False, True])
def test_seen_clients_score_with_their_own_selection(hard):
    """b_i = pi_i (posterior mean), or 1[pi_i > 0.5] with hard_selection; unseen: the prior mean."""
    data = _data()
    fed = _fed(data, hard_selection=hard)
    fed.run()
    seen = sorted({k for h in fed.history for k in h["clients"]})
    assert fed.seen[0].tolist() == [k in seen for k in range(10)] and 0 < len(seen) < 10
    pi = torch.sigmoid(fed.private["fc1.pi_logit"][0])                                # (N, F)
    prior = ibp.prior_mean_pi(0.8 * F_FACTORS, F_FACTORS, dtype=DT)
    own = (pi > 0.5).to(DT) if hard else pi
    b_rows = [own[k] if k in seen else prior for k in range(10)]
    # atol: the library computes the prior mean in float32 (see the report); 1e-7 still tells b's apart
    torch.testing.assert_close(fed.eval_model(0).inputs[0]["fc1"], torch.stack(b_rows), rtol=0, atol=1e-7)
    if hard:
        assert not torch.equal(own[seen], pi[seen]) and set(own.unique().tolist()) == {0.0, 1.0}
    net = _net(fed.run_params(0))
    x = data.x.to(DT)
    want = _accuracy(net, x, data.y, data.test, b_rows)
    assert fed.local_accuracy(0).tolist() == pytest.approx(want, abs=1e-9)
    assert fed.history[-1]["local_acc_per_client"] == pytest.approx(want, abs=1e-3)
    with torch.no_grad():  # the global model: the trained dictionary with the prior mean
        glob = 100 * (net(data.x_test.to(DT), {"fc1": prior}).argmax(1) == data.y_test).double().mean().item()
    assert fed.global_accuracy(0) == pytest.approx(glob, abs=1e-9)
    # the history's factor count: mean over seen clients of #{k: pi_k > 0.5}
    assert fed.history[-1]["active_factors"]["fc1"] == pytest.approx((pi[seen] > 0.5).sum(1).double().mean().item())


def test_hard_selection_changes_only_the_scoring():
    data = _data()
    soft, hard = _fed(data), _fed(data, hard_selection=True)
    soft.run(), hard.run()
    for k in soft.global_params:
        assert torch.equal(soft.global_params[k], hard.global_params[k])
    for k in soft.private:
        assert torch.equal(soft.private[k], hard.private[k])
    assert not torch.equal(soft.eval_model(0).inputs[0]["fc1"], hard.eval_model(0).inputs[0]["fc1"])


# ---- checkpoints -----------------------------------------------------------------------------------
def test_resume_equals_uninterrupted(tmp_path):
    data = _data()
    kw = dict(rounds=4, selection_optimizer="adam", selection_lr=0.1)
    full = _fed(data, **kw)
    full.run()
    _fed(data, out_dir=tmp_path, checkpoint_every=1, **kw).run(rounds=2)
    resumed = _fed(data, out_dir=tmp_path, **kw)
    assert resumed.round == 2 and len(resumed.history) == 2
    assert not torch.equal(resumed.private["fc1.pi_logit"], _fed(data, **kw).private["fc1.pi_logit"])
    resumed.run()
    for k in full.global_params:
        assert torch.equal(full.global_params[k], resumed.global_params[k])
    for k in full.private:
        assert torch.equal(full.private[k], resumed.private[k])
    assert torch.equal(full.seen, resumed.seen)
    assert resumed.history == full.history
    with pytest.raises(CheckpointError, match="different run"):
        _fed(data, out_dir=tmp_path, **{**kw, "kl_weight": 0.5})


# ---- settings -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw,match", [
    (dict(selection_lr=-1.0), "selection_lr"),
    (dict(alpha_ratio=0.0), "alpha_ratio"),
    (dict(kl_weight=-1.0), "kl_weight"),
    (dict(temperature=0.0), "temperature"),
    (dict(selection_optimizer="rmsprop"), "selection_optimizer"),
    (dict(selection="map"), "selection"),
    (dict(num_factors=0), "num_factors"),
    (dict(server_opt="adam"), "unknown setting"),
])
def test_bad_settings_are_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        _fed(_data(), **kw)


def test_a_module_instead_of_a_model_name_is_rejected():
    with pytest.raises(ValueError, match="model's name"):
        Federation(copy.deepcopy(_net()), _data(), "waffle_ibp", device="cpu", progress=False)


# ---- the L1 ablation (Table 8) -------------------------------------------------------------------------
def test_l1_name_presets_the_selection_and_its_private_state():
    fed = _fed(_data(), "waffle_ibp_l1")
    assert fed.methods[0].params.selection == "l1"
    assert set(fed.private) == {"fc1.score"}
    assert torch.equal(fed.private["fc1.score"], torch.ones(1, 10, F_FACTORS, dtype=DT))


def test_l1_penalty_shrinks_the_factor_scores():
    data = _data()
    norms = {}
    for w in (0.0, 20.0):
        fed = _fed(data, "waffle_ibp_l1", rounds=3, client_fraction=0.5, l1_weight=w)
        fed.run()
        norms[w] = fed.private["fc1.score"][0][fed.seen[0]].abs().sum(1).mean().item()
    assert norms[20.0] < 0.9 * norms[0.0]


# ---- several factorized layers: the noise split, per-layer alpha and the KL summed over layers ---------------
CIFAR_FACTORS = None   # the paper's F for cnn_cifar: conv1, conv2, fc1, fc2 with F = 10, 10, 80, 40


def _reference_client_layers(shared, private, x, y, idx, *, seed, round0, client, local_epochs, batch_size, lr,
                             selection_lr, alpha_ratio, temperature, kl_weight):
    """Algorithm 2 for one client on a model with several factorized layers, written out per layer: each step
    draws 2 x (F_1 + ... + F_L) uniforms, the first half for the layers' b in layer order, the second for their
    v; each layer's IBP prior has alpha = alpha_ratio x its own F, and the KL terms add up over layers."""
    net = layers.make_factorized_model("cnn_cifar", seed=0, num_factors=CIFAR_FACTORS).to(DT)
    net.load_state_dict(shared, strict=False)
    widths = layers.factorized_layers(net)
    names, fs, f_tot = list(widths), list(widths.values()), sum(widths.values())
    q = {k: v.clone().requires_grad_(True) for k, v in private.items()}
    opt_w, opt_q = torch.optim.SGD(net.parameters(), lr=lr), torch.optim.SGD(list(q.values()), lr=selection_lr)
    g = client_generator(seed, round0, client)
    sched = batch_schedule(len(idx), local_epochs, batch_size, g)
    u = torch.rand(len(sched), 2 * f_tot, generator=g).to(DT)
    for s, pos in enumerate(sched):
        u_b = dict(zip(names, u[s, :f_tot].split(fs)))
        u_v = dict(zip(names, u[s, f_tot:].split(fs)))
        b = {l: ibp.relaxed_bernoulli_sample(q[f"{l}.pi_logit"], temperature, u_b[l]) for l in names}
        reg = sum(ibp.ibp_kl(q[f"{l}.pi_logit"], q[f"{l}.log_c"].exp(), q[f"{l}.log_d"].exp(), alpha_ratio * widths[l],
                             u_v[l]) for l in names) * kl_weight
        ce = F.cross_entropy(net(x[idx[pos]], b), y[idx[pos]])
        opt_w.zero_grad(), opt_q.zero_grad()
        (ce + reg / len(idx)).backward()
        opt_w.step(), opt_q.step()
        with torch.no_grad():
            for k in q:
                if k.endswith(("log_c", "log_d")):
                    q[k].clamp_(-6.0, 8.0)
    return {k: v.detach() for k, v in net.named_parameters()}, {k: v.detach() for k, v in q.items()}


def test_rounds_equal_a_per_layer_loop_on_a_cnn_with_four_factorized_layers():
    train, test = standin("cifar10", 400, seed=0), standin("cifar10", 100, train=False, seed=0)
    data = scenarios.waffle_ibp_data("cifar10", "multimodal", seed=0, groups=[((0, 1, 8, 9), 6), ((2, 3, 4, 5), 2)],
                                     train_set=train, test_set=test)
    kw = dict(rounds=2, client_fraction=0.3, local_epochs=1, batch_size=10, lr=0.05, seed=0,
              num_factors=CIFAR_FACTORS, selection_optimizer="sgd", alpha_ratio=0.8, temperature=2 / 3, kl_weight=0.7)
    fed = Federation("cnn_cifar", data, "waffle_ibp", device="cpu", dtype=DT, progress=False, **kw)
    assert fed.methods[0].widths == {"conv1": 10, "conv2": 10, "fc1": 80, "fc2": 40}   # four layers, unequal F
    x, y = data.x.to(DT), data.y
    glob = {k: v.clone() for k, v in fed.run_params(0).items()}
    private = {k: v[0].clone() for k, v in fed.private.items()}
    for r in range(2):
        cohort = fed.sample_clients(0, r)
        fed.run_round()
        outs, sizes = [], []
        for k in cohort:
            idx = torch.as_tensor(data.train[k])
            shared, priv = _reference_client_layers(
                glob, {n: v[k] for n, v in private.items()}, x, y, idx, seed=0, round0=r, client=int(k),
                local_epochs=1, batch_size=10, lr=0.05, selection_lr=0.05, alpha_ratio=0.8, temperature=2 / 3,
                kl_weight=0.7)
            for n in priv:
                private[n][k] = priv[n]
            outs.append(shared), sizes.append(len(idx))
        glob = {n: sum(s * o[n] for s, o in zip(sizes, outs)) / sum(sizes) for n in glob}
        for n in private:
            torch.testing.assert_close(fed.private[n][0], private[n], rtol=0, atol=1e-10)
        for n in glob:
            torch.testing.assert_close(fed.run_params(0)[n], glob[n], rtol=0, atol=1e-10)


@pytest.mark.parametrize("factorization", ["appendix_a", "spatial"])
def test_first_step_gradient_of_a_conv_layer_is_the_elbo_of_eq11(factorization):
    """The same check on cnn_fashion's conv2 (the FMNIST model's second factorized layer): its kernel built densely
    as sum_j b_j r_j (w_a[:, j] outer w_b[j]) reshaped to (out, in, k, k) (the spatial reading copies one k x k kernel
    to every input channel), its b drawn from the second slice of the step's uniforms, and alpha = 0.8 x its own F
    (checked through the update of the Kumaraswamy parameters c, d, since pi's gradient does not depend on alpha)."""
    fs = 4
    train, test = standin("fashionmnist", 120, seed=1), standin("fashionmnist", 40, train=False, seed=1)
    data = scenarios.waffle_ibp_data("fashionmnist", "multimodal", seed=0, groups=[((1, 3, 5, 7, 9), 3), ((0, 2), 1)],
                                     train_set=train, test_set=test)
    lr, tau = 0.05, 2 / 3
    fed = Federation("cnn_fashion", data, "waffle_ibp", device="cpu", dtype=DT, progress=False, rounds=1,
                     client_fraction=0.25, local_epochs=1, batch_size=1000, lr=lr, seed=0, num_factors=fs,
                     temperature=tau, kl_weight=1.0, conv_factorization=factorization)
    assert fed.methods[0].widths == {"conv1": fs, "conv2": fs}
    before = {n: v[0].clone() for n, v in fed.private.items()}
    glob = {n: v.clone() for n, v in fed.run_params(0).items()}
    (k,) = [int(c) for c in fed.sample_clients(0, 0)]
    fed.run_round()
    idx = torch.as_tensor(data.train[k])
    g = client_generator(0, 0, k)
    perm = torch.randperm(len(idx), generator=g)
    u = torch.rand(1, 4 * fs, generator=g)[0].to(DT)      # [b: conv1 | conv2][v: conv1 | conv2]
    q2 = {n: before[f"conv2.{n}"][k].clone().requires_grad_(True) for n in ("pi_logit", "log_c", "log_d")}
    logits = {"conv1": before["conv1.pi_logit"][k], "conv2": q2["pi_logit"]}

    def kernel(l, b, c_in):
        w_a, w_b, r = glob[f"{l}.w_a"], glob[f"{l}.w_b"], glob[f"{l}.r"]
        w = sum(b[j] * r[j] * torch.outer(w_a[:, j], w_b[j]) for j in range(fs))
        return w.view(w.shape[0], 1, 5, 5).expand(-1, c_in, 5, 5) if factorization == "spatial" \
            else w.view(w.shape[0], c_in, 5, 5)

    h = data.x[idx[perm]].to(DT)
    kl = 0.0
    for i, (l, c_in) in enumerate((("conv1", 1), ("conv2", 16))):
        u_b, u_v = u[i * fs:(i + 1) * fs], u[2 * fs + i * fs: 2 * fs + (i + 1) * fs]
        b = torch.sigmoid((logits[l] + torch.log(u_b / (1 - u_b))) / tau)
        h = F.max_pool2d(torch.relu(F.conv2d(h, kernel(l, b, c_in), glob[f"{l}.bias"], padding=2)), 2)
        c, d = (q2["log_c"].exp(), q2["log_d"].exp()) if l == "conv2" else \
            (before[f"{l}.log_c"][k].exp(), before[f"{l}.log_d"][k].exp())
        pi_prior = torch.cumprod((1 - (1 - u_v) ** (1 / d)) ** (1 / c), 0)
        q = torch.sigmoid(logits[l])
        kl = kl + (q * torch.log(q / pi_prior) + (1 - q) * torch.log((1 - q) / (1 - pi_prior))).sum() \
            + ibp.kl_kumaraswamy_beta(c, d, 0.8 * fs).sum()
    out = h.flatten(1) @ glob["fc.weight"].T + glob["fc.bias"]
    loss = F.cross_entropy(out, data.y[idx[perm]]) + kl / len(idx)
    grads = dict(zip(q2, torch.autograd.grad(loss, list(q2.values()))))
    for n, grad in grads.items():   # pi through b and the KL of b; c, d through v and the KL of v (where alpha enters)
        torch.testing.assert_close(fed.private[f"conv2.{n}"][0, k], before[f"conv2.{n}"][k] - lr * grad,
                                   rtol=0, atol=1e-9)
        assert not torch.allclose(grad, torch.zeros_like(grad))
