"""Encoders a user brings, as scikit-learn transformers: a torch module or TorchScript file, a callable,
and precomputed embeddings. Each turns ``X`` into a float32 embedding ``(N, D)``; ``fit`` reads no labels."""
from __future__ import annotations

import copy
import hashlib
import io
import logging
import marshal
import os
import pickle
import warnings
from pathlib import Path
from typing import Any, Callable, Optional, Tuple, Union

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._validation import is_lazy
from ._preparation import InputPreparation

__all__ = ["TorchEncoder", "FunctionEncoder", "PrecomputedEmbeddings"]

PathLike = Union[str, "os.PathLike[str]"]


def file_sha256(path: PathLike, chunk: int = 1 << 22) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def callable_name(func) -> str:
    """``module.qualname`` of a function or class; the type's for another callable."""
    target = func if hasattr(func, "__qualname__") else type(func)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(target).__name__)}"


def as_preparation(value) -> InputPreparation:
    if value is None:
        return InputPreparation()
    if isinstance(value, InputPreparation):
        return value
    if isinstance(value, dict):
        return InputPreparation(**value)
    raise TypeError(f"preparation must be an InputPreparation, a dict of its fields or None; got "
                    f"{type(value).__name__}")


def check_batch_size(value, allow_none: bool = False) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"batch_size must be a positive integer; got {value!r}")
    return int(value)


class UnreadableFile(ValueError):
    """A file that is not what an encoder reads (not TorchScript, not an exported program, not ONNX);
    ``reason``: the reader's error, in one line."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason


def first_line(error: BaseException) -> str:
    """``Kind: the first line of the message`` (at most 200 characters of it); for an error inside a
    TorchScript module, whose first line only says so, the error it ends with."""
    lines = [line for line in str(error).split("\n") if line.strip()]
    if len(lines) > 1 and lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        return " ".join(lines[-1].split())[:200 + len(type(error).__name__) + 2]
    text = " ".join(lines[0].split())[:200] if lines else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class BaseEncoder(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """What every encoder shares: input checks, batching, float32 ``(N, D)`` output, its fingerprint.

    Subclasses define ``_setup(X)`` (fit's work, after the checks) and ``_embed(batch)`` (a prepared
    float32 batch to an array with one row per input row).
    """

    #: Parameters that do not change the embedding, left out of :meth:`fingerprint`.
    _not_in_fingerprint: Tuple[str, ...] = ("batch_size", "device")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float32"]
        tags.input_tags.three_d_array = True
        return tags

    def _check_X(self, X, reset: bool):
        X = check_array(X, allow_nd=True, dtype="numeric", ensure_all_finite=True)
        validate_data(self, X, reset=reset, skip_check_array=True)
        return X

    @property
    def _n_features_out(self) -> int:
        return self.n_features_out_

    def fit(self, X, y=None):
        """Make the encoder ready to embed ``X``'s kind of input; ``y`` is ignored.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Unlabelled inputs: rows ``(N, D)`` or images ``(N, H, W)`` /
            ``(N, C, H, W)``.
        y : None
            Ignored: an encoder reads no labels.

        Returns
        -------
        self
        """
        X = self._check_X(X, reset=True)
        self.preparation_ = as_preparation(getattr(self, "preparation", None))
        self._setup(X)
        self.n_features_out_ = int(self._embed_batch(X[:1]).shape[1])
        return self

    def _embed_batch(self, batch) -> np.ndarray:
        out = np.asarray(self._embed(self.preparation_(batch)))
        if out.ndim == 0 or out.shape[0] != len(batch):
            raise ValueError(f"{type(self).__name__}: the encoder returned shape {out.shape} for {len(batch)} "
                             f"rows; it must return one row per input row")
        return out.reshape(len(batch), -1).astype(np.float32, copy=False)

    def _batch_rows(self, n: int) -> int:
        size = check_batch_size(getattr(self, "batch_size", None), allow_none=True)
        return n if size is None else size

    def transform(self, X) -> np.ndarray:
        """Embed ``X``, batch by batch.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Inputs in the form given to :meth:`fit`; a memory-mapped array is
            read one batch at a time. A dask array is embedded where it lives:
            the result is a dask array too, one block per block of rows.

        Returns
        -------
        embeddings : ndarray of shape (n_samples, n_features_out_), dtype float32
        """
        check_is_fitted(self, "n_features_out_")
        if is_lazy(X):
            return self._transform_lazy(X)
        X = self._check_X(X, reset=False)
        out = np.empty((len(X), self.n_features_out_), np.float32)
        step = max(self._batch_rows(len(X)), 1)
        for start in range(0, len(X), step):
            batch = self._embed_batch(X[start:start + step])
            if batch.shape[1] != self.n_features_out_:
                raise ValueError(f"the encoder returned {batch.shape[1]} features, {self.n_features_out_} at fit")
            out[start:start + step] = batch
        return out

    def _transform_lazy(self, X):
        """A dask array's embeddings, block by block of rows on its cluster, never gathered here."""
        if X.ndim < 2:
            raise ValueError(f"an encoder takes (N, ...) inputs; got a dask array of shape {X.shape}")
        X = X.rechunk({axis: -1 for axis in range(1, X.ndim)})   # each block: whole rows
        return X.map_blocks(self.transform, dtype=np.float32, chunks=(X.chunks[0], (self.n_features_out_,)),
                            drop_axis=list(range(2, X.ndim)) or None, meta=np.empty((0, 0), np.float32))

    def _state_sha256(self) -> str:
        raise NotImplementedError

    def fingerprint(self) -> dict:
        """What identifies this fitted encoder's embeddings, as JSON-able values.

        Its class, the parameters that change the embedding (the input
        preparation included; not ``batch_size`` or ``device``), and a
        SHA-256 of its weights (or code). :class:`EmbeddingCache` keys the
        embeddings it stores by it.

        Returns
        -------
        fingerprint : dict
        """
        check_is_fitted(self, "n_features_out_")
        params = {k: json_value(v) for k, v in sorted(self.get_params(deep=False).items())
                  if k not in self._not_in_fingerprint}
        params["preparation"] = self.preparation_.to_dict() if hasattr(self, "preparation_") else None
        return {"class": f"skdbal.models.{type(self).__name__}", "params": params,
                "sha256": self._state_sha256(), "n_features_out": self.n_features_out_}


