import _helpers
import numpy as np
import pytest
import torch

# One torch thread: the test nets are far too small to split, and OpenMP threads
# spin-waiting beside another busy process made the suite several times slower.
torch.set_num_threads(1)


# The digits in the shapes the tests use, one fixture each (tests/_helpers.py loads them).
@pytest.fixture(scope="session")
def digits():
    """Digits as float32 (N, 8, 8) images in [0, 1]."""
    return _helpers.digits_images(dtype=np.float32)


@pytest.fixture(scope="module")
def flat_digits():
    """Digits as float64 (N, 64) rows in [0, 1]."""
    return _helpers.digits_flat()


@pytest.fixture(scope="module")
def flat_digits32():
    """Digits as float32 (N, 64) rows in [0, 1]."""
    return _helpers.digits_flat(dtype=np.float32)


@pytest.fixture(scope="module")
def digits64():
    """Digits as float64 (N, 8, 8) images in [0, 1]."""
    return _helpers.digits_images()


@pytest.fixture(scope="module")
def flat_digits300():
    """The first 300 digits as float64 (300, 64) rows in [0, 1]."""
    return _helpers.digits_flat(300)


@pytest.fixture(scope="session")
def small_net():
    """A factory of small, seeded MCDropoutClassifiers for digits: ``small_net(**params)``."""
    return _helpers.small_net


@pytest.fixture(scope="session")
def fitted_net(digits):
    X, y = digits
    return _helpers.small_net().fit(X[:300], y[:300])


@pytest.fixture(scope="session")
def mnist_home():
    """A folder holding mnist/ with the four IDX files (never downloaded in tests)."""
    for home in _helpers.mnist_candidates():
        if (home / "mnist" / "train-labels-idx1-ubyte.gz").is_file():
            return home
    pytest.skip("MNIST not found in " + ", ".join(f"{p}/mnist" for p in _helpers.mnist_candidates())
                + "; set SKDBAL_DATA to a folder holding mnist/, or run "
                "`python -c \"from skdbal.datasets import load_mnist; load_mnist()\"` once to download it")


@pytest.fixture(scope="session")
def row_keyed_reference():
    """:func:`_row_keyed_reference`, for tests."""
    return _row_keyed_reference


def _row_keyed_reference(clf, xb, T):
    """The ``(T, len(xb), C)`` passes that per-row masks must give, built by hand: each row's trunk
    output through the head, its masks drawn in layer order from a generator seeded by a hash of the
    row and the sampling seed (``random_state + 2``); one draw per element for ``nn.Dropout``, one per
    channel for ``nn.Dropout2d``.

    ``clf.mask_seeding == "row"``: a ``torch.Generator`` per row, ``T × units`` uniforms per layer,
    kept below ``keep``. ``"row_pcg64"`` (what ``"auto"`` is on the CPU): numpy's PCG64 per row,
    ``units × T`` bytes per layer (the little-endian bytes of its 64-bit outputs, unit-major), kept
    below ``256 · keep`` (a whole number for the p of these nets). ``"row_philox"``: unit ``u`` of
    pass ``t`` of the ``l``-th layer is byte ``u mod 4`` of word ``(u // 4) mod 4`` of
    Philox-4x32-10(counter=(u // 16, t, l, 0), key=(seed mod 2³², seed // 2³²)), kept below
    ``256 · keep``, computed with ``_helpers.philox4x32_reference``."""
    from torch import nn

    from skdbal.models._mc_masks import row_seeds

    module = clf.module_.eval()
    out = []
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(clf.random_state + 2)  # the sampling seed
        base = int(torch.randint(2**62, (1,)).item())
        seeding = clf.mask_seeding if clf.mask_seeding != "auto" else clf.mask_seeding_
        for i, seed in enumerate(row_seeds(xb, base)):
            gen = torch.Generator().manual_seed(seed)
            bitgen = np.random.PCG64(seed)
            h = module.trunk(torch.as_tensor(xb[i:i + 1]))
            h = h.expand(T, *h.shape[1:])
            layer = 0
            for m in module.head:
                if isinstance(m, nn.modules.dropout._DropoutNd):
                    keep = 1 - m.p
                    channel = type(m) is not nn.Dropout
                    shape = (T, h.shape[1]) + (1,) * (h.dim() - 2) if channel else (T,) + tuple(h.shape[1:])
                    if seeding == "row":
                        kept = torch.rand(shape, generator=gen) < keep
                    elif seeding == "row_philox":
                        assert keep * 256 == int(keep * 256)
                        units = int(np.prod(shape[1:]))
                        draws = [[_helpers.philox_byte(seed, t, layer, u) for u in range(units)] for t in range(T)]
                        kept = (torch.tensor(draws) < int(keep * 256)).reshape(shape)
                    else:
                        assert seeding == "row_pcg64" and keep * 256 == int(keep * 256)
                        units = int(np.prod(shape[1:]))
                        draws = bitgen.random_raw(-(-units * T // 8)).astype("<u8").view(np.uint8)
                        kept = torch.from_numpy(draws[:units * T].reshape(units, T).T < int(keep * 256))
                        kept = kept.reshape(shape)
                    h = h * kept / keep
                    layer += 1
                else:
                    h = m(h)
            out.append(torch.softmax(h, -1))
    return torch.stack(out, dim=1).numpy()

