"""scripts/lenet_gradient_norms.py: the norms it reports are torch's total gradient norms, step by step."""
import pytest
import torch
import torch.nn.functional as F

from fltutor.models import make_model


@pytest.fixture(scope="module")
def mod(load_script):
    return load_script("lenet_gradient_norms")


@pytest.mark.parametrize("model", ["lenet5", "lenet5_classic"])
def test_norms_match_torchs_total_norm_along_the_same_sgd_path(mod, model):
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 1, 28, 28, generator=g), torch.randint(0, 10, (8,), generator=g)
    got = mod.gradient_norms(model, x, y, epochs=2, batch=8)             # one full batch per epoch: order irrelevant
    net = make_model(model, seed=0)
    want = []
    for _ in range(2):
        net.zero_grad()
        F.cross_entropy(net(x), y).backward()
        want.append(float(torch.nn.utils.clip_grad_norm_(net.parameters(), float("inf"))))   # returns the total norm
        with torch.no_grad():
            for p in net.parameters():
                p -= 0.1 * p.grad
    assert got == pytest.approx(want, rel=1e-5)


def test_bad_input_is_named(mod):
    with pytest.raises(SystemExit):
        mod.main(["--epochs", "0"])
