"""An encoder file on disk, loaded by its ending: TorchScript, an exported program, or ONNX."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from ._encoders import BaseEncoder

__all__ = ["ENCODER_SUFFIXES", "EncoderInputError", "load_encoder"]

#: Endings of the encoder files :func:`load_encoder` reads: TorchScript (``.pt``, ``.pth``), an exported
#: program (``.pt2``) and ONNX (``.onnx``).
ENCODER_SUFFIXES = (".pt", ".pth", ".pt2", ".onnx")

_KINDS = ("TorchScript (.pt, .pth, torch.jit.save), an exported program (.pt2, torch.export.save) or ONNX "
          "(.onnx, with the onnx extra)")


class EncoderInputError(ValueError):
    """The encoder file was read, but it fails on the inputs as prepared (their size, channels or shape).

    :func:`load_encoder` raises it, in one line naming the file, so that a caller can tell a file that is
    no encoder from inputs the encoder does not take.

    Examples
    --------
    >>> from skdbal.models import EncoderInputError
    >>> issubclass(EncoderInputError, ValueError)
    True
    """


def _check_path(path: Union[str, "os.PathLike[str]"]) -> str:
    """The suffix of an encoder file that is there, or a one-line ValueError naming it."""
    name = os.fspath(path)
    file = Path(name)
    if not file.exists():
        raise ValueError(f"{name}: no such file; an encoder file is {_KINDS}")
    if not file.is_file():
        raise ValueError(f"{name}: a folder, not a file; an encoder file is {_KINDS}")
    suffix = file.suffix.lower()
    if suffix not in ENCODER_SUFFIXES:
        ending = f"the ending {file.suffix}" if file.suffix else "no ending"
        raise ValueError(f"{name}: not an encoder file ({ending}); an encoder file is {_KINDS}")
    if suffix == ".onnx" and importlib.util.find_spec("onnxruntime") is None:
        raise ValueError(f"{name}: an ONNX file needs onnxruntime, which the onnx extra installs: "
                         f"pip install 'skdbal[onnx]'")
    return suffix


def load_encoder(path: Union[str, "os.PathLike[str]"], X: Any, *, preparation: Any = None, device: str = "cpu",
                 **kwargs: Any) -> "BaseEncoder":
    """The encoder in the file ``path``, fitted and ready to transform inputs like ``X``.

    The file's ending chooses the encoder: TorchScript (``.pt``, ``.pth``,
    ``torch.jit.save``) or an exported program (``.pt2``,
    ``torch.export.save``), read by :class:`TorchEncoder`; ONNX (``.onnx``),
    read by :class:`OnnxEncoder` (needs the ``onnx`` extra). The encoder is
    fitted on the first two rows of ``X`` and runs the first once: a file
    that is no encoder, or an encoder that fails on the inputs as prepared,
    is refused here, not at the first :meth:`~TorchEncoder.transform`.
    Nothing is downloaded.

    Parameters
    ----------
    path : str or path-like
        The encoder file, ending in one of :data:`ENCODER_SUFFIXES`.
    X : array-like of shape (n_samples, ...)
        Inputs of the kind the encoder will embed (rows, or images
        ``(N, H, W)`` / ``(N, C, H, W)``); only the first two are read.
    preparation : InputPreparation or dict, optional
        The input's size, channels and normalisation the encoder expects
        (see :class:`InputPreparation`); ``None``: the inputs as float32.
    device : str, default="cpu"
        ``"cuda"`` runs the encoder on a GPU; refused when there is none.
    **kwargs
        Passed to :class:`TorchEncoder` or :class:`OnnxEncoder`, e.g.
        ``output`` or ``batch_size``.

    Returns
    -------
    encoder : TorchEncoder or OnnxEncoder
        Fitted: ``encoder.transform(X)`` gives float32 embeddings ``(N, D)``.

    Raises
    ------
    ValueError
        In one line naming the file: it is missing, a folder, of an unknown
        kind, not what its ending says, or an ONNX file without onnxruntime
        installed.
    EncoderInputError
        (A ValueError.) The file was read, but the encoder fails on the
        first rows of ``X`` as prepared.

    Examples
    --------
    A linear map with set weights, saved as TorchScript, embeds ``x`` as
    ``W x + b``:

    >>> import os, tempfile
    >>> import numpy as np, torch
    >>> from skdbal.models import load_encoder
    >>> linear = torch.nn.Linear(3, 2)
    >>> with torch.no_grad():
    ...     _ = linear.weight.copy_(torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]]))
    ...     _ = linear.bias.fill_(1.0)
    >>> path = os.path.join(tempfile.mkdtemp(), "linear.pt")
    >>> torch.jit.script(linear).save(path)
    >>> X = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    >>> load_encoder(path, X).transform(X)
    array([[-1.,  4.],
           [ 1.,  1.]], dtype=float32)
    >>> load_encoder(path + "2", X)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: .../linear.pt2: no such file; an encoder file is TorchScript (.pt, .pth, torch.jit.save), ...
    """
    suffix = _check_path(path)
    name = os.fspath(path)
    rows = X[:2]
    if len(rows) == 0:
        raise ValueError(f"{name}: give at least one input row to try the encoder on; X has none")
    if suffix == ".onnx":
        from ._onnx_encoder import OnnxEncoder

        encoder = OnnxEncoder(name, preparation=preparation, device=device, **kwargs)
    else:
        from ._encoders import TorchEncoder

        encoder = TorchEncoder(name, preparation=preparation, device=device, **kwargs)
    try:
        return encoder.fit(rows)
    except Exception as exc:  # noqa: BLE001 - torch and onnxruntime raise their own kinds
        raise _refusal(name, suffix, encoder, exc) from None


def _refusal(name: str, suffix: str, encoder: "BaseEncoder", exc: BaseException) -> ValueError:
    """The one-line ValueError for a failed fit of ``encoder``, the encoder of the file ``name``."""
    from ._encoders import UnreadableFile, first_line

    if isinstance(exc, UnreadableFile):
        if suffix == ".onnx":
            return ValueError(f"{name}: not an ONNX model onnxruntime can read ({exc.reason})")
        if suffix == ".pt2":
            return ValueError(f"{name}: not an exported program (torch.export.save) ({exc.reason}); save the "
                              f"network with torch.export.save, or with torch.jit.save as a .pt file")
        return ValueError(f"{name}: not a TorchScript file (torch.jit.save) nor an exported program (.pt2); "
                          f"save the network with torch.jit.save, or with torch.export.save as a .pt2 file")
    # the file was read (the module or session is there): the first rows, as prepared, are what it fails on
    if any(getattr(encoder, attribute, None) is not None for attribute in ("module_", "session_")):
        return EncoderInputError(f"{name}: it fails on the inputs as prepared ({first_line(exc)})")
    if isinstance(exc, ValueError) and "\n" not in str(exc):
        return ValueError(f"{name}: {exc}")
    return ValueError(f"{name}: {first_line(exc)}")
