"""Per-row mask generators (skdbal._row_masks): the PCG64 stream as defined, by hand; the fused
dropout–linear passes against the plain ones; which heads are fused."""
import numpy as np
import pytest
import torch
from torch import nn

import skdbal.models._mc_base as base
import skdbal.models._mc_masks as engine
from skdbal.models._row_masks import PCG64RowStreams, fused_linear, fused_linear_outputs, unit_threshold


@pytest.mark.parametrize("keep, dtype, threshold", [
    (0.75, np.uint8, 192), (0.5, np.uint8, 128), (0.875, np.uint8, 224),
    (1 - 1 / 1024, np.uint16, 65472),  # 1023/1024: not whole in 8 bits, whole in 16
    (0.9, np.uint32, 3865470566),  # round(0.9 * 2**32)
    (0.1, np.uint32, 429496730),
])
def test_unit_threshold_by_hand(keep, dtype, threshold):
    assert unit_threshold(keep) == (np.dtype(dtype), threshold)


def test_pcg64_draws_are_the_rows_bytes_unit_major():
    """Row r's layer of 3 units and T = 5 passes takes 15 bytes from the first two 64-bit outputs of
    PCG64(seed_r), little-endian; unit j's pass t is byte 5j + t; the next layer starts on a fresh
    output (the 16th byte is left over)."""
    seeds = [11, 2**62 + 5]
    streams = PCG64RowStreams(seeds)
    kept = streams.kept(5, 3, 0.75)
    nxt = streams.kept(2, 4, 0.5)  # 8 bytes: the third output
    for r, seed in enumerate(seeds):
        words = np.random.PCG64(seed).random_raw(3)
        raw = b"".join(int(w).to_bytes(8, "little") for w in words)
        np.testing.assert_array_equal(kept[r], np.frombuffer(raw[:15], np.uint8).reshape(3, 5) < 192)
        np.testing.assert_array_equal(nxt[r], np.frombuffer(raw[16:24], np.uint8).reshape(4, 2) < 128)


def test_pcg64_16_and_32_bit_units():
    keep16, keep32 = 1 - 1 / 1024, 0.9
    streams = PCG64RowStreams([3])
    k16 = streams.kept(3, 2, keep16)  # 6 units of 2 bytes: 12 bytes, two outputs
    k32 = streams.kept(1, 3, keep32)  # 3 units of 4 bytes: 12 bytes, two outputs
    words = np.random.PCG64(3).random_raw(4)
    raw = b"".join(int(w).to_bytes(8, "little") for w in words)
    np.testing.assert_array_equal(k16[0], np.frombuffer(raw[:12], "<u2").reshape(2, 3) < 65472)
    np.testing.assert_array_equal(k32[0], np.frombuffer(raw[16:28], "<u4").reshape(3, 1) < 3865470566)


@pytest.mark.parametrize("keep", [0.75, 0.5, 0.9, 0.1])
def test_pcg64_keep_rate_and_scale(keep):
    masks = PCG64RowStreams(range(50)).masks(40, (6, 1), keep, "cpu")
    assert masks.shape == (50, 40, 6, 1)
    kept = masks != 0
    assert abs(kept.float().mean().item() - keep) < 4 * np.sqrt(keep * (1 - keep) / kept.numel())
    np.testing.assert_allclose(masks[kept].numpy(), 1 / keep, rtol=1e-6)


def _head(first: list, n_in=12, n_out=5):
    return nn.Sequential(*first, nn.Linear(n_in, 7), nn.ReLU(), nn.Dropout(0.5), nn.Linear(7, n_out))


