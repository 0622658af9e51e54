import copy

import numpy as np
import pytest
import torch
from torch import nn

from skdbal import MCDropoutClassifier
from skdbal.models import MLP, BayesianCNN, stochastic_head


def test_samples_shape_and_rows_sum_to_one(fitted_net, digits):
    X, _ = digits
    P = fitted_net.predict_proba_samples(X[300:350])
    assert P.shape == (8, 50, 10)
    np.testing.assert_allclose(P.sum(axis=-1), 1.0, atol=1e-5)
    assert fitted_net.predict_proba_samples(X[300:350], n_samples=3).shape == (3, 50, 10)


def test_passes_differ_with_dropout(fitted_net, digits):
    X, _ = digits
    P = fitted_net.predict_proba_samples(X[300:350])
    assert not np.allclose(P[0], P[1])
    assert np.abs(P - P.mean(axis=0)).max() > 1e-3


def test_deterministic_baseline_passes_are_identical(fitted_net, digits):
    X, _ = digits
    det = copy.deepcopy(fitted_net).set_params(mc_dropout=False)
    P = det.predict_proba_samples(X[300:350])
    assert P.shape == (8, 50, 10)
    np.testing.assert_array_equal(P, np.broadcast_to(P[0], P.shape))
    # weight-scaled prediction: the module in eval mode
    fitted_net.module_.eval()
    with torch.no_grad():
        ref = torch.softmax(fitted_net.module_(torch.as_tensor(X[300:350])), -1).numpy()
    np.testing.assert_allclose(P[0], ref, atol=1e-6)
    np.testing.assert_allclose(det.predict_proba(X[300:350]), ref, atol=1e-6)


def test_same_random_state_same_samples(small_net, digits):
    X, y = digits
    a = small_net(max_epochs=2).fit(X[:100], y[:100])
    b = small_net(max_epochs=2).fit(X[:100], y[:100])
    for pa, pb in zip(a.module_.parameters(), b.module_.parameters()):
        torch.testing.assert_close(pa, pb)  # fit is reproducible
    np.testing.assert_array_equal(a.predict_proba_samples(X[100:150]), b.predict_proba_samples(X[100:150]))
    np.testing.assert_array_equal(a.predict_proba_samples(X[100:150]), a.predict_proba_samples(X[100:150]))
    c = small_net(max_epochs=2, random_state=1).fit(X[:100], y[:100])
    assert not np.allclose(a.predict_proba_samples(X[100:150]), c.predict_proba_samples(X[100:150]))


def test_sampling_leaves_global_torch_rng_alone(fitted_net, digits):
    X, _ = digits
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    fitted_net.predict_proba_samples(X[:10])
    torch.testing.assert_close(torch.rand(3), expected)