def json_value(value: Any):
    """A parameter as a JSON-able value for a fingerprint: files by path (their bytes are hashed
    apart), callables and modules by name, arrays by their SHA-256."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, InputPreparation):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, np.ndarray):
        return {"array_sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest(),
                "shape": list(value.shape), "dtype": value.dtype.str}
    return callable_name(value)


# ------------------------------------------------------------------------------------------- torch modules

def _torch_device(device):
    import torch

    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r} was asked, but torch sees no CUDA device "
                         f"(torch.cuda.is_available() is False); use device='cpu'")
    return device


def _is_script(module) -> bool:
    import torch

    return isinstance(module, torch.jit.ScriptModule)


def _quiet_jit(function, *args, **kwargs):
    """``torch.jit.load`` / ``save`` without torch's deprecation warning on each call: the user chose the
    TorchScript file, and pickling an encoder goes through them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return function(*args, **kwargs)


def _script_bytes(module) -> bytes:
    import torch

    buffer = io.BytesIO()
    _quiet_jit(torch.jit.save, module, buffer)
    return buffer.getvalue()


def _load_script(source):
    import torch

    return _quiet_jit(torch.jit.load, source, map_location="cpu")


def _load_exported(source):
    import torch

    log = logging.getLogger("torch.export")   # it logs a traceback before raising on a file it cannot read
    disabled, log.disabled = log.disabled, True
    try:
        return torch.export.load(source).module()
    finally:
        log.disabled = disabled


def module_sha256(module) -> str:
    """SHA-256 of a module's architecture (its ``repr``, and its code for TorchScript) and every entry of
    its ``state_dict`` (name, dtype, shape and bytes)."""
    digest = hashlib.sha256(repr(module).encode())
    if _is_script(module):
        digest.update(str(getattr(module, "code", "")).encode())
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(__import__("torch").uint8).numpy().tobytes())
    return digest.hexdigest()


