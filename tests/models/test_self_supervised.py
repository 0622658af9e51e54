"""The encoder learnt from the unlabelled pool: its losses against values computed by hand, its training
(repeatable under a seed, lowering the loss, bringing two views of an image together) and scikit-learn's
contract, on pools of a few hundred tiny images."""
import math
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdbal.models import EmbeddingCache, PoolEncoder, StaleEmbeddingsError
from skdbal.models._encoders import module_sha256
from skdbal.models._self_supervised import augment_images, nt_xent_loss, vicreg_loss

TINY = dict(width=4, projection_dim=8, max_epochs=1, batch_size=16, random_state=0)


def digits(n=300):
    X, y = load_digits(return_X_y=True)
    return (X[:n] / 16).reshape(-1, 8, 8).astype(np.float32), y[:n]


# ------------------------------------------------------------------------------------------------ losses
def test_nt_xent_of_two_orthogonal_pairs_by_hand():
    # rows e1, e2 (view 1) and e1, e2 (view 2): row e1's positive has cosine 1, its two negatives (e2, e2) 0
    z = torch.eye(2)
    assert nt_xent_loss(z, z.clone(), temperature=1.0).item() == pytest.approx(math.log(1 + 2 / math.e))
    assert nt_xent_loss(z, z.clone(), temperature=0.5).item() == pytest.approx(math.log(1 + 2 / math.e ** 2))
    # a view that points at the other image: its positive has cosine 0, one negative 1
    swapped = torch.eye(2)[[1, 0]]
    assert nt_xent_loss(z, swapped, temperature=1.0).item() == pytest.approx(math.log(2 + math.e))


def test_vicreg_of_equal_views_is_the_covariance_term_by_hand():
    z = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])
    # invariance 0 (equal views); each dimension's std sqrt(2) > 1: no variance hinge; covariance
    # [[2, -2], [-2, 2]]: off-diagonal squares 8, over 2 dimensions, for each of the two views
    assert vicreg_loss(z, z.clone()).item() == pytest.approx(8.0)
    # shifting one view by 1 everywhere adds the invariance term 25 * mean((1)^2) only
    assert vicreg_loss(z, z + 1).item() == pytest.approx(8.0 + 25.0)


def test_augmentations_are_drawn_from_the_generator_and_erase_to_zero():
    x = torch.rand(6, 1, 10, 10)
    a = augment_images(x, torch.Generator().manual_seed(3))
    b = augment_images(x, torch.Generator().manual_seed(3))
    c = augment_images(x, torch.Generator().manual_seed(4))
    assert a.shape == x.shape and torch.equal(a, b) and not torch.equal(a, c)
    # no warp (the whole image, no rotation), no noise, always erased: a rectangle of exact zeros
    out = augment_images(torch.ones(4, 1, 10, 10), torch.Generator().manual_seed(0), crop_scale=(1.0, 1.0),
                         max_rotation=0.0, noise=0.0, erase=1.0)
    for image in out[:, 0]:
        zeros = (image == 0).nonzero()
        rows, cols = zeros[:, 0].unique(), zeros[:, 1].unique()
        assert len(zeros) == len(rows) * len(cols) >= 4      # a full rectangle, at least 2 x 2
        assert 0.2 * 10 - 1 <= len(rows) <= 5 and 0.2 * 10 - 1 <= len(cols) <= 5


# ---------------------------------------------------------------------------------------------- training
@pytest.mark.parametrize("method", ["simclr", "vicreg"])
def test_rows_grey_images_and_channel_first_images_give_the_same_embedding(method):
    X, _ = digits(64)
    Z = PoolEncoder(method, **TINY).fit(X).transform(X)
    assert Z.shape == (64, 16) and Z.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1, atol=1e-5)
    rows = PoolEncoder(method, **TINY).fit(X.reshape(64, 64))
    assert rows.n_features_in_ == 64 and rows.n_features_out_ == 16
    np.testing.assert_array_equal(rows.transform(X.reshape(64, 64)), Z)
    np.testing.assert_array_equal(PoolEncoder(method, **TINY).fit(X[:, None]).transform(X[:, None]), Z)


