"""DLA (Yu et al. 2018), weighted WAFFLE's CIFAR-10 model: its size counted by hand, its aggregation
nodes, gradients, batch (in)dependence of BN and GN, and one round through fltutor's batched engine.
Inputs are tiny (a few 32x32 images per forward): the whole file takes well under a minute on one thread."""
import math

import pytest
import torch
import torch.nn.functional as F

from fltutor import scenarios
from fltutor.data import standin
from fltutor.federation import Federation
from fltutor.models import DLA, MODELS, make_model, num_params

NAMES = ["dla", "dla_gn"]


@pytest.fixture(scope="module")
def models():
    return {name: make_model(name, seed=0) for name in NAMES}


@pytest.fixture(scope="module")
def x():
    return standin("cifar10", 4, seed=0).x                                  # (4, 3, 32, 32)


def test_registered():
    assert set(NAMES) <= set(MODELS)
    assert isinstance(MODELS["dla"](), DLA)


@pytest.mark.parametrize("name", NAMES)
def test_output_shape(models, x, name):
    assert tuple(x.shape) == (4, 3, 32, 32)
    with torch.no_grad():
        assert models[name](x[:3]).shape == (3, 10)
    assert DLA(norm="gn", in_channels=1, num_classes=7)(torch.randn(2, 1, 32, 32)).shape == (2, 7)
    with torch.no_grad():   # odd sizes on the way down (28 -> 14 -> 7 -> 4): the stage input pools like the blocks
        assert models[name](torch.randn(2, 3, 28, 28)).shape == (2, 10)


def _count_by_hand(in_channels=3, num_classes=10):
    """From the layer widths alone: a k x k convolution has k*k*c_in*c_out weights (no bias), a norm 2c."""
    conv = lambda k, ci, co: k * k * ci * co                                # noqa: E731
    norm = lambda c: 2 * c                                                  # noqa: E731

    def block(ci, c, stride):                                               # BasicBlock
        n = conv(3, ci, c) + norm(c) + conv(3, c, c) + norm(c)
        return n + (conv(1, ci, c) + norm(c) if stride != 1 or ci != c else 0)

    def node(children, c):                                                  # aggregation node
        return conv(1, children, c) + norm(c)

    def tree1(ci, c, stride, extra=0):                                      # N(B(x), B(B(x)), extra)
        return block(ci, c, stride) + block(c, c, 1) + node(2 * c + extra, c)

    def tree2(ci, c, stride, extra=0):                                      # N(T_1(x), L_1, L_2, extra)
        return tree1(ci, c, stride) + block(c, c, 1) + block(c, c, 1) + node(3 * c + extra, c)

    return (conv(3, in_channels, 16) + norm(16)                             # stem
            + conv(3, 16, 16) + norm(16) + conv(3, 16, 32) + norm(32)       # stages 1-2
            + tree1(32, 64, 1)                                              # stage 3: no stage input at its root
            + tree2(64, 128, 2, extra=64) + tree2(128, 256, 2, extra=128)   # stages 4-6: the stage input too
            + tree1(256, 512, 2, extra=256)
            + 512 * num_classes + num_classes)                              # linear


@pytest.mark.parametrize("name", NAMES)
def test_param_count_by_hand(models, name):
    assert _count_by_hand() == 15_232_314
    assert num_params(models[name]) == _count_by_hand()
    assert num_params(DLA(norm="gn", in_channels=1, num_classes=7)) == _count_by_hand(1, 7)


@pytest.mark.parametrize("name", NAMES)
def test_no_buffers_so_parameters_are_the_whole_state(models, name):
    assert list(models[name].buffers()) == []
    assert set(models[name].state_dict()) == {k for k, _ in models[name].named_parameters()}


def _nodes(m):
    return {k: mod for k, mod in m.named_modules() if k.endswith("root")}