class TorchEncoder(BaseEncoder):
    """A torch module (with its weights file) or a TorchScript file, as an encoder.

    :meth:`fit` copies the module (or loads the TorchScript file), loads the
    ``state_dict`` file ``weights`` into it, and puts it in eval mode on
    ``device``; :meth:`transform` runs it without gradients, ``batch_size``
    rows at a time, after the declared ``preparation``, and flattens each
    row's output to ``(N, D)`` float32. Nothing is downloaded: the weights
    come from the file named.

    Parameters
    ----------
    module : torch.nn.Module or path
        The network (the module you pass is never changed: a copy is fitted),
        or the path of a TorchScript file (``torch.jit.save``) or of an
        exported program (``torch.export.save``, a ``.pt2`` file).
    weights : path, optional
        A ``state_dict`` file (``torch.save(model.state_dict(), path)``, or a
        checkpoint dict holding one under ``"state_dict"``), loaded with
        ``weights_only=True``.
    preparation : InputPreparation or dict, optional
        The input's size, channels and normalisation (see
        :class:`InputPreparation`); ``None``: the input as float32.
    output : None, str or callable, default=None
        ``None``: the module's output. A name from ``module.named_modules()``
        (``"avgpool"``): that layer's output, flattened. A callable
        ``output(module) -> torch.nn.Module`` (after the weights are loaded):
        the feature extractor it returns, e.g.
        ``lambda m: torch.nn.Sequential(*list(m.children())[:-1])``.
    strict : bool, default=True
        Passed to ``load_state_dict``: ``False`` lets a checkpoint carry keys
        the module has not (a classifier head you removed).
    device : str, default="cpu"
        ``"cuda"`` (or ``"cuda:1"``) runs on a GPU; refused when torch sees none.
    batch_size : int, default=256
        Rows per forward pass.

    Attributes
    ----------
    module_ : torch.nn.Module
        The fitted module (with the weights, in eval mode, on ``device``).
    preparation_ : InputPreparation
    n_features_in_ : int
        ``X.shape[1]`` at fit.
    n_features_out_ : int
        The embedding's width ``D``.
    source_sha256_ : str or None
        SHA-256 of the TorchScript or ``.pt2`` file read at fit (None for a
        module object).

    Examples
    --------
    A linear map with fixed weights embeds ``x`` as ``W x + b``:

    >>> import numpy as np, torch
    >>> from skdbal.models import TorchEncoder
    >>> linear = torch.nn.Linear(3, 2)
    >>> with torch.no_grad():
    ...     _ = linear.weight.copy_(torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]]))
    ...     _ = linear.bias.fill_(1.0)
    >>> encoder = TorchEncoder(linear).fit(np.zeros((1, 3)))
    >>> encoder.transform(np.array([[1.0, 2.0, 3.0]]))
    array([[-1.,  4.]], dtype=float32)

    A torchvision model you have on disk, without its classifier (the guide
    has the whole recipe)::

        import torchvision
        from skdbal.models import InputPreparation, TorchEncoder
        encoder = TorchEncoder(
            torchvision.models.resnet18(), weights="resnet18-f37072fd.pth", output="avgpool",
            preparation=InputPreparation(size=(224, 224), channels=3,
                                         mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)))
    """

    def __init__(self, module, weights: Optional[PathLike] = None, *, preparation=None,
                 output: Union[None, str, Callable] = None, strict: bool = True, device: str = "cpu",
                 batch_size: int = 256):
        self.module = module
        self.weights = weights
        self.preparation = preparation
        self.output = output
        self.strict = strict
        self.device = device
        self.batch_size = batch_size

    def _load(self, device):
        import torch

        if isinstance(self.module, (str, os.PathLike)):
            path = Path(self.module)
            if not path.is_file():
                raise FileNotFoundError(f"no TorchScript file at {path}")
            if path.suffix.lower() == ".pt2":
                try:
                    return _load_exported(str(path))
                except Exception as error:
                    raise UnreadableFile(f"{path} is not an exported program ({first_line(error)})",
                                         first_line(error)) from None
            try:
                return _load_script(str(path))
            except Exception as error:  # torch raises RuntimeError with its own long message
                raise UnreadableFile(f"{path} is not a TorchScript file ({type(error).__name__}); for a state_dict, "
                                     f"pass the module and weights={str(path)!r}", first_line(error)) from None
        if not isinstance(self.module, torch.nn.Module):
            raise TypeError(f"module must be a torch.nn.Module or a TorchScript file's path; got "
                            f"{type(self.module).__name__}")
        if _is_script(self.module):
            return _load_script(io.BytesIO(_script_bytes(self.module)))
        return copy.deepcopy(self.module).cpu()

    def _load_weights(self, module):
        import torch

        path = Path(self.weights)
        if not path.is_file():
            raise FileNotFoundError(f"no weights file at {path}")
        try:
            state = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as error:
            raise ValueError(f"cannot read {path} as a state_dict ({type(error).__name__}: "
                             f"{str(error).splitlines()[0][:200]})") from None
        if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
            state = state["state_dict"]
        if not isinstance(state, dict):
            raise ValueError(f"{path} holds a {type(state).__name__}, not a state_dict")
        try:
            module.load_state_dict(state, strict=bool(self.strict))
        except RuntimeError as error:
            raise ValueError(f"the weights in {path} do not fit the module: {' '.join(str(error).split())[:600]}") \
                from None

    def _setup(self, X):
        import torch

        device = _torch_device(self.device)
        check_batch_size(self.batch_size)
        module = self._load(device)
        self.source_sha256_ = file_sha256(self.module) if isinstance(self.module, (str, os.PathLike)) else None
        if self.weights is not None:
            self._load_weights(module)
        if callable(self.output) and not isinstance(self.output, (str, torch.nn.Module)):
            module = self.output(module)
            if not isinstance(module, torch.nn.Module):
                raise TypeError(f"output(module) must return a torch.nn.Module; got {type(module).__name__}")
        elif isinstance(self.output, str):
            layers = dict(module.named_modules())
            if self.output not in layers or not self.output:
                names = [n for n in layers if n][:20]
                raise ValueError(f"output={self.output!r} names no layer of the module; its layers: {names}")
        elif self.output is not None:
            raise TypeError(f"output must be None, a layer's name or a callable; got {type(self.output).__name__}")
        try:
            module.eval()
        except NotImplementedError:  # an exported program's module: already the inference graph
            pass
        for p in module.parameters():
            p.requires_grad_(False)
        self.module_ = module.to(device)

    def _embed(self, batch):
        import torch

        with torch.no_grad():
            t = torch.from_numpy(batch).to(_torch_device(self.device))
            if isinstance(self.output, str):
                captured = []
                layer = dict(self.module_.named_modules())[self.output]
                handle = layer.register_forward_hook(lambda _m, _i, out: captured.append(out))
                try:
                    self.module_(t)
                finally:
                    handle.remove()
                out = captured[-1]
            else:
                out = self.module_(t)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the module returned a {type(out).__name__}, not a tensor; choose the features "
                            f"with output= (a layer's name or a callable)")
        return out.detach().float().cpu().numpy()

    def _state_sha256(self) -> str:
        return module_sha256(self.module_)

    def fingerprint(self) -> dict:
        out = super().fingerprint()
        out["params"]["module"] = (f"file (sha256 {self.source_sha256_})"
                                   if isinstance(self.module, (str, os.PathLike)) else callable_name(self.module))
        out["params"]["weights"] = None if self.weights is None else f"sha256 {file_sha256(self.weights)}"
        return out

    def _exported(self) -> bool:
        return isinstance(self.module, (str, os.PathLike)) and Path(self.module).suffix.lower() == ".pt2"

    def __getstate__(self):
        state = self.__dict__.copy()
        for key in ("module", "module_"):   # TorchScript modules pickle through torch.jit.save
            if key in state and _is_script(state[key]):
                state[key] = ("torchscript", _script_bytes(state[key]))
        if "module_" in state and self._exported():  # an exported program's module pickles as its file
            data = Path(self.module).read_bytes()
            if hashlib.sha256(data).hexdigest() != self.source_sha256_:
                raise ValueError(f"{self.module} changed since this encoder was fitted; fit it again")
            state["module_"] = ("export", data)
        return state

    def __setstate__(self, state):
        for key in ("module", "module_"):
            value = state.get(key)
            if isinstance(value, tuple) and len(value) == 2 and value[0] == "torchscript":
                state[key] = _load_script(io.BytesIO(value[1]))
            elif isinstance(value, tuple) and len(value) == 2 and value[0] == "export":
                state[key] = _load_exported(io.BytesIO(value[1]))
        self.__dict__.update(state)
        if "module_" in state:
            self.module_ = self.module_.to(_torch_device(self.device))


