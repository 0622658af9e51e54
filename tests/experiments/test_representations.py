"""Grids on a representation: an encoder's embeddings and a Bayesian head, beside the network on the pixels."""
import json

import numpy as np
import pytest

from skdbal.experiments import RunSpec, get_preset, load_data, run_grid
from skdbal.experiments.factories import split_indices
from skdbal.experiments.specs import grid_specs
from skdbal.models import PoolEncoder

TINY = dict(dataset="digits", n_queries=2, max_epochs=2, n_samples=4, pool_subsample=100, n_validation=50,
            module_params={"kernel_size": 3})


def _by_run(rows):
    out = {}
    for r in rows:
        out.setdefault((r["strategy"], r["variant"], r["seed"]), []).append(
            (r["step"], r["n_labels"], r["accuracy"], r["query_indices"]))
    return out


def test_a_run_on_the_pixels_keeps_its_name_and_configuration():
    """The settings are recorded only for a representation's runs: the runs on the pixels keep the name and the
    configuration they had, so the committed grids resume and report as before."""
    spec = RunSpec(get_preset("gal2017"), "bald", 1)
    assert spec.run_id == "gal2017__bald__bayesian__seed1"
    assert sorted(spec.config()) == ["mc_dropout", "preset", "results_version", "seed", "strategy",
                                     "strategy_object"]
    _, arguments = grid_specs(get_preset("gal2017"), ["bald"], [1])
    assert sorted(arguments) == ["deterministic_baseline", "ensemble", "initial_sets", "last_layer",
                                 "noise_rates", "seeds", "strategies"]
    pool = RunSpec(get_preset("gal2017"), "bald", 1, representation="pool", head="bll", encoder_epochs=2)
    assert pool.run_id == "gal2017__bald__pool-bll__seed1"
    assert {k: pool.config()[k] for k in ("representation", "head", "encoder_epochs")} == {
        "representation": "pool", "head": "bll", "encoder_epochs": 2}
    kmeans = RunSpec(get_preset("gal2017"), "bald", 1, representation="pca", initial_set="kmeans")
    assert kmeans.variant == "pca-mc_dropout-init-kmeans"


def test_the_pool_encoder_is_learnt_once_per_seed_and_its_runs_repeat(tmp_path, monkeypatch):
    """Every strategy of a seed reads the embeddings of one encoder, learnt once (also across grids into the same
    folder), and a grid in another folder gives the same rows."""
    fits = []
    original = PoolEncoder.fit

    def counted(self, X, y=None):
        fits.append(len(X))
        return original(self, X, y)

    monkeypatch.setattr(PoolEncoder, "fit", counted)
    kwargs = dict(representations=["pool"], head="mc_dropout", encoder_epochs=0.5, torch_threads=1, verbose=False,
                  **TINY)
    rows = run_grid("gal2017", ["bald", "random"], [1, 2], tmp_path / "a", **kwargs)
    n_pool = 1297 - 50   # digits' training images less the validation set
    assert fits == [n_pool, n_pool]               # one encoder per seed, learnt on the pool's images
    run_grid("gal2017", ["max_entropy"], [1], tmp_path / "a", **kwargs)
    assert len(fits) == 2                          # a later grid in the folder reads the same embeddings
    folders = sorted((tmp_path / "a" / "cache" / "representations").iterdir())
    assert len(folders) == 2 and all((f / "train.npy").is_file() and (f / "test.npy").is_file() for f in folders)
    runs = _by_run(rows)
    assert sorted(runs) == [(s, "pool-mc_dropout", seed) for s in ("bald", "random") for seed in (1, 2)]
    for (strategy, _, seed), steps in runs.items():
        assert [(step, n) for step, n, _, _ in steps] == [(0, 20), (1, 30), (2, 40)]
        other = runs[("random" if strategy == "bald" else "bald", "pool-mc_dropout", seed)]
        assert steps[0][2] == other[0][2]          # step 0: the same labels, the same head
    again = _by_run(run_grid("gal2017", ["bald", "random"], [1, 2], tmp_path / "b", **kwargs))
    assert again == runs                           # the seed decides everything
    assert len(fits) == 4


