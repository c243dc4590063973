"""Our attacks against the Adversarial Robustness Toolbox (ART 1.20), run on the same targets.

- Shokri et al.'s shadow-model attack: ART's ``ShadowModels`` + ``MembershipInferenceBlackBox``
  (logistic regression) and ``privacy.shadow_attack``, given the same attacker data, number of
  shadows, architecture and SGD budget, reach the same accuracy within sampling error, on a target
  that overfits (well above chance) and on two fresh samples it never saw (at chance, 1/2);
- ART's rule-based attack ("member iff correctly classified") is the correctness rule, and on a
  two-class model exactly our ``loss_threshold_attack`` at -log 2; on a model that memorised
  random labels it scores its closed-form 3/4;
- ART's learned loss attack (logistic regression on the loss and the one-hot label) is one loss
  threshold per class: our ``loss_threshold_attack`` at those thresholds makes the same calls;
- ART's ``MIFace`` with its early stop switched off is ``inversion.invert_class``, to the bit here.

Everything is seeded: torch's global RNG (ART's weight resets, its data loaders' shuffles) and
numpy's global one, besides the explicit seeds of fltutor.
"""
import math

import numpy as np
import pytest
import torch
from art.attacks.inference.membership_inference import (MembershipInferenceBlackBox,
                                                        MembershipInferenceBlackBoxRuleBased, ShadowModels)
from art.attacks.inference.model_inversion import MIFace
from art.estimators.classification import PyTorchClassifier
from torch import nn

from fltutor import data, engine, inversion, privacy

D, K, HIDDEN = 32, 4, 64
N = 500                                                   # members = non-members = in_size of each shadow
# The target's and every shadow's SGD. Gentle on purpose: at lr 0.1 (40 epochs) the shadows' final confidence
# varied so much with their init and data that ART's accuracy swung from 0.51 to 0.71 over four
# seeds (ours 0.69 to 0.71; both AUCs 0.761 to 0.765): a threshold learnt from 3 shadows is only
# as good as their likeness to the target. At lr 0.05 the two differed by 0.006 to 0.031.
RECIPE = dict(local_epochs=30, batch_size=25, lr=0.05, momentum=0.9)


def _seed_globals(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)


def _task(n, g, flip=0.3):
    """Gaussian inputs labelled by a fixed linear teacher, a ``flip`` fraction relabelled at random:
    mostly learnable, the relabelled ones only memorisable, so members and non-members differ in
    confidence, but not totally."""
    teacher = torch.randn(D, K, generator=torch.Generator().manual_seed(123))  # (D, K) fixed across draws
    x = torch.randn(n, D, generator=g)                                         # (n, D)
    y = (x @ teacher).argmax(1)
    noisy = torch.rand(n, generator=g) < flip
    y[noisy] = torch.randint(0, K, (int(noisy.sum()),), generator=g)
    return x, y


def _mlp(seed, d=D, k=K):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, k))


def _train(model, x, y, seed, **recipe):
    """The recipe on (x, y) from the model's own start, as one engine row; loaded into the model."""
    recipe = {**RECIPE, **recipe}
    batches = engine.make_batches([torch.arange(len(y))], recipe["local_epochs"], recipe["batch_size"],
                                  [privacy.seeded_generator(seed, 99)], dtype=x.dtype)
    p, _, _ = engine.train(model, engine.stack_params(engine.get_params(model), 1), x, y, batches,
                           lr=recipe["lr"], momentum=recipe["momentum"])
    model.load_state_dict(engine.unstack_params(p, 0))
    return model.eval()


class _RecipeClassifier(PyTorchClassifier):
    """ART's PyTorch wrapper whose fit() runs RECIPE's epochs and batch size: ``ShadowModels`` calls
    ``fit(x, y)`` with ART's defaults (10 epochs of 128), and its clones keep this class."""

    def fit(self, x, y, **kwargs):
        return super().fit(x, y, batch_size=RECIPE["batch_size"], nb_epochs=RECIPE["local_epochs"], **kwargs)