# ------------------------------------------------------------------------------------------------ callables

class FunctionEncoder(BaseEncoder):
    """A callable from a batch of inputs to their embeddings, as an encoder.

    ``func(batch, **kw_args)`` receives the prepared float32 batch and returns
    one row per input row (any width; flattened to ``(N, D)`` float32).
    Unlike :class:`sklearn.preprocessing.FunctionTransformer` it declares the
    input preparation, batches a large (memory-mapped) pool and gives the
    fingerprint :class:`EmbeddingCache` keys on.

    Parameters
    ----------
    func : callable
        ``func(X, **kw_args) -> array`` of shape ``(len(X), ...)``.
    kw_args : dict, optional
        Extra keyword arguments for ``func``.
    preparation : InputPreparation or dict, optional
        Applied to each batch before ``func``.
    batch_size : int, optional
        Rows per call; ``None``: the whole input at once.

    Attributes
    ----------
    preparation_ : InputPreparation
    n_features_in_, n_features_out_ : int

    Notes
    -----
    The fingerprint names the function and hashes its compiled code and
    ``kw_args``; values a closure captures are not part of it. Pass them
    through ``kw_args`` so that a change is seen.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import FunctionEncoder
    >>> W = np.array([[1.0, 2.0], [0.0, 1.0]])
    >>> encoder = FunctionEncoder(np.dot, kw_args={"b": W}).fit(np.zeros((1, 2)))
    >>> encoder.transform(np.array([[1.0, 1.0]]))
    array([[1., 3.]], dtype=float32)
    """

    _not_in_fingerprint = ("batch_size", "func", "kw_args")

    def __init__(self, func: Callable, *, kw_args: Optional[dict] = None, preparation=None,
                 batch_size: Optional[int] = None):
        self.func = func
        self.kw_args = kw_args
        self.preparation = preparation
        self.batch_size = batch_size

    def _setup(self, X):
        if not callable(self.func):
            raise TypeError(f"func must be callable; got {type(self.func).__name__}")
        if self.kw_args is not None and not isinstance(self.kw_args, dict):
            raise TypeError(f"kw_args must be a dict or None; got {type(self.kw_args).__name__}")
        check_batch_size(self.batch_size, allow_none=True)

    def _embed(self, batch):
        return self.func(batch, **(self.kw_args or {}))

    def _state_sha256(self) -> str:
        digest = hashlib.sha256(callable_name(self.func).encode())
        code = getattr(self.func, "__code__", None)
        if code is not None:
            digest.update(marshal.dumps(code))
        else:
            try:
                digest.update(pickle.dumps(self.func))
            except Exception:  # an unpicklable callable object: its name stands for it
                pass
        try:
            digest.update(pickle.dumps(self.kw_args or {}, protocol=4))
        except Exception as error:
            raise TypeError(f"kw_args must be picklable to be fingerprinted ({error})") from None
        return digest.hexdigest()

    def fingerprint(self) -> dict:
        out = super().fingerprint()
        out["params"]["func"] = callable_name(self.func)
        return out