def test_a_grid_compares_the_pixels_and_a_representation_on_the_same_seeds(tmp_path):
    """One grid, one folder: the network's runs and the head's on PCA start from the same labels."""
    rows = run_grid("gal2017", ["bald"], [3], tmp_path, representations=["none", "pca"], head="bll",
                    torch_threads=1, verbose=False, **TINY)
    runs = _by_run(rows)
    assert sorted(runs) == [("bald", "bayesian", 3), ("bald", "pca-bll", 3)]
    _, _, initial, _ = split_indices(get_preset("gal2017", **TINY), 3, load_data("digits")[1], 500)
    for steps in runs.values():   # the first row's queried points: the initial set
        assert sorted(map(int, steps[0][3].split())) == sorted(initial.tolist())
    config = json.loads((tmp_path / "runs" / "gal2017__bald__pca-bll__seed3.json").read_text())
    assert (config["representation"], config["head"]) == ("pca", "bll") and "encoder_epochs" not in config
    assert "representation" not in json.loads((tmp_path / "runs" / "gal2017__bald__bayesian__seed3.json").read_text())
    grid = json.loads((tmp_path / "grid.json").read_text())
    assert grid["invocations"][-1]["representations"] == ["none", "pca"]


def test_embeddings_from_a_file_are_what_the_head_learns_on(tmp_path):
    """``file:PATH``: the rows of a .npy, training images then test images. Embeddings that are the labels
    themselves (one-hot) are classified without an error from the first step."""
    X_train, y_train, X_test, y_test = load_data("digits")
    Z = np.eye(10, dtype=np.float32)[np.concatenate([y_train, y_test])]
    np.save(tmp_path / "labels.npy", Z)
    rows = run_grid("gal2017", ["bald"], [1], tmp_path / "out", representations=[f"file:{tmp_path / 'labels.npy'}"],
                    head="bll", torch_threads=1, verbose=False, **TINY)
    assert {r["variant"] for r in rows} == {"file-labels-bll"}
    assert [r["accuracy"] for r in rows] == [1.0, 1.0, 1.0]
    np.save(tmp_path / "short.npy", Z[:100])
    with pytest.raises(ValueError, match=r"shape \(100, 10\); a representation file holds one row per training "
                                         r"image then one per test image, \(1797, D\)"):
        run_grid("gal2017", ["bald"], [1], tmp_path / "short", representations=[f"file:{tmp_path / 'short.npy'}"],
                 torch_threads=1, verbose=False, **TINY)


