"""Counter-based masks (skdbal.models._philox, ``mask_seeding="row_philox"``): Philox-4x32-10 against
Random123's known answers and a plain-Python reference; the units' bits as specified, for every draw
width; their rate; and the sampling paths (trunk once, factored convolution, no split, consistent masks)
with them."""
import numpy as np
import pytest
import torch
from _helpers import philox4x32_reference

import skdbal.models._mc_base as base
from skdbal import MCDropoutClassifier, MCDropoutRegressor
from skdbal.models._philox import PhiloxRowStreams, philox4x32, philox_kept
from skdbal.models._row_masks import unit_threshold

M = 0xFFFFFFFF
#: Random123's known-answer vectors for Philox-4x32-10 (kat_vectors): counter, key, output.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((M, M, M, M), (M, M), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter, key, expected", KAT)
def test_philox_known_answers(counter, key, expected):
    assert philox4x32_reference(counter, key) == expected  # the reference as Random123 defines it
    words = philox4x32([torch.tensor(c) for c in counter], [torch.tensor(k) for k in key])
    assert tuple(int(w) for w in words) == expected


def test_philox_tensors_equal_the_reference_on_random_words():
    """Every word of 500 random 32-bit counters and keys, broadcast as rows × passes × blocks would be."""
    rng = np.random.RandomState(0)
    c = rng.randint(0, 2**32, size=(4, 500), dtype=np.uint64).astype(np.int64)
    k = rng.randint(0, 2**32, size=(2, 500), dtype=np.uint64).astype(np.int64)
    c[:, :3] = [[M, 0, 2**31], [M, 0, 2**31 - 1], [M, 1, 2**31], [M, 0, 1]]  # the edges of the range
    got = torch.stack(philox4x32([torch.from_numpy(x) for x in c], [torch.from_numpy(x) for x in k])).numpy()
    for i in range(500):
        assert tuple(got[:, i]) == philox4x32_reference(tuple(int(x) for x in c[:, i]), tuple(int(x) for x in k[:, i]))
    assert got.min() >= 0 and got.max() <= M


