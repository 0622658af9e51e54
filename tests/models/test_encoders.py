"""The encoders a user brings: a torch module with its weights file, a TorchScript file, a callable and
precomputed embeddings, checked against values computed by hand and against scikit-learn's contract."""
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdbal.models import FunctionEncoder, InputPreparation, PrecomputedEmbeddings, TorchEncoder

W = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]], dtype=np.float32)
B = np.array([1.0, -2.0], dtype=np.float32)


def fixed_linear() -> torch.nn.Linear:
    linear = torch.nn.Linear(3, 2)
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(W))
        linear.bias.copy_(torch.from_numpy(B))
    return linear


X3 = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 4.0], [2.0, 2.0, 2.0], [5.0, 0.0, 1.0], [1.0, 1.0, 1.0]])


# ------------------------------------------------------------------------------------------ torch modules
def test_a_linear_module_embeds_x_as_w_x_plus_b_after_the_declared_normalisation():
    mean, std = np.array([1.0, 0.0, 2.0]), np.array([2.0, 1.0, 0.5])
    encoder = TorchEncoder(fixed_linear(), preparation=InputPreparation(mean=mean, std=std)).fit(X3)
    Z = encoder.transform(X3)
    assert Z.dtype == np.float32 and Z.shape == (5, 2) and encoder.n_features_out_ == 2
    np.testing.assert_allclose(Z, ((X3 - mean) / std) @ W.T + B, rtol=1e-6)
    np.testing.assert_allclose(Z[0], [(0 - 2) + 1, 0.5 * (0 + 2 + 2) - 2], rtol=1e-6)   # row 0 by hand


def test_images_are_resized_and_given_three_channels_before_the_module():
    grey = np.array([[[0.0, 1.0]], [[2.0, 4.0]]])        # two 1 x 2 grey images
    encoder = TorchEncoder(torch.nn.Flatten(), preparation=InputPreparation(size=(1, 4), channels=3)).fit(grey)
    Z = encoder.transform(grey)
    assert Z.shape == (2, 12)
    # bilinear 2 -> 4 (source x = 0, 0.25, 0.75, 1 after clamping), then the grey channel three times
    np.testing.assert_allclose(Z[0], np.tile([0.0, 0.25, 0.75, 1.0], 3))
    np.testing.assert_allclose(Z[1], np.tile([2.0, 2.5, 3.5, 4.0], 3))


def test_a_state_dict_file_is_loaded_into_a_copy_of_the_module(tmp_path):
    torch.save(fixed_linear().state_dict(), tmp_path / "linear.pt")
    torch.manual_seed(0)
    fresh = torch.nn.Linear(3, 2)
    before = fresh.weight.detach().clone()
    encoder = TorchEncoder(fresh, weights=tmp_path / "linear.pt").fit(X3)
    np.testing.assert_allclose(encoder.transform(X3), X3 @ W.T + B, rtol=1e-6)
    assert torch.equal(fresh.weight, before)                 # the module given is never changed
    assert not encoder.module_.training and not any(p.requires_grad for p in encoder.module_.parameters())
    # a checkpoint that holds the state_dict under "state_dict" (as Lightning's do)
    torch.save({"state_dict": fixed_linear().state_dict(), "epoch": 3}, tmp_path / "checkpoint.pt")
    np.testing.assert_allclose(TorchEncoder(fresh, weights=tmp_path / "checkpoint.pt").fit(X3).transform(X3),
                               X3 @ W.T + B, rtol=1e-6)


def test_weights_that_do_not_fit_are_refused_naming_the_file(tmp_path):
    torch.save(torch.nn.Linear(4, 2).state_dict(), tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"the weights in .*other.pt do not fit the module.*size mismatch"):
        TorchEncoder(torch.nn.Linear(3, 2), weights=tmp_path / "other.pt").fit(X3)
    with pytest.raises(FileNotFoundError, match="no weights file"):
        TorchEncoder(torch.nn.Linear(3, 2), weights=tmp_path / "absent.pt").fit(X3)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read .*junk.pt as a state_dict"):
        TorchEncoder(torch.nn.Linear(3, 2), weights=tmp_path / "junk.pt").fit(X3)