def test_which_heads_are_fused():
    flat = torch.zeros(2, 12)
    image = torch.zeros(2, 3, 2, 2)
    assert fused_linear(_head([nn.Dropout(0.25), nn.Flatten()]), image, 10**4) == 2  # BayesianCNN's head
    assert fused_linear(_head([nn.Flatten(), nn.Dropout(0.25)]), image, 10**4) == 2
    assert fused_linear(_head([nn.Dropout(0.25)]), flat, 10**4) == 1  # an MLP's: flat input, no Flatten
    assert fused_linear(_head([nn.Dropout(0.25)]), image, 10**4) == 0  # Linear on the last axis of an image
    assert fused_linear(_head([nn.Dropout(0.0), nn.Flatten()]), image, 10**4) == 0  # no draws to fold
    assert fused_linear(_head([nn.Dropout(1.0), nn.Flatten()]), image, 10**4) == 0
    assert fused_linear(_head([nn.Dropout2d(0.25), nn.Flatten()]), image, 10**4) == 0  # channel masks
    assert fused_linear(_head([nn.Dropout(0.25), nn.Flatten(start_dim=2)]), image, 10**4) == 0

    class Sub(nn.Dropout):
        pass

    assert fused_linear(_head([Sub(0.25), nn.Flatten()]), image, 10**4) == 0  # a subclass runs its own forward
    assert fused_linear(nn.Sequential(nn.Dropout(0.25), nn.Flatten(), nn.ReLU()), image, 10**4) == 0


def test_fused_linear_outputs_by_hand():
    """z[r, t] = W (m_rt ⊙ x_r) / keep + b, with m_rt the row's draws; a zero row gives the bias."""
    torch.manual_seed(0)
    head = _head([nn.Dropout(0.25), nn.Flatten()])
    h = torch.relu(torch.randn(3, 3, 2, 2))
    h[1] = 0.0
    T = 6
    z = fused_linear_outputs(head, 2, h, PCG64RowStreams([1, 2, 3]), T)
    kept = PCG64RowStreams([1, 2, 3]).kept(T, 12, 0.75)
    lin = head[2]
    for r in range(3):
        for t in range(T):
            x = h[r].reshape(-1) * torch.from_numpy(kept[r, :, t]).float() / 0.75
            torch.testing.assert_close(z[r, t], lin(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(z[1], lin.bias.expand(T, 7))


@pytest.mark.parametrize("first, shape", [
    ([nn.Dropout(0.25), nn.Flatten()], (3, 2, 2)),
    ([nn.Flatten(), nn.Dropout(0.1)], (3, 2, 2)),  # 32-bit draws
    ([nn.Dropout(0.5)], (12,)),
])
def test_fused_passes_equal_plain_passes(first, shape, monkeypatch):
    """The row-keyed passes with the first dropout and linear layer fused equal the plain passes
    through the dropout hook, drawing the same masks (also for the dropout after them)."""
    torch.manual_seed(0)
    head = _head(first)
    h = torch.relu(torch.randn((9,) + shape))
    h[4] = 0.0
    seeds = list(range(100, 109))
    k = fused_linear(head, h, 10**4)
    assert k
    with torch.no_grad():
        fused = engine._row_keyed_linear_passes(head, k, h, seeds, 7, rows_per_call=20)  # groups of 2 rows
        plain = engine._row_keyed_passes(head, head, h, seeds, 7, 20, streams_for=PCG64RowStreams)
    assert fused.shape == (7, 9, 5)
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)


def test_default_sampling_takes_the_fused_path_and_equals_the_plain_one(fitted_net, digits, monkeypatch):
    X, _ = digits
    assert fitted_net.mask_seeding == "auto" and fitted_net.mask_seeding_ == "row_pcg64"  # on the CPU
    monkeypatch.setattr("skdbal.models._row_masks._FUSE_MIN_DRAWS", 1)  # the digits net is below it
    calls = []
    real = engine._row_keyed_linear_passes
    monkeypatch.setattr(base, "_row_keyed_linear_passes", lambda *a, **k: calls.append(1) or real(*a, **k))
    P = fitted_net.predict_proba_samples(X[:40], n_samples=6)
    assert calls
    monkeypatch.setattr(base, "fused_linear", lambda head, h, T: 0)
    Q = fitted_net.predict_proba_samples(X[:40], n_samples=6)
    np.testing.assert_allclose(P, Q, rtol=1e-5, atol=1e-6)