def test_every_aggregation_node_gets_all_its_children(models, x):
    """Each root's 1x1 convolution is as wide as its children together; what each root receives is
    recorded, and zeroing any one child changes that root's output and the logits."""
    m = models["dla_gn"].eval()
    nodes = _nodes(m)
    expected = {"stage3.root": [64, 64], "stage4.subtrees.0.root": [128, 128], "stage4.root": [128, 128, 128, 64],
                "stage5.subtrees.0.root": [256, 256], "stage5.root": [256, 256, 256, 128],
                "stage6.root": [512, 512, 256]}
    assert set(nodes) == set(expected)
    for k, widths in expected.items():
        assert nodes[k].conv.in_channels == sum(widths) and nodes[k].conv.kernel_size == (1, 1), k
    seen, hooks = {}, []
    for k, node in nodes.items():
        hooks.append(node.register_forward_pre_hook(lambda mod, args, k=k: seen.setdefault(k, args[0])))
        hooks.append(node.register_forward_hook(lambda mod, args, out, k=k: seen.setdefault(k + ".out", out)))
    stage_in = {}
    for s in ("stage4", "stage5", "stage6"):
        hooks.append(getattr(m, s).register_forward_pre_hook(lambda mod, args, s=s: stage_in.setdefault(s, args[0])))
    xb = x[:2]
    with torch.no_grad():
        logits = m(xb)
    for h in hooks:
        h.remove()
    for k, widths in expected.items():
        assert [c.shape[1] for c in seen[k]] == widths, k
        assert len({c.shape[2:] for c in seen[k]}) == 1, k                  # one resolution per node
    for s in ("stage4", "stage5", "stage6"):                                # iterative aggregation: the stage input
        torch.testing.assert_close(seen[f"{s}.root"][-1], F.max_pool2d(stage_in[s], 2))
    # the level-2 tree's root also takes its level-1 sub-tree's root
    torch.testing.assert_close(seen["stage4.root"][0], seen["stage4.subtrees.0.root.out"])
    for k, widths in expected.items():
        for j in range(len(widths)):
            def zero_child(mod, args, j=j):
                kids = list(args[0])
                kids[j] = torch.zeros_like(kids[j])
                return (kids,)
            out = {}
            h1 = nodes[k].register_forward_pre_hook(zero_child)
            h2 = nodes[k].register_forward_hook(lambda mod, args, o: out.setdefault("o", o))
            with torch.no_grad():
                changed = m(xb)
            h1.remove()
            h2.remove()
            assert (out["o"] - seen[k + ".out"]).abs().max() > 1e-3, (k, j)
            assert (changed - logits).abs().max() > 1e-6, (k, j)
    m.train()


@pytest.mark.parametrize("name", NAMES)
def test_gradient_reaches_every_parameter(models, x, name):
    m = models[name].train()
    m.zero_grad()
    F.cross_entropy(m(x), torch.tensor([0, 1, 2, 3])).backward()
    for k, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), k
        assert p.grad.abs().max() > 0, k
    m.zero_grad()


def test_group_norm_is_batch_independent_batch_norm_is_not(models, x):
    gn, bn = models["dla_gn"], models["dla"]
    with torch.no_grad():
        torch.testing.assert_close(gn.eval()(x[:1]), gn(x)[:1], atol=1e-5, rtol=1e-5)
        full = bn.train()(x)
        assert (bn(x[:2]) - full[:2]).abs().max() > 1e-2                   # the same images, another batch
        torch.testing.assert_close(bn.eval()(x), full)                      # eval: still the batch's statistics
    gn.train()


def test_make_model_seeded():
    a, b, c = (make_model("dla", seed=s) for s in (3, 3, 4))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.stage4.root.conv.weight, c.stage4.root.conv.weight)
    # He (fan-out) initialisation: std sqrt(2 / (k*k*c_out))
    w = a.stage5.block1.conv2.weight
    assert w.std().item() == pytest.approx(math.sqrt(2 / (9 * 256)), rel=0.05)


def test_one_waffle_weighted_round_in_the_batched_engine():
    """Ten agents of distribution C on stand-in CIFAR-10 (2 training images each, batch 2), the paper's
    client SGD (momentum 0.9, weight decay 5e-4): one round trains, weighs and evaluates with finite numbers."""
    data = scenarios.waffle_weighted_data("cifar10", "C", seed=0, train_set=standin("cifar10", 300, seed=0),
                                          test_set=standin("cifar10", 40, train=False, seed=0),
                                          max_train_per_agent=2)
    assert data.num_clients == 10 and tuple(data.x.shape[1:]) == (3, 32, 32)
    fed = Federation("dla", data, "waffle_weighted", device="cpu", progress=False, rounds=1, client_fraction=1.0,
                     local_epochs=1, batch_size=2, lr=0.01, momentum=0.9, weight_decay=5e-4, seed=0,
                     target=0, delta_omega=3.2)
    start = {k: v.clone() for k, v in fed.run_params(0).items()}
    fed.run()
    assert fed.round == 1 and fed.live
    params = fed.run_params(0)
    assert set(params) == set(start)
    assert all(torch.isfinite(v).all() for v in params.values())
    assert any(not torch.equal(params[k], start[k]) for k in start)
    w = fed.history[-1]["weights"]
    assert len(w) == 10 and all(math.isfinite(v) and v >= 0 for v in w) and sum(w) == pytest.approx(1, abs=1e-3)
    acc = fed.local_accuracy(0)
    assert acc.shape == (10,) and ((acc >= 0) & (acc <= 100)).all()