def test_strict_false_takes_a_checkpoint_with_a_head_the_module_has_not(tmp_path):
    full = torch.nn.Sequential(fixed_linear(), torch.nn.Linear(2, 5))
    torch.save(full.state_dict(), tmp_path / "full.pt")
    body = torch.nn.Sequential(torch.nn.Linear(3, 2))
    with pytest.raises(ValueError, match="Unexpected key"):
        TorchEncoder(body, weights=tmp_path / "full.pt").fit(X3)
    encoder = TorchEncoder(body, weights=tmp_path / "full.pt", strict=False).fit(X3)
    np.testing.assert_allclose(encoder.transform(X3), X3 @ W.T + B, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")
def test_a_torchscript_file_written_here_round_trips(tmp_path):
    net = torch.nn.Sequential(fixed_linear(), torch.nn.ReLU())
    torch.jit.save(torch.jit.script(net), tmp_path / "net.ts")
    encoder = TorchEncoder(str(tmp_path / "net.ts")).fit(X3)
    np.testing.assert_allclose(encoder.transform(X3), np.maximum(X3 @ W.T + B, 0), rtol=1e-6)
    again = pickle.loads(pickle.dumps(encoder))              # through torch.jit.save's bytes
    np.testing.assert_array_equal(again.transform(X3), encoder.transform(X3))
    # a TorchScript module passed as an object pickles too
    scripted = TorchEncoder(torch.jit.script(net)).fit(X3)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(scripted)).transform(X3), encoder.transform(X3))
    torch.save(net.state_dict(), tmp_path / "state.pt")
    with pytest.raises(ValueError, match="is not a TorchScript file.*pass the module and weights="):
        TorchEncoder(tmp_path / "state.pt").fit(X3)


def test_an_exported_program_written_here_round_trips(tmp_path):
    net = torch.nn.Sequential(fixed_linear(), torch.nn.ReLU())
    program = torch.export.export(net, (torch.zeros(2, 3),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(program, tmp_path / "net.pt2")
    encoder = TorchEncoder(tmp_path / "net.pt2", batch_size=4).fit(X3)
    np.testing.assert_allclose(encoder.transform(X3), np.maximum(X3 @ W.T + B, 0), rtol=1e-6)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(encoder)).transform(X3), encoder.transform(X3))
    (tmp_path / "net.pt2").write_bytes(b"changed")
    with pytest.raises(ValueError, match="changed since this encoder was fitted"):
        pickle.dumps(encoder)
    with pytest.raises(ValueError, match="is not an exported program"):
        TorchEncoder(tmp_path / "net.pt2").fit(X3)


def test_the_output_is_a_named_layer_or_a_callables_feature_extractor():
    net = torch.nn.Sequential(fixed_linear(), torch.nn.ReLU(), torch.nn.Linear(2, 7))
    by_name = TorchEncoder(net, output="0").fit(X3)
    np.testing.assert_allclose(by_name.transform(X3), X3 @ W.T + B, rtol=1e-6)
    by_callable = TorchEncoder(net, output=lambda m: m[:2]).fit(X3)
    np.testing.assert_allclose(by_callable.transform(X3), np.maximum(X3 @ W.T + B, 0), rtol=1e-6)
    assert TorchEncoder(net).fit(X3).n_features_out_ == 7
    with pytest.raises(ValueError, match=r"output='fc' names no layer of the module; its layers: \['0', '1', '2'\]"):
        TorchEncoder(net, output="fc").fit(X3)
    with pytest.raises(TypeError, match="must return a torch.nn.Module"):
        TorchEncoder(net, output=lambda m: 3).fit(X3)


class _Pair(torch.nn.Module):
    def forward(self, x):
        return x, x


def test_a_module_that_returns_no_tensor_is_refused_with_the_fix():
    with pytest.raises(TypeError, match="returned a tuple, not a tensor; choose the features with output="):
        TorchEncoder(_Pair()).fit(X3)


def test_batches_eval_mode_and_no_grad():
    net = torch.nn.Sequential(fixed_linear(), torch.nn.Dropout(0.5))
    one = TorchEncoder(net, batch_size=2).fit(X3).transform(X3)
    np.testing.assert_allclose(one, X3 @ W.T + B, rtol=1e-6)   # dropout off: eval mode
    np.testing.assert_array_equal(one, TorchEncoder(net, batch_size=256).fit(X3).transform(X3))
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        TorchEncoder(net, batch_size=0).fit(X3)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where torch sees no GPU")
def test_cuda_is_refused_where_there_is_none():
    with pytest.raises(ValueError, match=r"device='cuda' was asked, but torch sees no CUDA device"):
        TorchEncoder(fixed_linear(), device="cuda").fit(X3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_gives_the_cpus_embeddings():
    cpu = TorchEncoder(fixed_linear()).fit(X3).transform(X3)
    gpu = TorchEncoder(fixed_linear(), device="cuda").fit(X3)
    assert gpu.module_.weight.device.type == "cuda"
    np.testing.assert_allclose(gpu.transform(X3), cpu, rtol=1e-5)


def test_clone_and_pickle():
    encoder = TorchEncoder(fixed_linear(), preparation=InputPreparation(mean=1.0, std=2.0), batch_size=3)
    copy = clone(encoder)
    assert copy.get_params()["batch_size"] == 3 and copy.preparation == encoder.preparation
    assert not hasattr(copy, "module_")
    fitted = encoder.fit(X3)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.transform(X3), fitted.transform(X3))


