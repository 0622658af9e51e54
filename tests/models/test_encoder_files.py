"""load_encoder: an encoder file the test writes, read by its ending, fitted and ready; each refusal in one line."""
import sys
import warnings

import numpy as np
import pytest
import torch

from skdbal.models import ENCODER_SUFFIXES, EncoderInputError, InputPreparation, OnnxEncoder, TorchEncoder, load_encoder

W = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]], dtype=np.float32)
B = np.array([1.0, -2.0], dtype=np.float32)
X = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 4.0], [2.0, 2.0, 2.0]])
#: X @ W.T + B, by hand: (1 - 3 + 1, 3 - 2), (0 - 4 + 1, 1.5 - 2), (2 - 2 + 1, 3 - 2)
XW_B = np.array([[-1.0, 1.0], [-3.0, -0.5], [1.0, 1.0]], dtype=np.float32)
KINDS = ("an encoder file is TorchScript (.pt, .pth, torch.jit.save), an exported program (.pt2, "
         "torch.export.save) or ONNX (.onnx, with the onnx extra)")


def linear():
    net = torch.nn.Linear(3, 2)
    with torch.no_grad():
        net.weight.copy_(torch.from_numpy(W))
        net.bias.copy_(torch.from_numpy(B))
    return net.eval()


def torchscript(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.trace(linear(), torch.zeros(2, 3)).save(str(path))
    return path


def test_the_hand_computed_map_is_what_the_test_pins():
    np.testing.assert_allclose(X @ W.T + B, XW_B)


@pytest.mark.parametrize("name", ["linear.pt", "linear.pth", "LINEAR.PT"])
def test_a_torchscript_file_loads_fitted_and_embeds_w_x_plus_b(tmp_path, name):
    encoder = load_encoder(torchscript(tmp_path / name), X)
    assert isinstance(encoder, TorchEncoder) and encoder.n_features_out_ == 2 and encoder.n_features_in_ == 3
    Z = encoder.transform(X)
    assert Z.dtype == np.float32
    np.testing.assert_allclose(Z, XW_B, rtol=1e-6)


def test_the_preparation_and_the_encoders_options_are_passed_on(tmp_path):
    path = torchscript(tmp_path / "linear.pt")
    encoder = load_encoder(str(path), X, preparation={"scale": 2.0}, batch_size=1)
    assert encoder.preparation_ == InputPreparation(scale=2.0) and encoder.batch_size == 1
    np.testing.assert_allclose(encoder.transform(X), (2 * X) @ W.T + B, rtol=1e-6)


def test_only_the_first_two_rows_are_run_at_load(tmp_path, monkeypatch):
    seen = []
    embed = TorchEncoder._embed
    monkeypatch.setattr(TorchEncoder, "_embed", lambda self, batch: seen.append(len(batch)) or embed(self, batch))
    load_encoder(torchscript(tmp_path / "linear.pt"), np.repeat(X, 100, axis=0))
    assert seen == [1]      # fit embeds one row of the two it is given


def test_an_exported_program_loads_and_embeds(tmp_path):
    try:
        program = torch.export.export(linear(), (torch.zeros(2, 3),),
                                      dynamic_shapes=({0: torch.export.Dim("n", min=1)},))
    except Exception as error:  # pragma: no cover - depends on the installed torch
        pytest.skip(f"torch.export cannot export the test's module here: {error}")
    torch.export.save(program, str(tmp_path / "linear.pt2"))
    encoder = load_encoder(tmp_path / "linear.pt2", X)
    assert isinstance(encoder, TorchEncoder)
    np.testing.assert_allclose(encoder.transform(X), XW_B, rtol=1e-6)


def test_an_onnx_file_loads_and_embeds(tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'skdbal[onnx]')")
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "B"], ["z"], transB=1)], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 2])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "linear.onnx")
    encoder = load_encoder(tmp_path / "linear.onnx", X)
    assert isinstance(encoder, OnnxEncoder)
    np.testing.assert_allclose(encoder.transform(X), XW_B, rtol=1e-6)


def test_the_accepted_endings_are_one_tuple():
    assert ENCODER_SUFFIXES == (".pt", ".pth", ".pt2", ".onnx")


@pytest.mark.parametrize("make, name, message", [
    (None, "missing.pt", "{path}: no such file; " + KINDS),
    ("folder", "weights.pt", "{path}: a folder, not a file; " + KINDS),
    ("text", "notes.txt", "{path}: not an encoder file (the ending .txt); " + KINDS),
    ("text", "encoder", "{path}: not an encoder file (no ending); " + KINDS),
    ("text", "notes.pt", "{path}: not a TorchScript file (torch.jit.save) nor an exported program (.pt2); save "
                         "the network with torch.jit.save, or with torch.export.save as a .pt2 file"),
])
def test_a_file_that_is_no_encoder_is_refused_in_one_line_naming_it(tmp_path, make, name, message):
    path = tmp_path / name
    if make == "folder":
        path.mkdir()
    elif make == "text":
        path.write_text("not a network")
    with pytest.raises(ValueError) as caught:
        load_encoder(path, X)
    assert str(caught.value) == message.format(path=path) and type(caught.value) is ValueError


def test_a_pt2_that_is_no_exported_program_is_refused_without_torchs_log(tmp_path, capfd, caplog):
    (tmp_path / "notes.pt2").write_text("not a network")
    with pytest.raises(ValueError) as caught:
        load_encoder(tmp_path / "notes.pt2", X)
    assert str(caught.value).startswith(f"{tmp_path}/notes.pt2: not an exported program (torch.export.save) (")
    assert str(caught.value).endswith("); save the network with torch.export.save, or with torch.jit.save as a "
                                      ".pt file") and "\n" not in str(caught.value)
    assert "Traceback" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.name.startswith("torch")]     # torch logs a traceback otherwise


def test_an_onnx_file_without_onnxruntime_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "net.onnx").write_bytes(b"\0")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)     # as if it were not installed
    with pytest.raises(ValueError) as caught:
        load_encoder(tmp_path / "net.onnx", X)
    assert str(caught.value) == (f"{tmp_path}/net.onnx: an ONNX file needs onnxruntime, which the onnx extra "
                                 f"installs: pip install 'skdbal[onnx]'")


def test_an_onnx_file_onnxruntime_cannot_read_is_refused(tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'skdbal[onnx]')")
    (tmp_path / "notes.onnx").write_text("not a network")
    with pytest.raises(ValueError) as caught:
        load_encoder(tmp_path / "notes.onnx", X)
    assert str(caught.value).startswith(f"{tmp_path}/notes.onnx: not an ONNX model onnxruntime can read (")
    assert "\n" not in str(caught.value)


def test_an_encoder_that_fails_on_the_inputs_says_so_with_torchs_reason(tmp_path):
    path = torchscript(tmp_path / "linear.pt")
    with pytest.raises(EncoderInputError) as caught:
        load_encoder(path, np.zeros((2, 4)))
    assert str(caught.value) == (f"{path}: it fails on the inputs as prepared (RuntimeError: mat1 and mat2 shapes "
                                 f"cannot be multiplied (1x4 and 3x2))")
    assert isinstance(caught.value, ValueError)


def test_no_inputs_and_a_missing_device_are_refused_naming_the_file(tmp_path):
    path = torchscript(tmp_path / "linear.pt")
    with pytest.raises(ValueError, match=r"linear.pt: give at least one input row to try the encoder on; X has "
                                         r"none$"):
        load_encoder(path, np.zeros((0, 3)))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"^.*linear.pt: device='cuda' was asked, but torch sees no CUDA "
                                             r"device"):
            load_encoder(path, X, device="cuda")