def test_steps_epochs_and_unnormalised_features():
    X, _ = digits(100)
    encoder = PoolEncoder(**{**TINY, "max_epochs": 2.5, "normalize": False}).fit(X)
    assert encoder.n_steps_ == math.ceil(2.5 * (100 // 16)) == 15
    assert encoder.n_epochs_ == pytest.approx(15 * 16 / 100)
    assert len(encoder.loss_curve_) == 3                      # 6 + 6 + 3 steps
    assert not np.allclose(np.linalg.norm(encoder.transform(X), axis=1), 1)


def test_the_same_seed_gives_the_same_encoder_and_the_global_torch_state_is_untouched():
    X, _ = digits(64)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    threads = torch.get_num_threads()
    a = PoolEncoder(**TINY, n_threads=1).fit(X)
    assert torch.equal(torch.rand(3), expected)               # fit draws from its own generators
    assert torch.get_num_threads() == threads                 # and puts the threads back
    b = PoolEncoder(**TINY).fit(X)
    c = PoolEncoder(**{**TINY, "random_state": 1}).fit(X)
    assert a.loss_curve_ == b.loss_curve_
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    assert not np.allclose(a.transform(X), c.transform(X))
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_max_time_stops_training_after_the_step_that_crosses_it():
    X, _ = digits(64)
    encoder = PoolEncoder(**{**TINY, "max_epochs": 100, "max_time": 1e-9}).fit(X)
    assert encoder.n_steps_ == 1 and len(encoder.loss_curve_) == 1


def test_training_lowers_the_loss_and_brings_two_views_of_an_image_together():
    X, _ = digits(256)
    kw = dict(width=8, projection_dim=16, batch_size=64, learning_rate=5e-3, random_state=0)
    untrained = PoolEncoder(**kw, max_epochs=1e-9).fit(X)     # one step: nearly the initial network
    trained = PoolEncoder(**kw, max_epochs=40).fit(X)
    assert trained.loss_curve_[-1] < 0.8 * trained.loss_curve_[0]

    def nearer(encoder):
        """How often a random view of an image is nearer (cosine) to it than to another image of the pool,
        and how often the image is the view's nearest of the whole pool."""
        views = augment_images(torch.from_numpy(X[:, None]), torch.Generator().manual_seed(9))
        Zv, Z = encoder.transform(views[:, 0].numpy()), encoder.transform(X)
        similarity = Zv @ Z.T
        own = np.diag(similarity)
        return float(np.mean(own[:, None] > np.delete(similarity, np.arange(0, 256 * 256, 257)).reshape(256, 255))), \
            float(np.mean(similarity.argmax(1) == np.arange(len(X))))

    (before, top1_before), (after, top1_after) = nearer(untrained), nearer(trained)
    assert after > 0.9 and after > before + 0.05, (before, after)
    # chance: 1 / 256; the untrained network's features already find some light views' images
    assert top1_after > 2 * top1_before and top1_after > top1_before + 0.15, (top1_before, top1_after)


# ----------------------------------------------------------------------------------------- the contract
def test_clone_get_params_and_pickle():
    X, _ = digits(64)
    encoder = PoolEncoder("vicreg", **TINY)
    assert clone(encoder).get_params() == encoder.get_params()
    encoder.fit(X)
    assert not hasattr(clone(encoder), "module_")
    again = pickle.loads(pickle.dumps(encoder))
    np.testing.assert_array_equal(again.transform(X), encoder.transform(X))
    assert again.fingerprint() == encoder.fingerprint()


def test_the_fingerprint_keys_the_cache_by_the_trained_weights(tmp_path):
    X, _ = digits(64)
    encoder = PoolEncoder(**TINY).fit(X)
    fp = encoder.fingerprint()
    assert fp["sha256"] == module_sha256(encoder.module_)
    assert fp["params"]["method"] == "simclr" and fp["params"]["batch_size"] == 16
    assert not {"device", "n_threads", "verbose", "max_time"} & set(fp["params"])
    cache = EmbeddingCache(tmp_path / "embeddings.npy")
    np.testing.assert_array_equal(cache.get(encoder, X), encoder.transform(X))
    np.testing.assert_array_equal(cache.get(clone(encoder).set_params(n_threads=1).fit(X), X),
                                  encoder.transform(X))        # same weights: read back
    with pytest.raises(StaleEmbeddingsError, match="sha256"):
        cache.get(clone(encoder).set_params(random_state=1).fit(X), X)   # other weights: refused


@pytest.mark.parametrize("params, message", [
    ({"method": "byol"}, "method must be one of"),
    ({"width": 0}, "width must be a positive integer"),
    ({"batch_size": 1}, "batch_size must be at least 2"),
    ({"max_epochs": 0}, "max_epochs must be a positive number"),
    ({"crop_scale": (0.5, 1.5)}, "crop_scale must be"),
    ({"n_threads": 0}, "n_threads must be a positive integer"),
    ({"max_time": -1}, "max_time must be a positive number"),
])
def test_bad_parameters_are_refused_by_name(params, message):
    X, _ = digits(32)
    with pytest.raises(ValueError, match=message):
        PoolEncoder(**{**TINY, **params}).fit(X)


def test_one_sample_and_a_missing_gpu_are_refused():
    X, _ = digits(32)
    with pytest.raises(ValueError, match="n_samples = 1"):
        PoolEncoder(**TINY).fit(X[:1])
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            PoolEncoder(**TINY, device="cuda").fit(X)


@parametrize_with_checks([PoolEncoder(width=2, projection_dim=4, max_epochs=1, batch_size=16, random_state=0)])
def test_scikit_learn_contract(estimator, check):
    check(estimator)


def test_a_pickled_encoder_carries_its_network_on_the_cpu_and_moves_with_device():
    X, _ = digits(32)
    encoder = PoolEncoder(**TINY).fit(X)
    state = encoder.__getstate__()
    assert all(p.device.type == "cpu" for p in state["module_"].parameters())
    assert state["module_"] is not encoder.module_            # a copy: the fitted encoder is untouched
    encoder.set_params(device="cpu", n_threads=1)             # settings that leave the embedding as it is
    np.testing.assert_array_equal(encoder.transform(X), pickle.loads(pickle.dumps(encoder)).transform(X))