def _art(model, shape, k, **kw):
    return PyTorchClassifier(model, nn.CrossEntropyLoss(), shape, k, device_type="cpu", **kw)


def _sorted_log_odds(logits, top_k=3):
    """The top_k sorted softmax probabilities as log(p / (1 - p)), written out in numpy float64:
    log p_i - log(1 - p_i) = z_i - logsumexp(z_j, j != i)."""
    z = -np.sort(-np.asarray(logits, np.float64), axis=1)                       # (n, K) descending
    cols = []
    for i in range(top_k):
        rest = np.delete(z, i, axis=1)                                          # (n, K - 1)
        top = rest.max(1, keepdims=True)
        cols.append(z[:, i] - (top[:, 0] + np.log(np.exp(rest - top).sum(1))))
    return np.stack(cols, 1)                                                    # (n, top_k)


def _bound(p, n):
    """Three standard errors of the difference of two accuracies, each a mean over n samples."""
    return 3 * math.sqrt(p * (1 - p) * 2 / n)


# ---- the noisy-label task: a target that overfits, the attacker's data, fresh samples ----------
@pytest.fixture(scope="module")
def noisy():
    g = torch.Generator().manual_seed(0)
    (xm, ym), (xn, yn), (xa, ya), (xb, yb), (xs, ys) = (_task(n, g) for n in (N, N, N, N, 2 * N))
    model = _train(_mlp(0), xm, ym, seed=0)
    with torch.no_grad():
        train_acc = float((model(xm).argmax(1) == ym).float().mean())
        test_acc = float((model(xn).argmax(1) == yn).float().mean())
    assert train_acc == 1.0 and test_acc < 0.7, (train_acc, test_acc)  # overfit: the attack has a signal
    return dict(model=model, xm=xm, ym=ym, xn=xn, yn=yn, fresh=(xa, ya, xb, yb), xs=xs, ys=ys)


