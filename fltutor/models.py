"""The papers' model architectures, as plain ``nn.Module``s.

All of them are stateless apart from their parameters (no BatchNorm, no dropout), so one
definition serves both the per-client reference loop and the cohort engine, which runs it
under ``torch.func.vmap`` with a leading client dimension on every parameter.
"""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

__all__ = ["MLP", "CNNFashion", "CNNCifar", "LeNet5", "LogReg", "make_model", "num_params",
           "MODELS"]


class MLP(nn.Module):
    """784-200-10 perceptron with one ReLU hidden layer (WAFFLe, MNIST)."""

    def __init__(self, in_features: int = 784, hidden: int = 200, num_classes: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))  # (B, 784) -> (B, 10)


class CNNFashion(nn.Module):
    """Two 5x5 convolutions (16, 32 channels), 2x2 max-pool after each, one FC (WAFFLe, FMNIST).

    The paper does not give padding; we use 2 ("same"), which makes the FC 7*7*32 -> 10 and
    reproduces the paper's 28,880 weights exactly (Table 2 counts weights without biases).
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
        self.fc = nn.Linear(7 * 7 * 32, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 16, 14, 14)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 32, 7, 7)
        return self.fc(x.flatten(1))


class CNNCifar(nn.Module):
    """Two 3x3 convolutions (16, 16), 2x2 max-pool after each, FC 80 and 60 (WAFFLe, CIFAR-10).

    Padding is not given in the paper; we use none, so the flattened size is 16*6*6.
    """

    def __init__(self, in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3)
        self.conv2 = nn.Conv2d(16, 16, 3)
        self.fc1 = nn.Linear(16 * 6 * 6, 80)
        self.fc2 = nn.Linear(80, 60)
        self.fc3 = nn.Linear(60, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 16, 15, 15)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 16, 6, 6)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


class LeNet5(nn.Module):
    """LeNet-5 (LeCun et al. 1998) with ReLU and max-pool, as used by GMA and weighted WAFFLE.

    On 28x28 inputs the first convolution pads by 2 so that the feature maps match the
    original 32x32 design; on 32x32 (CIFAR-10) it does not pad.
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 6, 5, padding=2 if image_size == 28 else 0)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 6, 14, 14)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 16, 5, 5)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


class LogReg(nn.Module):
    """Multinomial logistic regression: one linear layer on the flattened image."""

    def __init__(self, in_features: int = 784, num_classes: int = 10):
        super().__init__()
        self.fc = nn.Linear(in_features, num_classes)

    def forward(self, x):
        return self.fc(x.flatten(1))


MODELS = {
    "mlp": lambda: MLP(),
    "cnn_fashion": lambda: CNNFashion(),
    "cnn_cifar": lambda: CNNCifar(),
    "lenet5": lambda: LeNet5(),
    "lenet5_cifar": lambda: LeNet5(in_channels=3, image_size=32),
    "lenet5_rgb": lambda: LeNet5(in_channels=3, image_size=28),   # FedCMNIST
    "logreg": lambda: LogReg(),
}



def make_model(name: str, *, seed: int) -> nn.Module:
    """Build model ``name`` with weights drawn from a local generator seeded by ``seed``."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    with torch.random.fork_rng(devices=[]):  # initialisers draw from the global generator
        torch.manual_seed(seed)  # seeded inside the fork only: the caller's stream is untouched
        return MODELS[name]()


def num_params(model: nn.Module, *, weights_only: bool = False) -> int:
    """Number of trainable parameters; ``weights_only`` leaves out biases (1-D tensors)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad and not (weights_only and p.ndim == 1))
