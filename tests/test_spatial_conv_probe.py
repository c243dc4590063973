"""scripts/spatial_conv_probe.py: its loop is plain SGD, and the tied kernel's gradient is the sum over input channels."""
import math

import pytest
import torch
import torch.nn.functional as F

from fltutor import layers


@pytest.fixture(scope="module")
def mod(load_script):
    return load_script("spatial_conv_probe")


def test_first_gradient_norms_are_those_of_one_full_batch_step(mod):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(6, 1, 28, 28, generator=g), torch.randint(0, 10, (6,), generator=g)
    got = mod.local_run(x, y, conv_factorization="spatial", lr=0.01, epochs=2, batch=6)
    net = layers.make_factorized_model("cnn_fashion", seed=0, conv_factorization="spatial")
    b = {n: torch.ones(f) for n, f in layers.factorized_layers(net).items()}
    F.cross_entropy(net(x, b), y).backward()
    assert got["grad_w_b"] == pytest.approx({n: float(p.grad.norm()) for n, p in net.named_parameters() if n.endswith("w_b")})
    assert got["losses"][0] == pytest.approx(F.cross_entropy(net(x, b), y).item())
    assert len(got["losses"]) == 2                                         # one step per epoch at batch 6


def test_the_spatial_kernels_gradient_is_the_sum_of_the_dense_kernels_gradient_over_input_channels():
    # the spatial conv2 equals a dense conv whose kernel is the same k x k map repeated over the 16 input
    # channels, so by the chain rule its gradient is the dense kernel's gradient summed over those channels
    conv = layers.FactorizedConv2d(16, 4, 5, 3, padding=2, factorization="spatial")
    b = torch.ones(3)
    x = torch.randn(2, 16, 9, 9, generator=torch.Generator().manual_seed(2))
    k = ((conv.w_a * (conv.r * b)) @ conv.w_b).view(-1, 1, 5, 5).detach()
    dense = k.expand(-1, 16, 5, 5).clone().requires_grad_(True)
    tied = k.clone().requires_grad_(True)
    F.conv2d(x, dense, padding=2).square().sum().backward()
    F.conv2d(x.sum(1, keepdim=True), tied, padding=2).square().sum().backward()
    assert torch.allclose(tied.grad, dense.grad.sum(1, keepdim=True), atol=1e-4)


def test_summary_names_the_first_non_finite_step(mod):
    assert mod.summary([1.0, 2.0, math.nan, 3.0]) == "non-finite at step 3 of 4"
    assert mod.summary([2.0, 1.0]).startswith("first 2.000, largest 2")


def test_bad_input_is_named(mod):
    with pytest.raises(SystemExit):
        mod.main(["--lrs", "0"])