@pytest.fixture(scope="module")
def shadow_calls(noisy):
    """Both shadow attacks' member/non-member calls on [members, non-members, fresh a, fresh b] (4N,).

    Both fit on the attacker's 2N samples only (the target's membership is never shown to them),
    so one run serves both regimes below.
    """
    w = noisy
    xa, ya, xb, yb = w["fresh"]
    x, y = torch.cat([w["xm"], w["xn"], xa, xb]), torch.cat([w["ym"], w["yn"], ya, yb])  # (4N, D), (4N,)
    label = (torch.arange(4 * N) // N) % 2 == 0          # members and fresh a: the report's bookkeeping only
    ours = privacy.shadow_attack(w["model"], None, x, y, label, shadow_x=w["xs"], shadow_y=w["ys"],
                                 shadow_model=_mlp(1), num_shadows=3, in_size=N, seed=0, **RECIPE)
    template = _mlp(1)
    _seed_globals(0)                                     # ART's weight resets and shuffles
    sgd = torch.optim.SGD(template.parameters(), lr=RECIPE["lr"], momentum=RECIPE["momentum"])
    shadows = ShadowModels(_RecipeClassifier(template, nn.CrossEntropyLoss(), (D,), K, optimizer=sgd,
                                             device_type="cpu"), num_shadow_models=3, random_state=0)
    (_, y_in, out_in), (_, y_out, out_out) = shadows.generate_shadow_dataset(w["xs"].numpy(), w["ys"].numpy())
    target = _art(w["model"], (D,), K)
    attack = MembershipInferenceBlackBox(target, input_type="prediction", attack_model_type="lr")
    attack.fit(y=y_in, pred=_sorted_log_odds(out_in), test_y=y_out, test_pred=_sorted_log_odds(out_out))
    feats = _sorted_log_odds(target.predict(x.numpy()))
    art_calls = attack.infer(None, y.numpy(), pred=feats).ravel() == 1                  # (4N,)
    art_prob = attack.infer(None, y.numpy(), pred=feats, probabilities=True).ravel()    # (4N,) P(member)
    return dict(ours=(ours["scores"] >= 0).numpy(), ours_scores=ours["scores"].numpy(), art=art_calls,
                art_prob=art_prob, shadow_records=(len(y_in), len(y_out)))


# ShadowModels and shadow_attack get the same attacker data (2N), 3 shadows, each trained on N of
# it with the same architecture and SGD (RECIPE); the members/non-members are the same 2N samples.
# What still differs, and is covered by MARGIN:
# - the attack model: ART fits one logistic regression on (features, one-hot label), so a class only
#   shifts its intercept; ours fits one per class (Shokri et al.), with its own weights. Both get
#   the same features, the three largest softmax probabilities as log-odds (our documented choice):
#   on raw probabilities, ART's default, a linear model whose weights are shared by all classes
#   sees little (w . p is constant when the weights are equal): ART's logistic attack on them
#   scores 0.56 on this target (0.53 on logits), against 0.71 on the shared features, so that
#   would compare feature choices, not implementations;
# - ART's shadows each start from a fresh random init and shuffle with torch's global RNG; ours
#   all start from the shadow model's one init (as FL clients do) and shuffle with their own seeds;
# - ART draws each shadow's N members among the first 2N - 1 shuffled samples and keeps N - 1 out;
#   ours keeps N out; the L2 penalties differ (sklearn's C = 1 on the summed loss vs l2 = 1e-3).
MARGIN = 0.02


@pytest.mark.parametrize("regime", ["overfit", "never_seen"])
def test_shadow_attack_agrees_with_art(shadow_calls, regime):
    """'overfit': the target's N members vs N non-members, both attacks well above chance.
    'never_seen': two fresh samples of N (the first called members), so both are at 1/2 (known answer).
    Accuracy: each is a mean of 2N calls; AUC: Var <= A (1 - A) / N (Birnbaum and Klose 1957)."""
    calls = shadow_calls
    assert calls["shadow_records"] == (3 * N, 3 * (N - 1))          # ART's split, as described above
    rows = slice(0, 2 * N) if regime == "overfit" else slice(2 * N, 4 * N)
    member = np.arange(2 * N) < N
    acc_ours = float((calls["ours"][rows] == member).mean())
    acc_art = float((calls["art"][rows] == member).mean())
    auc_ours = privacy.auc(calls["ours_scores"][rows], member)
    auc_art = privacy.auc(calls["art_prob"][rows], member)
    chance = 3 * 0.5 / math.sqrt(2 * N)                               # 3 sd of Bin(2N, 1/2) / 2N
    if regime == "overfit":
        assert min(acc_ours, acc_art) > 0.5 + chance, (acc_ours, acc_art)
    else:   # calls independent of which fresh sample is called "members"
        assert max(abs(acc_ours - 0.5), abs(acc_art - 0.5)) < chance, (acc_ours, acc_art)
        assert max(abs(auc_ours - 0.5), abs(auc_art - 0.5)) < 3 * math.sqrt((2 * N + 1) / (12 * N * N))
    p = (acc_ours + acc_art) / 2
    assert abs(acc_ours - acc_art) <= _bound(p, 2 * N) + MARGIN, (acc_ours, acc_art)
    a = (auc_ours + auc_art) / 2
    assert abs(auc_ours - auc_art) <= 3 * math.sqrt(2 * a * (1 - a) / N), (auc_ours, auc_art)


# ---- ART's loss attack is a loss threshold per class --------------------------------------------
def test_art_loss_attack_is_our_loss_threshold_per_class(noisy):
    """ART standardises (loss, one-hot y) and fits a logistic regression: for a fixed class, its logit
    is affine in the loss, so it says "member" iff loss < t_c. Our attack at threshold -t_c (member
    iff -loss >= -t_c) must make the same call on every sample, and report the same accuracy."""
    w = noisy
    half = N // 2
    target = _art(w["model"], (D,), K)
    attack = MembershipInferenceBlackBox(target, input_type="loss", attack_model_type="lr")
    attack.fit(w["xm"][:half].numpy(), w["ym"][:half].numpy(), w["xn"][:half].numpy(), w["yn"][:half].numpy())
    x, y = torch.cat([w["xm"][half:], w["xn"][half:]]), torch.cat([w["ym"][half:], w["yn"][half:]])
    m = torch.arange(len(y)) < N - half
    art = attack.infer(x.numpy(), y.numpy()).ravel() == 1                        # (n,) ART's calls

    # our score is minus the loss ART computes (ART in float32, ours in float64 from the same logits)
    scores = privacy.loss_threshold_attack(w["model"], None, x, y, m)["scores"].numpy()
    art_loss = target.compute_loss(x.numpy(), y.numpy())
    np.testing.assert_allclose(-scores, art_loss, rtol=1e-5, atol=1e-6)

    # t_c from the scaler and the coefficients: logit = sum_j coef_j (f_j - mean_j) / scale_j + b
    mean, scale = attack.scaler.mean_, attack.scaler.scale_
    coef, bias = attack.attack_model.coef_[0], attack.attack_model.intercept_[0]
    assert coef[0] < 0                                                            # lower loss, more "member"
    thresholds = np.empty(len(y))                                                # (n,) each sample's t_c
    for c in range(K):
        onehot = np.eye(K)[c]
        rest = bias + (coef[1:] * (onehot - mean[1:]) / scale[1:]).sum()          # the label's part
        thresholds[(y == c).numpy()] = mean[0] - scale[0] * rest / coef[0]        # logit 0 at loss t_c
    near = np.abs(art_loss - thresholds) < 1e-4                                   # float32 vs float64 band
    assert near.sum() <= 2
    assert np.array_equal((scores >= -thresholds)[~near], art[~near])
    for c in range(K):      # the report at -t_c on a balanced part of class c (attack_report needs 1:1)
        mc, nc = (m & (y == c)).nonzero()[:, 0], (~m & (y == c)).nonzero()[:, 0]
        k = min(len(mc), len(nc))
        rows = torch.cat([mc[:k], nc[:k]]).numpy()
        t_c = float(thresholds[rows[0]])
        r = privacy.loss_threshold_attack(w["model"], None, x[rows], y[rows], m[rows], threshold=-t_c)
        if not near[rows].any():
            assert r["accuracy"] == pytest.approx(float((art[rows] == m[rows].numpy()).mean()), abs=1e-12), c
    acc = float((art == m.numpy()).mean())
    assert acc > 0.5 + 3 * 0.5 / math.sqrt(len(y))                              # a real signal, not chance


# ---- ART's rule-based attack: the correctness rule, a known answer --------------------------------
@pytest.fixture(scope="module")
def memorised():
    """A two-class MLP that memorised 200 random-label members in 256 dimensions; 200 non-members."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(400, 256, generator=g)
    y = torch.randint(0, 2, (400,), generator=g)                                # labels independent of x
    model = _train(_mlp(2, d=256, k=2), x[:200], y[:200], seed=1, local_epochs=40, batch_size=20, lr=0.05)
    return dict(model=model, x=x, y=y, m=torch.arange(400) < 200)


def test_rule_based_attack_is_correctness_and_our_loss_threshold_at_log2(memorised, noisy):
    # K = 4: ART's calls are "argmax of the logits == y", computed here by hand
    w = noisy
    x, y = torch.cat([w["xm"], w["xn"]]), torch.cat([w["ym"], w["yn"]])
    with torch.no_grad():
        correct = (w["model"](x).argmax(1) == y).numpy()
    # ART one-hot encodes y with len(np.unique(y)) classes, so every class must occur in y
    assert len(np.unique(y.numpy())) == K
    art = MembershipInferenceBlackBoxRuleBased(_art(w["model"], (D,), K)).infer(x.numpy(), y.numpy())
    assert np.array_equal(art == 1, correct)

    # K = 2: correct iff p_y > 1/2 iff loss < log 2, so ours at threshold -log 2 makes the same calls
    w = memorised
    art = MembershipInferenceBlackBoxRuleBased(_art(w["model"], (256,), 2)).infer(w["x"].numpy(), w["y"].numpy())
    r = privacy.loss_threshold_attack(w["model"], None, w["x"], w["y"], w["m"], threshold=-math.log(2))
    assert np.array_equal(art == 1, (r["scores"] >= -math.log(2)).numpy())
    acc = float((art == w["m"].numpy()).mean())
    assert r["accuracy"] == pytest.approx(acc, abs=1e-12)
    # known answer: every member is memorised, so called a member; a non-member's label is a coin flip
    # independent of the model, so it is called a member with probability exactly 1/2: accuracy
    # (1 + 1/2) / 2 = 3/4, with the sd of half a Bin(200, 1/2) / 200
    m = w["m"].numpy()
    assert (art[m] == 1).all()
    assert abs(acc - 0.75) < 3 * 0.5 * math.sqrt(0.25 / int((~m).sum()))


# ---- MIFace ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mnist_mlp():
    ds = data.standin("mnist", 500, seed=0)
    torch.manual_seed(3)
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 10))
    return _train(model, ds.x, ds.y, seed=3, local_epochs=5, batch_size=50, lr=0.05)


# ART's MIFace step is x + lr * d(model output)[target] / dx, clipped to clip_values, from zeros: with
# a model that ends in softmax this is exactly our step x - lr * d(1 - softmax_target)/dx, clamped.
# Remaining differences: ART works in numpy float32 and inverts batch_size images at a time (here all
# ten at once, like ours), computing each label's gradient over the whole batch and keeping each
# image's own; on this machine that gives the same bits. Its stopping rule has to be switched off:
# ART keeps an image going while cost <= threshold or cost >= the max of its last window_length
# costs, which is Fredrikson's Alg. 1 break condition, so it stops early the images that are still
# improving and far from the target (see the second test). With threshold=1.0 >= 1 - p always
# holds, every image stays active and ART runs exactly max_iter steps, like ``steps``.
def _miface(model, steps, lr, threshold):
    clf = _art(nn.Sequential(model, nn.Softmax(-1)), (1, 28, 28), 10, clip_values=(0.0, 1.0))
    attack = MIFace(clf, max_iter=steps, threshold=threshold, learning_rate=lr, batch_size=10, verbose=False)
    return torch.from_numpy(attack.infer(None, np.arange(10)))                  # (10, 1, 28, 28) from zeros


@pytest.mark.parametrize("steps,lr", [(50, 0.1), (100, 10.0)])
def test_miface_equals_invert_class(mnist_mlp, steps, lr):
    theirs = _miface(mnist_mlp, steps, lr, threshold=1.0)
    ours = inversion.invert_class(mnist_mlp, None, list(range(10)), shape=(1, 28, 28), steps=steps, lr=lr,
                                  clamp=(0.0, 1.0), start="zeros")
    assert ours.dtype == theirs.dtype == torch.float32
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
    assert inversion.psnr(ours, theirs, 1.0).min() > 80                         # dB; +inf when bit-equal
    with torch.no_grad():
        assert torch.equal(mnist_mlp(ours).argmax(1), torch.arange(10))         # each read as its class
    at_bound = ((ours == 0) | (ours == 1)).float().mean()
    assert at_bound > 0.2                                                       # the clipping was exercised


def test_miface_with_a_threshold_stops_after_one_step(mnist_mlp):
    """Why the cross-check passes threshold=1.0: with threshold 0.5, every image starts at p_target
    about 1/10 (cost 0.9 > 0.5) and improves on the window's +inf, so ART drops it after step one,
    where Fredrikson's rule would run until p_target >= 1/2."""
    with torch.no_grad():
        start_cost = 1 - mnist_mlp(torch.zeros(10, 1, 28, 28)).softmax(-1).diagonal()
    assert (start_cost > 0.5).all()
    theirs = _miface(mnist_mlp, 200, 1.0, threshold=0.5)
    one = inversion.invert_class(mnist_mlp, None, list(range(10)), shape=(1, 28, 28), steps=1, lr=1.0)
    torch.testing.assert_close(theirs, one, atol=1e-6, rtol=0)