def test_the_fingerprint_follows_the_weights_and_the_preparation_not_the_batch_size(tmp_path):
    base = TorchEncoder(fixed_linear()).fit(X3).fingerprint()
    assert TorchEncoder(fixed_linear(), batch_size=7).fit(X3).fingerprint() == base
    other = fixed_linear()
    with torch.no_grad():
        other.bias[0] += 1e-3
    assert TorchEncoder(other).fit(X3).fingerprint()["sha256"] != base["sha256"]
    prepared = TorchEncoder(fixed_linear(), preparation=InputPreparation(mean=0.0, std=2.0)).fit(X3).fingerprint()
    assert prepared["sha256"] == base["sha256"] and prepared["params"]["preparation"]["std"] == 2.0
    torch.save(fixed_linear().state_dict(), tmp_path / "w.pt")
    from_file = TorchEncoder(torch.nn.Linear(3, 2), weights=tmp_path / "w.pt").fit(X3).fingerprint()
    assert from_file["sha256"] == base["sha256"] and from_file["params"]["weights"].startswith("sha256 ")


# ----------------------------------------------------------------------------------------------- callables
def test_a_callable_is_an_encoder_with_its_preparation():
    encoder = FunctionEncoder(np.dot, kw_args={"b": W.T}, preparation=InputPreparation(scale=0.5),
                              batch_size=2).fit(X3)
    np.testing.assert_allclose(encoder.transform(X3), (0.5 * X3) @ W.T, rtol=1e-6)
    with pytest.raises(ValueError, match="returned shape .* for 5 rows; it must return one row per input row"):
        FunctionEncoder(lambda X: X[:1]).fit(X3).transform(X3)
    with pytest.raises(TypeError, match="func must be callable"):
        FunctionEncoder(3).fit(X3)


def test_a_callables_fingerprint_follows_its_keyword_arguments():
    one = FunctionEncoder(np.dot, kw_args={"b": W.T}).fit(X3).fingerprint()
    two = FunctionEncoder(np.dot, kw_args={"b": 2 * W.T}).fit(X3).fingerprint()
    assert one["sha256"] != two["sha256"] and one["params"]["func"] == "numpy.dot"


# ---------------------------------------------------------------------------------- precomputed embeddings
def test_precomputed_embeddings_pass_through_as_float32():
    Z = np.arange(6, dtype=np.float32).reshape(3, 2)
    encoder = PrecomputedEmbeddings().fit(Z)
    assert encoder.transform(Z) is Z                 # no copy of float32 rows
    out = encoder.transform(Z.astype(np.float64))
    assert out.dtype == np.float32 and out.tolist() == Z.tolist()
    with pytest.raises(ValueError, match="X has 3 features, but PrecomputedEmbeddings is expecting 2"):
        encoder.transform(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="dim 3"):
        PrecomputedEmbeddings().fit(np.zeros((2, 2, 2)))


def test_fit_reads_no_labels():
    Z = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(PrecomputedEmbeddings().fit(Z, y=[0, 1, 2]).transform(Z),
                                  PrecomputedEmbeddings().fit(Z).transform(Z))


# ------------------------------------------------------------------------------- scikit-learn's contract
@parametrize_with_checks([TorchEncoder(torch.nn.Tanh(), batch_size=7), FunctionEncoder(np.tanh),
                          PrecomputedEmbeddings()])
def test_encoders_pass_sklearns_checks(estimator, check):
    check(estimator)


def test_an_encoder_and_a_classifier_compose_as_a_pipeline(flat_digits32):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    X, y = flat_digits32
    torch.manual_seed(0)
    model = make_pipeline(TorchEncoder(torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.Tanh())),
                          LogisticRegression(max_iter=500))
    fitted = clone(model).fit(X[:300], y[:300])
    Z = fitted[0].transform(X[300:310])
    np.testing.assert_allclose(fitted.decision_function(X[300:310]),
                               Z @ fitted[-1].coef_.T + fitted[-1].intercept_, rtol=1e-4, atol=1e-5)
    assert list(fitted[0].get_feature_names_out()[:2]) == ["torchencoder0", "torchencoder1"]