def test_an_encoder_file_embeds_the_unit_pixels_and_a_bad_one_is_refused_naming_it(tmp_path):
    """``file:PATH`` to a TorchScript file (skdbal.models.load_encoder): the embedding of an image is what the
    network computes from its pixels in [0, 1], here their sum and their first pixel; a file that is no
    network is refused in one line naming it."""
    import warnings

    import torch

    from skdbal.experiments.representations import embed_run_data

    class SumAndFirst(torch.nn.Module):
        def forward(self, x):
            flat = x.flatten(1)
            return torch.stack([flat.sum(1), flat[:, 0]], 1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(SumAndFirst()).save(str(tmp_path / "enc.pt"))
    X_train = np.full((6, 2, 2), 255, np.uint8)
    X_train[:, 0, 0] = np.arange(6) * 51           # first pixels 0, 0.2, ..., 1.0 in [0, 1]
    X_test = np.zeros((2, 2, 2), np.uint8)
    spec = RunSpec(get_preset("gal2017"), "bald", 1, representation=f"file:{tmp_path / 'enc.pt'}", head="bll")
    Z_train, Z_test = embed_run_data(spec, X_train, X_test, np.arange(4), tmp_path / "out")
    first = np.arange(6) * 0.2
    np.testing.assert_allclose(Z_train, np.stack([3 + first, first], 1), rtol=1e-6)
    np.testing.assert_allclose(Z_test, np.zeros((2, 2)))
    (tmp_path / "notes.pt").write_text("not a network")
    spec = RunSpec(get_preset("gal2017"), "bald", 1, representation=f"file:{tmp_path / 'notes.pt'}", head="bll")
    with pytest.raises(ValueError, match=rf"^{tmp_path}/notes.pt: not a TorchScript file \(torch.jit.save\) nor an "
                                         r"exported program \(.pt2\); save the network with torch.jit.save"):
        embed_run_data(spec, X_train, X_test, np.arange(4), tmp_path / "bad")


@pytest.mark.parametrize("kwargs, message", [
    ({"representations": ["simclr"]}, "unknown representation 'simclr'"),
    ({"representations": ["pool"], "head": "svm"}, "unknown head 'svm'"),
    ({"representations": ["pool"], "laplace": True}, "cannot be combined with it"),
    ({"representations": ["pca"], "ensemble": 3}, "cannot be combined with it"),
    ({"representations": ["pool"], "encoder_epochs": 0}, "encoder_epochs must be a number > 0; got 0"),
    ({"representations": "pool"}, "must be a list of names"),
    ({"head": "bll"}, "no representation but 'none'"),
])
def test_bad_representation_settings_are_refused_before_a_run(tmp_path, kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        run_grid("gal2017", ["bald"], [1], tmp_path, torch_threads=1, verbose=False, **{**TINY, **kwargs})
    assert not (tmp_path / "runs").exists()


def test_a_representation_refuses_what_only_the_network_has():
    preset = get_preset("gal2017", **TINY)
    with pytest.raises(ValueError, match="reads the feature density of a network"):
        grid_specs(preset, ["ddu"], [1], representations=["pca"])
    with pytest.raises(ValueError, match="warm_epochs is the network's"):
        grid_specs(preset.replace(warm_epochs=2), ["bald"], [1], representations=["pca"])


def test_a_resumed_run_on_a_representation_ends_as_an_uninterrupted_one(tmp_path):
    """No weights are cached for a head: a resumed run refits the head of its last step from the step's seed,
    and ends with the rows of a run that was never stopped."""
    kwargs = dict(representations=["pca"], head="mc_dropout", torch_threads=1, verbose=False)
    whole = _by_run(run_grid("gal2017", ["bald"], [2], tmp_path / "whole", **kwargs, **TINY))
    run_grid("gal2017", ["bald"], [2], tmp_path / "cut", **kwargs, **{**TINY, "n_queries": 1})
    assert not list((tmp_path / "cut" / "runs").glob("*.pt"))
    resumed = _by_run(run_grid("gal2017", ["bald"], [2], tmp_path / "cut", **kwargs, **TINY))
    assert resumed == whole


def test_a_k_means_initial_set_is_found_in_the_embedding(tmp_path):
    """``initial_sets=["kmeans"]`` on a representation: the points nearest the centroids of the pool's
    embeddings, not of its pixels."""
    from skdbal.initial import kmeans_representative

    X_train, y_train, X_test, y_test = load_data("digits")
    rng = np.random.RandomState(0)
    Z = rng.rand(len(X_train) + len(X_test), 3).astype(np.float32)
    np.save(tmp_path / "z.npy", Z)
    rows = run_grid("gal2017", ["random"], [1], tmp_path / "out", representations=[f"file:{tmp_path / 'z.npy'}"],
                    initial_sets=["kmeans"], head="bll", torch_threads=1, verbose=False, **{**TINY, "n_queries": 0})
    preset = get_preset("gal2017", **TINY)
    rng = np.random.RandomState(1)   # split_indices' draws: the permutation, then the k-means
    pool = rng.permutation(len(y_train))[preset.n_validation:]
    expected = pool[kmeans_representative(Z[pool], n_clusters=20, random_state=rng)]
    assert sorted(map(int, rows[0]["query_indices"].split())) == sorted(expected.tolist())
    rng = np.random.RandomState(1)
    rng.permutation(len(y_train))
    pixels = pool[kmeans_representative(X_train[pool], n_clusters=20, random_state=rng)]
    assert sorted(expected.tolist()) != sorted(pixels.tolist())


@pytest.mark.parametrize("head", ["laplace", "ensemble"])
def test_every_head_is_seeded_by_the_step(tmp_path, head):
    """Two strategies of a seed fit the same head on the same first labels: the same step-0 accuracy."""
    if head == "laplace":
        pytest.importorskip("laplace")  # the optional laplace-torch, not in the test extra
    rows = run_grid("gal2017", ["bald", "random"], [1], tmp_path, representations=["pca"], head=head,
                    torch_threads=1, verbose=False, **{**TINY, "n_queries": 0})
    assert len(rows) == 2 and rows[0]["accuracy"] == rows[1]["accuracy"]


def test_the_fewlabels_preset_counts_every_label_up_to_300(tmp_path):
    preset = get_preset("fewlabels")
    assert preset.n_initial_per_class * 10 + preset.n_queries * preset.n_instances == 300
    assert preset.replace(name="gal2017", n_initial_per_class=2, n_queries=100) == get_preset("gal2017")
    rows = run_grid("fewlabels", ["typiclust"], [1], tmp_path, representations=["pca"], head="bll",
                    torch_threads=1, verbose=False, **{**TINY, "n_queries": 2})
    assert [r["n_labels"] for r in rows] == [10, 20, 30]


def test_an_encoder_sees_uint8_pixels_in_0_1(tmp_path, monkeypatch):
    """MNIST's pixels are uint8: the encoder learns on them divided by 255, as the network does."""
    import skdbal.experiments.runner as runner

    X_train, y_train, X_test, y_test = load_data("digits")
    as_bytes = lambda X: np.round(X * 255).astype(np.uint8)  # noqa: E731
    monkeypatch.setattr(runner, "load_data", lambda *a: (as_bytes(X_train), y_train, as_bytes(X_test), y_test))
    seen = []
    original = PoolEncoder.fit
    monkeypatch.setattr(PoolEncoder, "fit", lambda self, X, y=None: seen.append((X.dtype, float(X.max())))
                        or original(self, X, y))
    run_grid("gal2017", ["random"], [1], tmp_path, representations=["pool"], encoder_epochs=0.1, torch_threads=1,
             verbose=False, **{**TINY, "n_queries": 0})
    assert seen == [(np.dtype(np.float32), 1.0)]


def test_the_network_and_the_representations_go_into_one_folder_by_two_grids(tmp_path):
    """The network on fewer strategies, then the representations on more: one folder, one results table."""
    run_grid("gal2017", ["random"], [1], tmp_path, torch_threads=1, verbose=False, **{**TINY, "n_queries": 1})
    rows = run_grid("gal2017", ["random", "typiclust"], [1], tmp_path, representations=["pca"], head="bll",
                    torch_threads=1, verbose=False, **{**TINY, "n_queries": 1})
    assert sorted({(r["strategy"], r["variant"]) for r in rows}) == [
        ("random", "bayesian"), ("random", "pca-bll"), ("typiclust", "pca-bll")]


def test_a_spreading_head_learns_from_the_whole_pool(tmp_path):
    """``head="spread"``: the labels spread over the graph of the pool's embeddings. On embeddings that are
    the labels themselves plus a little noise, one label a class (the fewlabels start) labels every row."""
    X_train, y_train, X_test, y_test = load_data("digits")
    y = np.concatenate([y_train, y_test])
    Z = np.eye(10, dtype=np.float32)[y] + np.random.RandomState(0).normal(0, 0.01, (len(y), 10)).astype(np.float32)
    np.save(tmp_path / "labels.npy", Z)
    rows = run_grid("fewlabels", ["random"], [1], tmp_path / "out", representations=[f"file:{tmp_path / 'labels.npy'}"],
                    head="spread", torch_threads=1, verbose=False, **TINY)
    assert {r["variant"] for r in rows} == {"file-labels-spread"}
    assert [r["n_labels"] for r in rows] == [10, 20, 30]
    assert [r["accuracy"] for r in rows] == [1.0, 1.0, 1.0]
    # the first step's head: every pool row has spread label mass, most of it of its own class
    from skdbal.models import LabelSpreadingHead

    _, pool, initial, _ = split_indices(get_preset("fewlabels", **TINY), 1, y_train, len(y_test))
    head = LabelSpreadingHead(Z[:len(y_train)][pool], classes=np.arange(10)).fit(Z[initial], y_train[initial])
    assert (head.evidence_.argmax(1) == y_train[pool]).all() and (head.evidence_.max(1) > 0).all()