class BNNet(nn.Module):
    """A split net with BatchNorm in both parts."""

    def __init__(self, n_features=64, n_classes=10):
        super().__init__()
        self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(n_features, 16), nn.BatchNorm1d(16), nn.ReLU())
        self.head = nn.Sequential(nn.Dropout(0.5), nn.Linear(16, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                  nn.Linear(16, n_classes))

    def forward(self, x):
        return self.head(self.trunk(x))


def test_batchnorm_stats_unchanged_and_mode_restored(small_net, digits):
    X, y = digits
    net = small_net(module=BNNet, max_epochs=2).fit(X[:100], y[:100])
    before = {k: v.clone() for k, v in net.module_.state_dict().items()}
    for mode in (True, False):
        net.module_.train(mode)
        net.module_.head[2].train(not mode)  # a mixed state must come back exactly
        flags = [m.training for m in net.module_.modules()]
        P = net.predict_proba_samples(X[100:160])
        assert [m.training for m in net.module_.modules()] == flags
        for k, v in net.module_.state_dict().items():
            torch.testing.assert_close(v, before[k], msg=k)
    assert not np.allclose(P[0], P[1])


def test_mode_restored_on_error(fitted_net):
    fitted_net.module_.train()
    del fitted_net.input_shape_  # as if fitted elsewhere: the module's own reshape refuses the input
    try:
        with pytest.raises(ValueError, match="64 values"):
            fitted_net.predict_proba_samples(np.zeros((3, 5), dtype=np.float32))
        assert all(m.training for m in fitted_net.module_.modules())
    finally:
        fitted_net.input_shape_ = (8, 8)
        fitted_net.module_.eval()


@pytest.mark.parametrize("X, match", [
    (np.zeros((3, 5), dtype=np.float32), r"X has samples of shape \(5,\), but MCDropoutClassifier was fitted on "
                                         r"samples of shape \(8, 8\)"),
    (np.zeros((3, 4, 16), dtype=np.float32), r"shape \(4, 16\)"),  # 64 values, another image
    (np.zeros((3, 2, 8, 8), dtype=np.float32), r"shape \(2, 8, 8\)"),
])
def test_inputs_of_another_layout_are_refused(fitted_net, X, match):
    with pytest.raises(ValueError, match=match):
        fitted_net.predict_proba_samples(X)
    with pytest.raises(ValueError, match=match):
        fitted_net.predict(X)


def test_input_formats_agree(fitted_net, digits):
    X, _ = digits
    Xu8 = np.round(X[:20] * 255).astype(np.uint8)
    Xf = Xu8.astype(np.float32) / 255
    ref = fitted_net.predict_proba_samples(Xf)
    for variant in (Xu8, Xu8.reshape(20, 1, 8, 8), Xu8.reshape(20, 64), Xf.reshape(20, 64),
                    Xf.astype(np.float64), torch.as_tensor(Xf)):
        np.testing.assert_allclose(fitted_net.predict_proba_samples(variant), ref, atol=1e-6)


def test_predict_proba_is_mc_average_by_default(fitted_net, digits):
    X, _ = digits
    np.testing.assert_allclose(fitted_net.predict_proba(X[:30]),
                               fitted_net.predict_proba_samples(X[:30]).mean(axis=0), atol=1e-7)
    det = copy.deepcopy(fitted_net).set_params(predict_method="deterministic")
    assert not np.allclose(det.predict_proba(X[:30]), fitted_net.predict_proba(X[:30]))
    pred = fitted_net.predict(X[:30])
    np.testing.assert_array_equal(pred, fitted_net.predict_proba(X[:30]).argmax(1))


def test_transform_gives_penultimate_features(fitted_net, digits):
    X, _ = digits
    F = fitted_net.transform(X[:7])
    assert F.shape == (7, 128)
    net = fitted_net.module_.eval()
    with torch.no_grad():
        logits = net.head[-1](torch.as_tensor(F))
        ref = net(torch.as_tensor(X[:7]))
    torch.testing.assert_close(logits, ref, atol=1e-5, rtol=1e-5)


def test_classes_stable_when_labels_miss_classes(small_net, digits):
    X, y = digits
    keep = y < 5
    net = small_net(max_epochs=1).fit(X[keep][:50], y[keep][:50])
    assert net.predict_proba(X[:5]).shape == (5, 10)
    np.testing.assert_array_equal(net.classes_, np.arange(10))


def test_string_labels_round_trip(small_net, digits):
    X, y = digits
    names = np.array(list("abcdefghij"))
    net = small_net(classes=None, max_epochs=20, module=MLP).fit(X[:200], names[y[:200]])
    np.testing.assert_array_equal(net.classes_, names)
    assert set(net.predict(X[:50])) <= set(names)
    assert net.score(X[200:400], names[y[200:400]]) > 0.3


@pytest.mark.parametrize(
    "X, exc, match",
    [
        (np.full((4, 8, 8), np.nan, dtype=np.float32), ValueError, "NaN"),
        (np.full((4, 8, 8), np.inf, dtype=np.float32), ValueError, "infinity"),
        (np.zeros((4, 1, 1, 8, 8), dtype=np.float32), ValueError, "5 dimensions"),
    ],
)
def test_bad_X_raises(fitted_net, X, exc, match):
    with pytest.raises(exc, match=match):
        fitted_net.predict_proba_samples(X)


@pytest.mark.parametrize("T", [0, -1, 2.5, True])
def test_bad_T_raises(fitted_net, digits, T):
    with pytest.raises(ValueError, match="n_samples"):
        fitted_net.predict_proba_samples(digits[0][:3], n_samples=T)


def test_fit_rejects_labels_outside_classes(small_net, digits):
    X, y = digits
    with pytest.raises(ValueError, match="not in classes"):
        small_net().fit(X[:10], np.full(10, 11))


def test_unfitted_raises(digits):
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        MCDropoutClassifier().predict_proba_samples(digits[0][:3])


def test_trunk_cached_sampling_is_exact(fitted_net, digits):
    """Trunk once + T head passes == T full passes drawing the same masks.

    The reference runs the whole net (trunk included) on the input repeated T
    times, with every dropout drawing its mask by the same rule, in the same
    row groups and from the same seed. The trunk uses no randomness, so the
    masks are identical, and so must be the outputs.
    """
    from skdbal.models import MCDropoutClassifier, stochastic_head
    X, _ = digits
    xb = X[:13]
    T = 9
    old = MCDropoutClassifier._HEAD_ROWS
    try:
        MCDropoutClassifier._HEAD_ROWS = 13 * 4  # groups of 4 passes: 4 + 4 + 1
        P = fitted_net.set_params(mask_seeding="stream").predict_proba_samples(xb, n_samples=T)
    finally:
        MCDropoutClassifier._HEAD_ROWS = old
        fitted_net.set_params(mask_seeding="auto")
    net = fitted_net.module_.eval()
    full = nn.Sequential(*net.trunk, *net.head)  # the whole net as one sequence
    ref = []
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(fitted_net.random_state + 2)  # the sampling seed
        x = torch.as_tensor(xb)
        for _t0, t in ((0, 4), (4, 4), (8, 1)):
            rep = x.unsqueeze(0).expand(t, *x.shape).reshape(t * 13, 8, 8)
            ref.append(torch.softmax(stochastic_head(full, rep), -1).reshape(t, 13, 10))
    np.testing.assert_allclose(P, torch.cat(ref).numpy(), atol=1e-6)


def test_stochastic_head_matches_dropout_in_distribution():
    torch.manual_seed(0)
    head = nn.Sequential(nn.Dropout(0.25), nn.Dropout2d(0.5))
    x = torch.ones(4000, 3, 2, 2)
    with torch.no_grad():
        y = stochastic_head(head, x)
    kept = y != 0
    # element-wise 0.75 then channel-wise 0.5: a unit survives with probability 0.375
    assert abs(kept.float().mean().item() - 0.375) < 0.01
    # inverted scaling: survivors are 1 / (0.75 * 0.5)
    np.testing.assert_allclose(y[kept].numpy(), 1 / 0.375, rtol=1e-6)
    # channel-wise: the second dropout zeroes whole channels
    zero_channels = (y == 0).all(dim=(2, 3))
    assert abs(zero_channels.float().mean().item() - (0.5 + 0.5 * 0.25 ** 4)) < 0.02
    assert (stochastic_head(nn.Sequential(nn.Dropout(1.0)), x) == 0).all()
    assert torch.equal(stochastic_head(nn.Sequential(nn.Dropout(0.0)), x), x)


def test_unsplit_module_falls_back_to_full_passes(small_net, digits):
    X, y = digits

    class Plain(nn.Module):
        def __init__(self, n_features=64, n_classes=10):
            super().__init__()
            self.seq = nn.Sequential(nn.Flatten(), nn.Linear(n_features, 32), nn.ReLU(), nn.Dropout(0.5),
                                     nn.Linear(32, n_classes))

        def forward(self, x):
            return self.seq(x)

    net = small_net(module=Plain, max_epochs=2).fit(X[:100], y[:100])
    P = net.predict_proba_samples(X[:20])
    assert P.shape == (8, 20, 10) and not np.allclose(P[0], P[1])
    np.testing.assert_allclose(P.sum(-1), 1, atol=1e-5)
    with pytest.raises(TypeError, match="trunk"):
        net.transform(X[:2])


def test_consistent_masks_same_for_every_point_and_chunk(fitted_net, digits):
    X, _ = digits
    net = copy.deepcopy(fitted_net).set_params(consistent_masks=True, n_samples=6)
    pool = np.concatenate([X[:5], X[:5]])  # each image twice, in different positions
    P = net.predict_proba_samples(pool)
    assert P.shape == (6, 10, 10)
    np.testing.assert_allclose(P[:, :5], P[:, 5:], atol=1e-6)  # same masks for the copies
    assert not np.allclose(P[0], P[1])  # passes still differ
    # independent of batching and of the call: the same T sub-networks
    net.set_params(batch_size=3)
    np.testing.assert_allclose(net.predict_proba_samples(pool), P, atol=1e-6)
    np.testing.assert_allclose(net.predict_proba_samples(X[3:5]), P[:, 3:5], atol=1e-6)


def test_consistent_masks_are_a_fixed_subnetwork(fitted_net, digits):
    """Pass t equals the net with each dropout replaced by multiplication with mask t."""
    from skdbal.models._mc_masks import _draw_masks
    X, _ = digits
    net = copy.deepcopy(fitted_net).set_params(consistent_masks=True, n_samples=4)
    P = net.predict_proba_samples(X[:7])
    trunk, head = net.module_.trunk, net.module_.head
    with torch.no_grad():
        net.module_.eval()
        h = trunk(torch.as_tensor(X[:7]))
        masks = _draw_masks(head, h, 4, net.random_state + 3)
        for t in range(4):
            x, k = h, 0
            for m in head:
                if isinstance(m, nn.Dropout):
                    x = x * masks[k][t]
                    k += 1
                else:
                    x = m(x)
            np.testing.assert_allclose(P[t], torch.softmax(x, -1).numpy(), atol=1e-6)
    # dropout keeps about 1 - p of the units
    assert abs(masks[1].ne(0).float().mean().item() - 0.5) < 0.1


class _SplitButDifferent(nn.Module):
    """Has a trunk and a head, but forward adds a skip path: the split is wrong."""

    def __init__(self, n_features=64, n_classes=10):
        super().__init__()
        self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(n_features, 32), nn.ReLU())
        self.head = nn.Sequential(nn.Dropout(0.5), nn.Linear(32, n_classes))
        self.skip = nn.Linear(n_features, n_classes)

    def forward(self, x):
        return self.head(self.trunk(x)) + self.skip(x.flatten(1))