# ---------------------------------------------------------------------------------- precomputed embeddings

class PrecomputedEmbeddings(BaseEncoder):
    """Embeddings you already have: the rows pass through as float32 ``(N, D)``.

    The identity encoder over an array of embeddings (from a ``.npy`` file or
    a table's columns, as ``skdbal label --npy`` and ``--table`` read them), so
    that they meet the same interface as a network's.

    Attributes
    ----------
    n_features_in_, n_features_out_ : int
        The embedding's width.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import PrecomputedEmbeddings
    >>> Z = np.array([[0.5, 1.0], [2.0, 3.0]])
    >>> PrecomputedEmbeddings().fit_transform(Z)
    array([[0.5, 1. ],
           [2. , 3. ]], dtype=float32)
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = False
        return tags

    def _check_X(self, X, reset: bool):
        X = check_array(X, dtype="numeric", ensure_all_finite=True)
        validate_data(self, X, reset=reset, skip_check_array=True)
        return X

    def _setup(self, X):
        pass

    def _embed(self, batch):
        return batch

    def _state_sha256(self) -> str:
        return hashlib.sha256(b"identity").hexdigest()

    def transform(self, X) -> np.ndarray:
        """The rows as float32 (no copy when they already are).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        embeddings : ndarray of shape (n_samples, n_features), dtype float32
        """
        check_is_fitted(self, "n_features_out_")
        if is_lazy(X):
            return self._transform_lazy(X)
        X = self._check_X(X, reset=False)
        return np.asarray(X, dtype=np.float32)
