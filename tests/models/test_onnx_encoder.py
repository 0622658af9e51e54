"""OnnxEncoder on ONNX files the tests write (torch.onnx.export), run by onnxruntime (the onnx extra)."""
import pickle
import sys
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone

from skdbal.models import InputPreparation, OnnxEncoder

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'skdbal[onnx]')")

W = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]], dtype=np.float32)
B = np.array([1.0, -2.0], dtype=np.float32)
X3 = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 4.0], [2.0, 2.0, 2.0], [5.0, 0.0, 1.0], [1.0, 1.0, 1.0]])


class _TwoOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 2)
        with torch.no_grad():
            self.linear.weight.copy_(torch.from_numpy(W))
            self.linear.bias.copy_(torch.from_numpy(B))

    def forward(self, x):
        z = self.linear(x)
        return z, torch.relu(z)


def export(path, dynamic=True, batch=2):
    """The module above as an ONNX file, with a dynamic batch axis or a fixed one of ``batch`` rows
    (torch's TorchScript-based exporter: the new one needs onnxscript)."""
    kwargs = {"dynamic_axes": {"x": {0: "n"}, "z": {0: "n"}, "relu": {0: "n"}}} if dynamic else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(_TwoOutputs(), (torch.zeros(batch, 3),), str(path), dynamo=False,
                              input_names=["x"], output_names=["z", "relu"], **kwargs)
        except Exception as error:  # pragma: no cover - depends on the installed exporter
            pytest.skip(f"torch.onnx.export cannot write the test's file here: {error}")
    return path


def test_an_onnx_file_embeds_as_the_module_does(tmp_path):
    path = export(tmp_path / "net.onnx")
    encoder = OnnxEncoder(path, preparation=InputPreparation(scale=2.0), batch_size=2).fit(X3)
    Z = encoder.transform(X3)
    assert Z.dtype == np.float32 and Z.shape == (5, 2)
    np.testing.assert_allclose(Z, (2 * X3) @ W.T + B, rtol=1e-6)
    relu = OnnxEncoder(path, output="relu").fit(X3).transform(X3)
    np.testing.assert_allclose(relu, np.maximum(X3 @ W.T + B, 0), rtol=1e-6)
    with pytest.raises(ValueError, match=r"output='logits' is not an output of net.onnx; its outputs: \['z', 'relu'\]"):
        OnnxEncoder(path, output="logits").fit(X3)


def test_a_fixed_batch_axis_is_run_in_its_own_batches(tmp_path):
    path = export(tmp_path / "fixed.onnx", dynamic=False, batch=2)
    assert ort.InferenceSession(str(path)).get_inputs()[0].shape[0] == 2
    np.testing.assert_allclose(OnnxEncoder(path).fit(X3).transform(X3), X3 @ W.T + B, rtol=1e-6)  # 2 + 2 + 1


def test_pickling_reopens_the_file_and_refuses_a_changed_one(tmp_path):
    path = export(tmp_path / "net.onnx")
    encoder = OnnxEncoder(path).fit(X3)
    again = pickle.loads(pickle.dumps(encoder))
    np.testing.assert_array_equal(again.transform(X3), encoder.transform(X3))
    assert clone(encoder).get_params()["path"] == path
    data = pickle.dumps(encoder)
    export(path, dynamic=False, batch=3)
    with pytest.raises(ValueError, match="changed since this encoder was fitted"):
        pickle.loads(data)


def test_the_fingerprint_is_the_files_hash(tmp_path):
    one = OnnxEncoder(export(tmp_path / "a.onnx")).fit(X3).fingerprint()
    moved = OnnxEncoder(export(tmp_path / "b.onnx")).fit(X3).fingerprint()
    assert one == moved                       # the same bytes elsewhere: the same embeddings
    assert len(one["sha256"]) == 64 and "path" not in one["params"]


def test_bad_files_and_devices_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no ONNX file"):
        OnnxEncoder(tmp_path / "absent.onnx").fit(X3)
    (tmp_path / "junk.onnx").write_bytes(b"not onnx")
    with pytest.raises(ValueError, match="onnxruntime cannot read .*junk.onnx"):
        OnnxEncoder(tmp_path / "junk.onnx").fit(X3)
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        with pytest.raises(ValueError, match="this onnxruntime has no CUDA provider"):
            OnnxEncoder(export(tmp_path / "net.onnx"), device="cuda").fit(X3)


def test_without_onnxruntime_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    path = export(tmp_path / "net.onnx")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r"pip install 'skdbal\[onnx\]'"):
        OnnxEncoder(path).fit(X3)


def test_onnx_encoder_passes_sklearns_checks(tmp_path):
    """On a graph of any width (tanh), written with the onnx package's helpers."""
    onnx = pytest.importorskip("onnx", reason="the onnx package writes the check's graph")
    from onnx import TensorProto, helper
    from sklearn.utils.estimator_checks import check_estimator

    graph = helper.make_graph([helper.make_node("Tanh", ["x"], ["z"])], "tanh",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "d"])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", "d"])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "tanh.onnx")
    check_estimator(OnnxEncoder(tmp_path / "tanh.onnx", batch_size=7))
