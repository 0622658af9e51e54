"""The models: estimators that give predictive samples, and the networks and parts they are made of.

Every classifier here has ``predict_proba_samples(X) -> (T, N, C)`` (the
regressor, ``(T, N)`` means and variances), which is all a strategy in
:mod:`skdbal.acquisition` reads; a deterministic network is the ``T = 1``
baseline. Nothing here imports the strategies or the learner.

- :class:`MCDropoutClassifier`, :class:`MCDropoutRegressor`: skorch nets
  sampled with Monte Carlo dropout (the masks' engine is private);
- :class:`DeepEnsembleClassifier`, :class:`LaplaceClassifier`,
  :class:`DDUClassifier`: other sources of samples (or of a density);
- :class:`NetFeatures`, :class:`BayesianLinearRegression`: a network's
  features and a Bayesian last layer over them (its posterior algebra, as
  plain functions, in :mod:`skdbal.models.linear_posterior`);
- encoders, scikit-learn transformers from inputs to float32 embeddings
  ``(N, D)``: :class:`TorchEncoder` (a torch module and its weights file, or
  a TorchScript file), :class:`OnnxEncoder`, :class:`FunctionEncoder`,
  :class:`PrecomputedEmbeddings`, and :class:`PoolEncoder` (a small CNN
  learnt from the unlabelled pool by self-supervision), each with its declared
  :class:`InputPreparation`; :func:`load_encoder` reads an encoder file
  (TorchScript, ``.pt2`` or ONNX, by its ending: :data:`ENCODER_SUFFIXES`);
  :class:`EmbeddingCache` keeps their embeddings of a pool on disk, computed
  once;
- heads, classifiers over those embeddings whose samples are draws of their
  last layer: :class:`MCDropoutHead`, :class:`BayesianLastLayerHead`, and
  :class:`EncoderWithHead` to fine-tune an encoder under a dropout head;
- the networks (:class:`BayesianCNN`, :class:`KirschCNN`, :class:`LeNet5`,
  :class:`MLP`), skorch parts (:class:`ScaledL2`, :class:`FixedLengthLoader`).

Names are imported on first use, so ``import skdbal.models`` loads no torch.

Examples
--------
>>> import numpy as np
>>> from sklearn.datasets import load_digits
>>> from skdbal.models import MCDropoutClassifier, MLP
>>> X, y = load_digits(return_X_y=True)
>>> X = (X / 16).astype(np.float32)
>>> clf = MCDropoutClassifier(MLP, module__n_features=64, max_epochs=2, n_samples=5,
...                           random_state=0, verbose=0).fit(X[:200], y[:200])
>>> clf.predict_proba_samples(X[:3]).shape
(5, 3, 10)
"""
import importlib

#: Public names, by the private module that defines them.
_NAMES = {
    **dict.fromkeys(("BayesianCNN", "KirschCNN", "LeNet5", "MLP", "ToImage", "split_module"), "_nets"),
    "ScaledL2": "_callbacks",
    **dict.fromkeys(("FixedLengthLoader", "FixedLengthSampler"), "_loaders"),
    "MCDropoutClassifier": "_mc_dropout",
    **dict.fromkeys(("mc_dropout_mode", "stochastic_head"), "_mc_masks"),
    **dict.fromkeys(("MCDropoutRegressor", "GaussianNLLLoss"), "_mc_regression"),
    "DeepEnsembleClassifier": "_ensemble",
    "LaplaceClassifier": "_laplace",
    **dict.fromkeys(("ClassConditionalGaussian", "DDUClassifier"), "_ddu"),
    "NetFeatures": "_features",
    "BayesianLinearRegression": "_bayesian_linear",
    "InputPreparation": "_preparation",
    **dict.fromkeys(("TorchEncoder", "FunctionEncoder", "PrecomputedEmbeddings"), "_encoders"),
    "OnnxEncoder": "_onnx_encoder",
    **dict.fromkeys(("load_encoder", "ENCODER_SUFFIXES", "EncoderInputError"), "_encoder_files"),
    **dict.fromkeys(("MCDropoutHead", "BayesianLastLayerHead", "EncoderWithHead"), "_heads"),
    "PoolEncoder": "_self_supervised",
    **dict.fromkeys(("LabelSpreadingHead", "knn_affinities", "normalized_graph", "spread_evidence"),
                    "_label_spreading"),
    **dict.fromkeys(("EmbeddingCache", "StaleEmbeddingsError", "content_sha256", "encoder_fingerprint"),
                    "_embedding_cache"),
}

__all__ = sorted(_NAMES) + ["linear_posterior"]


def __getattr__(name):
    if name == "linear_posterior":
        value = importlib.import_module(".linear_posterior", __name__)
    elif name in _NAMES:
        value = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    else:
        raise AttributeError(f"module 'skdbal.models' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