def test_custom_forward_is_not_bypassed_by_the_split(small_net, digits):
    """A trunk/head module whose forward is not head(trunk(x)) is sampled with full passes."""
    X, y = digits
    net = small_net(module=_SplitButDifferent, max_epochs=2, n_samples=200).fit(X[:100], y[:100])
    with torch.no_grad():  # make the skip path decisive: it favours class 0
        net.module_.skip.bias.zero_()
        net.module_.skip.bias[0] = 3.0
    with pytest.warns(UserWarning, match="differs from head"):
        P = net.predict_proba_samples(X[:10])
    # the MC mean must approach the mean of full stochastic passes, skip path included
    mod = net.module_
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(0)
        mod.train()
        ref = torch.stack([torch.softmax(mod(torch.as_tensor(X[:10])), -1) for _ in range(2000)]).mean(0)
        mod.eval()
        no_skip = torch.softmax(mod.head[1](mod.trunk(torch.as_tensor(X[:10]))), -1)
    np.testing.assert_allclose(P.mean(0), ref.numpy(), atol=0.05)
    assert np.abs(P.mean(0) - no_skip.numpy()).max() > 0.3  # the skip path matters
    with pytest.raises(TypeError, match="forward"):
        net.set_params(consistent_masks=True).predict_proba_samples(X[:3])


