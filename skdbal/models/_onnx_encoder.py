"""An ONNX file as an encoder, run by onnxruntime (the ``onnx`` extra)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from ._encoders import BaseEncoder, PathLike, UnreadableFile, check_batch_size, file_sha256, first_line

__all__ = ["OnnxEncoder"]

_ONNX_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise ImportError("OnnxEncoder needs onnxruntime: pip install 'skdbal[onnx]'") from None
    return onnxruntime


class OnnxEncoder(BaseEncoder):
    """An ONNX file (a network exported with ``torch.onnx.export``, say) as an encoder.

    :meth:`fit` opens an onnxruntime session on the file; :meth:`transform`
    feeds it the prepared input, ``batch_size`` rows at a time, and returns
    the chosen output flattened to ``(N, D)`` float32. A model whose batch
    dimension is fixed is run in batches of that size (the last one padded).
    Needs the ``onnx`` extra (``pip install 'skdbal[onnx]'``).

    Parameters
    ----------
    path : path
        The ``.onnx`` file. Its SHA-256 is recorded at :meth:`fit`; a file
        changed since is refused when a fitted encoder is unpickled.
    preparation : InputPreparation or dict, optional
        The input's size, channels and normalisation.
    output : str, optional
        The name of the graph output to return; ``None``: the first.
    device : str, default="cpu"
        ``"cuda"`` uses onnxruntime's CUDA provider (refused if absent).
    batch_size : int, default=256
        Rows per run.

    Attributes
    ----------
    session_ : onnxruntime.InferenceSession
    sha256_ : str
        SHA-256 of the file read at fit.
    preparation_ : InputPreparation
    n_features_in_, n_features_out_ : int

    Examples
    --------
    A linear map written with the ``onnx`` package's helpers:

    >>> import numpy as np, pytest
    >>> onnx = pytest.importorskip("onnx"); _ = pytest.importorskip("onnxruntime")
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> from skdbal.models import OnnxEncoder
    >>> W = numpy_helper.from_array(np.array([[1.0, 0.5], [0.0, 0.5], [-1.0, 0.5]], np.float32), "W")
    >>> graph = helper.make_graph(
    ...     [helper.make_node("MatMul", ["x", "W"], ["z"])], "linear",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
    ...     [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 2])], [W])
    >>> path = getfixture("tmp_path") / "linear.onnx"
    >>> onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    >>> OnnxEncoder(path).fit(np.zeros((1, 3))).transform(np.array([[1.0, 2.0, 3.0]]))
    array([[-2.,  3.]], dtype=float32)
    """

    _not_in_fingerprint = ("batch_size", "device", "path")

    def __init__(self, path: PathLike, *, preparation=None, output: Optional[str] = None, device: str = "cpu",
                 batch_size: int = 256):
        self.path = path
        self.preparation = preparation
        self.output = output
        self.device = device
        self.batch_size = batch_size

    def _providers(self):
        ort = _onnxruntime()
        if str(self.device) == "cpu":
            return ["CPUExecutionProvider"]
        if str(self.device).startswith("cuda"):
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise ValueError(f"device={self.device!r} was asked, but this onnxruntime has no CUDA provider "
                                 f"(it has {ort.get_available_providers()}); use device='cpu'")
            return ["CUDAExecutionProvider", "CPUExecutionProvider"]
        raise ValueError(f"device must be 'cpu' or 'cuda'; got {self.device!r}")

    def _open(self):
        ort = _onnxruntime()
        path = Path(self.path)
        if not path.is_file():
            raise FileNotFoundError(f"no ONNX file at {path}")
        try:
            session = ort.InferenceSession(str(path), providers=self._providers())
        except ValueError:
            raise
        except Exception as error:
            reason = first_line(error)
            raise UnreadableFile(f"onnxruntime cannot read {path} ({reason})", reason) from None
        inputs = session.get_inputs()
        if len(inputs) != 1:
            raise ValueError(f"{path.name} takes {len(inputs)} inputs ({[i.name for i in inputs]}); an encoder "
                             f"takes one")
        names = [o.name for o in session.get_outputs()]
        if self.output is not None and self.output not in names:
            raise ValueError(f"output={self.output!r} is not an output of {path.name}; its outputs: {names}")
        return session

    def _setup(self, X):
        check_batch_size(self.batch_size)
        self.session_ = self._open()
        self.sha256_ = file_sha256(self.path)

    def _embed(self, batch):
        spec = self.session_.get_inputs()[0]
        dtype = _ONNX_TYPES.get(spec.type, np.float32)
        fixed = spec.shape[0] if spec.shape and isinstance(spec.shape[0], int) and spec.shape[0] > 0 else None
        output = [self.output] if self.output is not None else [self.session_.get_outputs()[0].name]
        if fixed is None:
            return self.session_.run(output, {spec.name: batch.astype(dtype, copy=False)})[0]
        parts = []
        for start in range(0, len(batch), fixed):
            part = batch[start:start + fixed]
            padded = np.concatenate([part, np.repeat(part[-1:], fixed - len(part), axis=0)]) if len(part) < fixed \
                else part
            parts.append(self.session_.run(output, {spec.name: padded.astype(dtype, copy=False)})[0][:len(part)])
        return np.concatenate(parts)

    def _state_sha256(self) -> str:
        return self.sha256_

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("session_", None)     # an onnxruntime session does not pickle: reopened from the file
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "sha256_" in state:
            now = file_sha256(self.path) if Path(self.path).is_file() else "missing"
            if now != self.sha256_:
                raise ValueError(f"{self.path} changed since this encoder was fitted (sha256 {self.sha256_[:12]}…, "
                                 f"now {now[:12]}…); fit it again")
            self.session_ = self._open()