@pytest.mark.parametrize("keep, width", [(0.75, 8), (0.5, 8), (1 - 1 / 1024, 16), (0.9, 32), (0.1, 32)])
def test_kept_units_are_the_specified_bits(keep, width):
    """Unit u of pass t in layer l: lane u mod (32/w) of word (u // (32/w)) mod 4 of
    Philox(counter=(u // (128/w), t, l, 0), key=(s mod 2³², s // 2³²)), kept when below keep · 2ʷ
    (unit_threshold), for units that do not fill the last block too."""
    _, threshold = unit_threshold(keep)
    seeds = [0, 12345, 2**63 - 1, 2**62 + 99]
    T, units, layer = 3, 37, 2
    kept = philox_kept(torch.tensor(seeds), T, units, layer, keep)
    assert kept.shape == (4, T, units) and kept.dtype == torch.bool
    per_word = 32 // width
    for r, s in enumerate(seeds):
        for t in range(T):
            for u in range(units):
                words = philox4x32_reference((u // (4 * per_word), t, layer, 0), (s % 2**32, s >> 32))
                draw = (words[(u // per_word) % 4] >> (width * (u % per_word))) & ((1 << width) - 1)
                assert bool(kept[r, t, u]) == (draw < threshold), (r, t, u)


def test_masks_count_layers_and_scale_kept_units():
    streams = PhiloxRowStreams([5, 6], "cpu")
    first = streams.masks(4, (3, 2), 0.75, "cpu")
    second = streams.masks(4, (3, 2), 0.75, "cpu")
    assert streams.layer == 2 and first.shape == (2, 4, 3, 2)
    kept0 = philox_kept(torch.tensor([5, 6]), 4, 6, 0, 0.75).reshape(2, 4, 3, 2)
    kept1 = philox_kept(torch.tensor([5, 6]), 4, 6, 1, 0.75).reshape(2, 4, 3, 2)
    torch.testing.assert_close(first, kept0.float() / 0.75, rtol=0, atol=0)
    torch.testing.assert_close(second, kept1.float() / 0.75, rtol=0, atol=0)
    assert not torch.equal(kept0, kept1)


@pytest.mark.parametrize("keep", [0.75, 0.5, 1 - 1 / 1024, 0.9, 0.1])
def test_keep_rate_within_a_binomial_bound(keep):
    kept = philox_kept(torch.arange(200) * 7919, 50, 100, 0, keep)
    n = kept.numel()
    assert abs(kept.float().mean().item() - keep) < 5 * np.sqrt(keep * (1 - keep) / n)
    # no unit, pass or row is stuck: each keeps at its rate up to a wide bound
    for axis in (0, 1, 2):
        rate = kept.float().mean(dim=[a for a in (0, 1, 2) if a != axis])
        m = n / rate.numel()
        assert (rate - keep).abs().max().item() < 6 * np.sqrt(keep * (1 - keep) / m) + 1e-9


def test_a_rows_bits_do_not_depend_on_its_neighbours_or_order():
    keys = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
    all_rows = philox_kept(keys, 6, 40, 1, 0.75)
    perm = torch.tensor([7, 2, 0, 5])
    assert torch.equal(philox_kept(keys[perm], 6, 40, 1, 0.75), all_rows[perm])
    assert torch.equal(all_rows[1], all_rows[3])  # equal keys, equal bits
    # more passes or units extend a row's bits without changing the first ones
    assert torch.equal(philox_kept(keys, 9, 50, 1, 0.75)[:, :6, :40], all_rows)


@pytest.fixture
def philox_net(fitted_net):
    yield fitted_net.set_params(mask_seeding="row_philox")
    fitted_net.set_params(mask_seeding="auto", batch_size=32)


def test_chunks_and_batches_do_not_change_the_passes(philox_net, digits):
    """Batch sizes, row groups of the head (``_HEAD_ROWS``) and the pool's order give a row the same
    passes (the same bits; the float products may round differently by batch shape)."""
    X, _ = digits
    P = philox_net.set_params(batch_size=300).predict_proba_samples(X[:60], n_samples=12)
    Q = philox_net.set_params(batch_size=7).predict_proba_samples(X[:60][::-1], n_samples=12)[:, ::-1]
    np.testing.assert_allclose(Q, P, rtol=1e-5, atol=1e-7)
    old = MCDropoutClassifier._HEAD_ROWS
    try:
        MCDropoutClassifier._HEAD_ROWS = 12 * 5  # groups of 5 rows
        R = philox_net.predict_proba_samples(X[:60], n_samples=12)
    finally:
        MCDropoutClassifier._HEAD_ROWS = old
    np.testing.assert_allclose(R, P, rtol=1e-5, atol=1e-7)


def test_the_full_passes_draw_what_the_trunk_once_passes_draw(philox_net, digits, monkeypatch):
    """Without a trunk/head split the whole net runs T times, every dropout drawing through the hook:
    the same masks as the trunk-cached passes."""
    X, _ = digits
    P = philox_net.predict_proba_samples(X[:20], n_samples=6)
    monkeypatch.setattr(base, "verified_split", lambda module, x=None: None)
    Q = philox_net.predict_proba_samples(X[:20], n_samples=6)
    np.testing.assert_allclose(Q, P, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("consistent", [False, True])
def test_factored_convolution_with_philox_masks(consistent, monkeypatch):
    """KirschCNN's factored first convolution draws the channel masks of the hook (layer 0), then the
    later layers theirs: the plain passes again; consistent masks ignore the seeding."""
    from skdbal.models import KirschCNN

    rng = np.random.RandomState(0)
    X = rng.rand(30, 1, 28, 28).astype(np.float32)
    clf = MCDropoutClassifier(KirschCNN, max_epochs=1, random_state=0, n_samples=5, mask_seeding="row_philox",
                              consistent_masks=consistent).fit(X, np.arange(30) % 3)
    P = clf.predict_proba_samples(X)
    assert not np.allclose(P[0], P[1])
    if consistent:
        np.testing.assert_array_equal(P, clf.set_params(mask_seeding="row_pcg64").predict_proba_samples(X))
        clf.set_params(mask_seeding="row_philox")
    monkeypatch.setattr(base, "_factored_conv", lambda head: 0)
    np.testing.assert_allclose(clf.predict_proba_samples(X), P, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(clf.predict_proba_samples(X[7:9]), P[:, 7:9], rtol=1e-5, atol=1e-6)


def test_regressor_rows_keep_their_passes():
    rng = np.random.RandomState(0)
    X = rng.rand(80, 5).astype(np.float32)
    y = X @ rng.rand(5)
    reg = MCDropoutRegressor(max_epochs=3, random_state=0, mask_seeding="row_philox", n_samples=7).fit(X, y)
    S = reg.predict_samples(X)
    perm = rng.permutation(80)
    np.testing.assert_allclose(reg.set_params(batch_size=9).predict_samples(X[perm])[:, np.argsort(perm)], S,
                               rtol=1e-5, atol=1e-6)
    assert reg.mask_seeding_ == "row_philox" and reg.row_keyed_samples


def test_auto_resolves_at_fit(fitted_net, digits):
    X, _ = digits
    assert fitted_net.mask_seeding == "auto" and fitted_net.mask_seeding_ == "row_pcg64"
    P = fitted_net.predict_proba_samples(X[:10], n_samples=4)
    np.testing.assert_array_equal(P, fitted_net.set_params(mask_seeding="row_pcg64").predict_proba_samples(
        X[:10], n_samples=4))
    fitted_net.set_params(mask_seeding="auto")
    with pytest.raises(ValueError, match="mask_seeding must be one of 'auto', 'row_pcg64'"):
        MCDropoutClassifier(mask_seeding="philox").fit(X[:20], np.arange(20) % 2)


def test_masks_are_made_on_the_keys_device():
    """Nothing but the keys crosses to the device: the counters are made there (meta tensors stand in
    for a device here, computing shapes only)."""
    keys = torch.tensor([1, 2], device="meta")
    assert philox_kept(keys, 3, 20, 0, 0.75).device.type == "meta"
    assert PhiloxRowStreams([1, 2], "meta").masks(3, (20,), 0.75, "meta").device.type == "meta"