def test_dropout_subclass_in_head_runs_its_own_forward(small_net, digits):
    """An nn.Dropout subclass may do anything: the head must call it, not redraw masks."""
    X, y = digits

    class HalfDropout(nn.Dropout):  # drops like Dropout, then halves
        def forward(self, x):
            return 0.5 * super().forward(x)

    class Net(nn.Module):
        def __init__(self, n_features=64, n_classes=10):
            super().__init__()
            self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(n_features, 16), nn.ReLU())
            self.head = nn.Sequential(HalfDropout(0.0), nn.Linear(16, n_classes))

        def forward(self, x):
            return self.head(self.trunk(x))

    net = small_net(module=Net, max_epochs=1).fit(X[:50], y[:50])
    P = net.predict_proba_samples(X[:4], n_samples=2)
    with torch.no_grad():
        mod = net.module_.eval()
        h = mod.trunk(torch.as_tensor(X[:4]))
        expected = torch.softmax(mod.head[1](0.5 * h), -1).numpy()
    np.testing.assert_allclose(P[0], expected, atol=1e-6)
    with pytest.raises(TypeError, match="HalfDropout"):
        net.set_params(consistent_masks=True).predict_proba_samples(X[:3])


def test_module_without_dropout_warns(small_net, digits):
    X, y = digits

    class NoDropout(nn.Module):
        def __init__(self, n_features=64, n_classes=10):
            super().__init__()
            self.lin = nn.Linear(n_features, n_classes)

        def forward(self, x):
            return self.lin(x.flatten(1))

    net = small_net(module=NoDropout, max_epochs=1).fit(X[:50], y[:50])
    with pytest.warns(UserWarning, match="no dropout layers"):
        P = net.predict_proba_samples(X[:5])
    np.testing.assert_array_equal(P[0], P[1])


@pytest.fixture(params=["row_pcg64", "row", "row_philox", "auto"])
def row_keyed_net(request, fitted_net):
    """``fitted_net`` with each row-keyed mask seeding in turn (the default, ``"auto"``, last)."""
    yield fitted_net.set_params(mask_seeding=request.param)
    fitted_net.set_params(mask_seeding="auto")


def test_row_keyed_masks_are_exact_and_depend_on_the_row_only(row_keyed_net, digits, row_keyed_reference):
    """Each row's T passes: its trunk output through the head, with masks drawn in layer order from a
    generator seeded by a hash of the row and the sampling seed; nothing else."""
    fitted_net = row_keyed_net
    X, _ = digits
    xb, T = X[:7], 5
    P = fitted_net.predict_proba_samples(xb, n_samples=T)
    np.testing.assert_allclose(P, row_keyed_reference(fitted_net, xb, T), atol=1e-6)
    # the same rows anywhere: reversed, in other batches, among other rows, alone (the same masks; the
    # matrix products of other batch compositions may round differently in the last bits)
    perm = np.arange(300)[::-1]
    Q = fitted_net.set_params(batch_size=11).predict_proba_samples(X[:300][perm], n_samples=T)
    fitted_net.set_params(batch_size=128)
    np.testing.assert_allclose(Q[:, perm][:, :7], P, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(fitted_net.predict_proba_samples(xb[3:4], n_samples=T), P[:, 3:4], rtol=1e-5,
                               atol=1e-7)
    # another seed, other masks; equal rows, equal passes
    other = fitted_net.set_params(random_state=1).predict_proba_samples(xb, n_samples=T)
    fitted_net.set_params(random_state=0)
    assert not np.allclose(other, P)
    twice = fitted_net.predict_proba_samples(np.stack([xb[0], xb[0]]), n_samples=T)
    np.testing.assert_array_equal(twice[:, 0], twice[:, 1])


@pytest.mark.parametrize("kind", ["pcg64", "torch"])
def test_row_keyed_masks_match_dropout_in_distribution(kind):
    from skdbal.models._mc_masks import _row_keyed_dropout
    from skdbal.models._row_masks import PCG64RowStreams, TorchRowStreams
    head = nn.Sequential(nn.Dropout(0.25), nn.Dropout2d(0.5))
    streams = PCG64RowStreams(range(400)) if kind == "pcg64" else TorchRowStreams(range(400), "cpu")
    state = {"T": 10, "streams": streams}
    with _row_keyed_dropout(head, state), torch.no_grad():
        y = head(torch.ones(4000, 3, 2, 2))  # 400 rows x 10 passes
    kept = y != 0
    # element-wise 0.75 then channel-wise 0.5: a unit survives with probability 0.375, scaled by 1 / 0.375
    assert abs(kept.float().mean().item() - 0.375) < 0.01
    np.testing.assert_allclose(y[kept].numpy(), 1 / 0.375, rtol=1e-6)
    zero_channels = (y == 0).all(dim=(2, 3))
    assert abs(zero_channels.float().mean().item() - (0.5 + 0.5 * 0.25 ** 4)) < 0.02
    assert all(m.training for m in head)  # modes restored, hooks removed
    assert torch.equal(head.eval()(torch.ones(2, 3, 2, 2)), torch.ones(2, 3, 2, 2))


def test_factored_first_convolution_detection():
    """The first convolution after a channel dropout is factored only through layers that commute
    with scaling a channel by a number >= 0, and only for a plain convolution with a kernel > 1x1."""
    from skdbal.models import KirschCNN
    from skdbal.models._mc_masks import _factored_conv

    assert _factored_conv(KirschCNN().head) == 3  # Dropout2d, MaxPool2d, ReLU, Conv2d
    assert _factored_conv(BayesianCNN().head) == 0  # element dropout first
    conv = nn.Conv2d(4, 2, 3)
    assert _factored_conv(nn.Sequential(nn.Dropout2d(0.5), conv)) == 1
    assert _factored_conv(nn.Sequential(nn.Dropout2d(0.5), nn.BatchNorm2d(4), conv)) == 0  # shifts: not homogeneous
    assert _factored_conv(nn.Sequential(nn.Dropout2d(0.5), nn.Tanh(), conv)) == 0
    assert _factored_conv(nn.Sequential(nn.Dropout2d(0.5), nn.Conv2d(4, 2, 1))) == 0  # 1x1: nothing saved
    assert _factored_conv(nn.Sequential(nn.Dropout2d(0.5), nn.Conv2d(4, 2, 3, groups=2))) == 0
    assert _factored_conv(nn.Sequential(nn.Dropout2d(0.0), conv)) == 0  # no draws to mirror


def test_channel_contributions_by_hand():
    """conv(u ⊙ m) = Σ_c m_c conv_c(u_c) + bias, with conv_c the convolution of channel c alone."""
    from skdbal.models._mc_masks import _channel_contributions

    torch.manual_seed(0)
    head = nn.Sequential(nn.Dropout2d(0.5), nn.ReLU(), nn.Conv2d(3, 2, 2, bias=True))
    h = torch.randn(4, 3, 5, 5)
    U = _channel_contributions(head, 2, h)
    assert U.shape == (4, 3, 2, 4, 4)
    u = torch.relu(h)
    conv = head[2]
    for c in range(3):  # channel c alone: zero the other input channels and drop the bias
        only = torch.zeros_like(u)
        only[:, c] = u[:, c]
        torch.testing.assert_close(U[:, c], torch.nn.functional.conv2d(only, conv.weight), rtol=1e-5, atol=1e-6)
    m = torch.tensor([2.0, 0.0, 2.0])  # keep, drop, keep at p = 0.5
    torch.testing.assert_close((m.view(1, 3, 1, 1, 1) * U).sum(1) + conv.bias.view(1, 2, 1, 1),
                               conv(u * m.view(1, 3, 1, 1)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("consistent", [False, True])
def test_factored_sampling_equals_plain_passes(consistent, monkeypatch):
    """KirschCNN's passes with the first convolution factored equal the plain passes with the same masks."""
    import skdbal.models._mc_base as base  # the sampling loop, which looks the engine's paths up there
    from skdbal.models import KirschCNN

    rng = np.random.RandomState(0)
    X = rng.rand(40, 1, 28, 28).astype(np.float32)
    clf = MCDropoutClassifier(KirschCNN, max_epochs=1, random_state=0, n_samples=7,
                              consistent_masks=consistent).fit(X, np.arange(40) % 4)
    P = clf.predict_proba_samples(X)
    monkeypatch.setattr(base, "_factored_conv", lambda head: 0)
    Q = clf.predict_proba_samples(X)
    np.testing.assert_allclose(P, Q, rtol=1e-5, atol=1e-6)
    assert not np.allclose(P[0], P[1])  # still T different passes
    if consistent:  # the same masks for every row: a row's passes do not depend on its neighbours
        np.testing.assert_allclose(clf.predict_proba_samples(X[5:6]), Q[:, 5:6], rtol=1e-5, atol=1e-6)


def test_factored_contributions_leave_the_trunk_output_alone():
    """An in-place ReLU between the channel dropout and the convolution must not change its input."""
    from skdbal.models._mc_masks import _channel_contributions, _factored_conv

    head = nn.Sequential(nn.Dropout2d(0.5), nn.ReLU(inplace=True), nn.Conv2d(2, 3, 3))
    assert _factored_conv(head) == 2
    h = torch.randn(2, 2, 5, 5)
    before = h.clone()
    _channel_contributions(head, 2, h)
    torch.testing.assert_close(h, before, rtol=0, atol=0)


@pytest.mark.parametrize("given", ["class", "instance"])
def test_pickle_taken_while_another_thread_scores_waits_for_it(fitted_net, digits, given):
    """Scoring puts row-keyed dropout hooks (closures) on the module and changes its mode flags; a pickle
    taken from another thread meanwhile (a Dask worker sending its copy to a peer) waits for the scoring
    to end instead of failing on a hook, and holds the network as it is between calls. A module given as
    an instance is the fitted module itself, also kept as the ``module`` parameter: that is copied too."""
    import pickle
    import threading

    from skdbal.models._mc_masks import _row_keyed_dropout, mc_dropout_mode

    X, y = digits
    if given == "instance":
        fitted_net = MCDropoutClassifier(MLP(n_features=64, n_classes=10, hidden_layer_sizes=(16,)),
                                         classes=np.arange(10), max_epochs=1, n_samples=8, random_state=0,
                                         verbose=0).fit(X[:100], y[:100])
        assert fitted_net.module is fitted_net.module_
    scoring, release, out = threading.Event(), threading.Event(), {}

    def score():
        with mc_dropout_mode(fitted_net.module_), _row_keyed_dropout(fitted_net.module_, {"T": 1}):
            scoring.set()
            release.wait(10)

    def dump():
        try:
            out["blob"] = pickle.dumps(fitted_net)
        except BaseException as exc:  # re-raised below
            out["error"] = exc

    a = threading.Thread(target=score)
    a.start()
    assert scoring.wait(10)
    assert any(m._forward_hooks for m in fitted_net.module_.modules())  # the state a pickle must not see
    b = threading.Thread(target=dump)
    b.start()
    b.join(0.3)
    assert b.is_alive() and not out  # waits while the other thread scores
    release.set()
    a.join(10)
    b.join(10)
    assert "error" not in out, out.get("error")
    copy_ = pickle.loads(out["blob"])
    assert not any(m._forward_hooks for m in copy_.module_.modules())
    assert [m.training for m in copy_.module_.modules()] == [m.training for m in fitted_net.module_.modules()]
    np.testing.assert_array_equal(copy_.predict_proba_samples(X[:5], n_samples=3),
                                  fitted_net.predict_proba_samples(X[:5], n_samples=3))


class _SlowPickledMLP(MLP):
    """An MLP whose second pickling in a net's pickle (the first is skorch's of the fitted module, under
    the lock; the second is the ``module`` parameter's, the same object) gives another thread the time to
    start scoring with it: it says so (``pickling``) and waits up to a second for that thread to have put
    its dropout hooks on."""
    pickling = None
    hooked = None
    calls = 0

    def __getstate__(self):
        cls = type(self)
        if cls.pickling is not None:
            cls.calls += 1
            if cls.calls == 2:
                cls.pickling.set()
                cls.hooked.wait(1.0)
        return super().__getstate__()


def test_a_module_given_as_an_instance_is_pickled_as_it_was_under_the_lock(digits):
    """``module=MLP(...)`` keeps the fitted module, the same object, as a parameter, which pickle reaches
    after the net's __getstate__ has returned: another thread may start scoring with it in between and
    put its hooks on. It is copied under the lock, so the pickle never meets a hook."""
    import pickle
    import threading

    from skdbal.models._mc_masks import _row_keyed_dropout, mc_dropout_mode

    X, y = digits
    net = MCDropoutClassifier(_SlowPickledMLP(n_features=64, n_classes=10, hidden_layer_sizes=(16,)),
                              classes=np.arange(10), max_epochs=1, n_samples=8, random_state=0,
                              verbose=0).fit(X[:100], y[:100])
    _SlowPickledMLP.pickling, _SlowPickledMLP.hooked, _SlowPickledMLP.calls = threading.Event(), threading.Event(), 0
    done = threading.Event()

    def score():
        _SlowPickledMLP.pickling.wait(10)
        with mc_dropout_mode(net.module_), _row_keyed_dropout(net.module_, {"T": 1}):
            _SlowPickledMLP.hooked.set()
            done.wait(10)

    a = threading.Thread(target=score)
    a.start()
    try:
        blob = pickle.dumps(net)
    finally:
        done.set()
        a.join(10)
        _SlowPickledMLP.pickling = _SlowPickledMLP.hooked = None
    copy_ = pickle.loads(blob)
    assert not any(m._forward_hooks for m in copy_.module.modules())
    np.testing.assert_array_equal(copy_.predict_proba_samples(X[:5], n_samples=3),
                                  net.predict_proba_samples(X[:5], n_samples=3))


def test_a_pickle_names_the_classifier_at_its_path(fitted_net, digits):
    """Pickles name the classifier ``skdbal.models._mc_dropout.MCDropoutClassifier`` and nothing of the
    engine or the base (so the split moved nothing they reference)."""
    import pickle

    X, _ = digits
    blob = pickle.dumps(fitted_net, protocol=0)  # names as text: GLOBAL "c<module>\n<name>\n"
    assert b"cskdbal.models._mc_dropout\nMCDropoutClassifier\n" in blob
    assert b"_mc_base" not in blob and b"_mc_masks" not in blob
    loaded = pickle.loads(blob)
    assert type(loaded) is MCDropoutClassifier
    np.testing.assert_array_equal(loaded.predict_proba_samples(X[:5], n_samples=3),
                                  fitted_net.predict_proba_samples(X[:5], n_samples=3))
