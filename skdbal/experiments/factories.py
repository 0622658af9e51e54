"""What a run is made of: its data and their split, and the models it trains at each step.

:func:`load_data` reads a preset's data set; :func:`split_indices` draws the
validation, pool, initial and test indices of a seed; :func:`make_estimator`
is the network a preset trains, :func:`make_last_layer` a Bayesian last
layer on its features, and :func:`fit_step_model` the model of one step of
a run (the network, or a deep ensemble, a last-layer Laplace posterior, a
feature density or a Bayesian last layer built on it), trained with the
step's seed or rebuilt from cached weights.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

import numpy as np
import torch
from sklearn.base import clone
from skorch.callbacks import EarlyStopping
from skorch.dataset import Dataset
from skorch.helper import predefined_split

from .. import models
from ..initial import balanced_random
from ..loop import step_seed
from ..models import FixedLengthLoader, MCDropoutClassifier, ScaledL2
from .presets import OPTIMIZER_CLASSES, Preset
from .specs import INITIAL_SETS, LAST_LAYERS, RunSpec

__all__ = ["load_data", "make_estimator", "make_last_layer", "even_batch_size"]


@lru_cache(maxsize=2)
def load_data(dataset: str, data_home: Optional[str] = None):
    """``(X_train, y_train, X_test, y_test)`` for a preset's dataset.

    Examples
    --------
    >>> from skdbal.experiments import load_data
    >>> X_train, y_train, X_test, y_test = load_data("digits")     # bundled with scikit-learn: no download
    >>> X_train.shape, X_test.shape, sorted(set(y_train.tolist())) == list(range(10))
    ((1297, 8, 8), (500, 8, 8), True)
    """
    if dataset == "mnist":
        from ..datasets import load_mnist

        X_train, y_train = load_mnist(data_home, subset="train", return_X_y=True)
        X_test, y_test = load_mnist(data_home, subset="test", return_X_y=True)
        return X_train, y_train, X_test, y_test
    if dataset == "fashion_mnist":
        from ..datasets import load_fashion_mnist

        X_train, y_train = load_fashion_mnist(data_home, subset="train", return_X_y=True)
        X_test, y_test = load_fashion_mnist(data_home, subset="test", return_X_y=True)
        return X_train, y_train, X_test, y_test
    if dataset == "repeated_mnist":
        from ..datasets import make_repeated

        X_train, y_train, X_test, y_test = load_data("mnist", data_home)
        # Kirsch et al. (2019): each training image 3 times, with N(0, 0.1²) noise on images
        # standardised by MNIST's pixel std 0.3081, that is 0.1 · 0.3081 on pixels in [0, 1]
        X_rep, y_rep = make_repeated(_to_float(X_train), y_train, n_repeats=3, noise_std=0.1 * 0.3081,
                                     random_state=20190618)
        return X_rep, y_rep, X_test, y_test
    if dataset == "digits":
        from .data import load_digits_images

        X_pool, X_test, y_pool, y_test = load_digits_images()
        return X_pool, y_pool, X_test, y_test
    raise ValueError(f"unknown dataset {dataset!r}; choose 'mnist', 'repeated_mnist', 'fashion_mnist' or 'digits'")


def split_indices(preset: Preset, seed: int, y_train, n_test_total: int, X_train=None,
                  initial_set: str = "balanced_random"):
    """Validation, pool, initial and test indices: a function of the seed only.

    ``initial_set``: ``n_initial_per_class`` random points of each class
    (Gal et al.), the points nearest the k-means centroids within each class
    (Anonymous, n.d., §5.2; needs the pool's labels), or nearest the
    ``n_initial_per_class · C`` centroids of the whole pool (label-free)."""
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(y_train))
    if preset.n_validation >= len(perm):
        raise ValueError(f"n_validation={preset.n_validation} leaves no pool")
    val = perm[:preset.n_validation]
    pool = perm[preset.n_validation:]
    if preset.pool_size is not None:
        pool = pool[:preset.pool_size]
    if initial_set == "balanced_random":
        initial = pool[balanced_random(y_train[pool], preset.n_initial_per_class, rng)]
    elif initial_set in ("kmeans_per_class", "kmeans"):
        if X_train is None:
            raise ValueError(f"initial_set={initial_set!r} needs X_train")
        from ..initial import kmeans_representative

        if initial_set == "kmeans_per_class":
            chosen = kmeans_representative(X_train[pool], y_train[pool], preset.n_initial_per_class,
                                           random_state=rng)
        else:
            chosen = kmeans_representative(X_train[pool], n_clusters=preset.n_initial_per_class
                                           * len(np.unique(y_train)), random_state=rng)
        initial = pool[chosen]
    else:
        raise ValueError(f"unknown initial_set {initial_set!r}; choose from {list(INITIAL_SETS)}")
    test = np.arange(n_test_total)
    if preset.n_test is not None and preset.n_test < n_test_total:
        test = np.sort(np.random.RandomState([seed, 7919]).choice(n_test_total, preset.n_test, replace=False))
    return val, pool, initial, test


def _to_float(X):
    return X.astype(np.float32) / 255.0 if X.dtype == np.uint8 else X.astype(np.float32)


def even_batch_size(n: int, batch_size: int) -> int:
    """The largest batch of ``ceil(n / batch_size)`` nearly equal batches.

    Used by ``batch_split="even"`` (see :class:`~skdbal.experiments.Preset`): 130 labels in
    batches of at most 128 become 65 + 65, not 128 + 2.

    Parameters
    ----------
    n : int
        Training points.
    batch_size : int
        The largest batch allowed.

    Returns
    -------
    int

    Examples
    --------
    >>> from skdbal.experiments import even_batch_size
    >>> even_batch_size(130, 128), even_batch_size(120, 128), even_batch_size(257, 128)
    (65, 120, 86)
    """
    if n < 1 or batch_size < 1:
        raise ValueError(f"n and batch_size must be >= 1; got {n}, {batch_size}")
    n_batches = -(-n // batch_size)
    return -(-n // n_batches)


def make_estimator(preset: Preset, *, mc_dropout: bool = True, random_state: Optional[int] = None,
                   valid=None, n_train: Optional[int] = None, device: str = "cpu") -> MCDropoutClassifier:
    """The classifier a preset trains at each step, on torch ``device``.

    ``valid`` is ``(X_val, y_val)``, used when ``preset.selection ==
    "best_valid_loss"``. ``n_train``, the size of the labelled set it will be
    fit on, is needed when ``preset.batch_split == "even"``.

    Examples
    --------
    >>> from skdbal.experiments import get_preset, make_estimator
    >>> net = make_estimator(get_preset("gal2017"), random_state=0)
    >>> type(net).__name__, net.n_samples, net.max_epochs, net.batch_size
    ('MCDropoutClassifier', 100, 50, 128)
    >>> make_estimator(get_preset("gal2017", batch_split="even"), n_train=130).batch_size   # 65 + 65
    65
    >>> make_estimator(get_preset("gal2017"), mc_dropout=False).mc_dropout   # the deterministic baseline
    False
    """
    module = getattr(models, preset.module)
    optimizer = getattr(torch.optim, OPTIMIZER_CLASSES[preset.optimizer])
    callbacks = []
    params = {f"module__{k}": v for k, v in preset.module_params}
    batch_size = preset.batch_size if preset.batch_size else -1
    if preset.batch_split == "even" and preset.batch_size:
        if n_train is None:
            raise ValueError("batch_split='even' needs n_train, the size of the training set")
        batch_size = even_batch_size(n_train, preset.batch_size)
        params["iterator_valid__batch_size"] = preset.batch_size  # predict and score in batches as with "fixed"
    if preset.epoch_samples:
        params["iterator_train"] = FixedLengthLoader
        params["iterator_train__n_samples"] = preset.epoch_samples
    if preset.scaled_l2:
        callbacks.append(("scaled_l2", ScaledL2(c=preset.scaled_l2)))
    if preset.selection in ("best_valid_loss", "early_stopping"):
        if valid is None or len(valid[0]) == 0:
            raise ValueError(f"selection={preset.selection!r} needs a validation set (n_validation > 0)")
        X_val, y_val = valid
        params["train_split"] = predefined_split(Dataset(_to_float(X_val), np.asarray(y_val, dtype=np.int64)))
        patience = preset.max_epochs + 1 if preset.selection == "best_valid_loss" else preset.patience
        callbacks.append(("best_valid", EarlyStopping(monitor="valid_loss", patience=patience, load_best=True)))
    return MCDropoutClassifier(
        module=module,
        classes=np.arange(10),
        optimizer=optimizer,
        lr=preset.lr,
        optimizer__weight_decay=preset.weight_decay,
        max_epochs=preset.max_epochs,
        batch_size=batch_size,
        callbacks=callbacks or None,
        n_samples=preset.n_samples,
        mc_dropout=mc_dropout,
        predict_method="deterministic" if preset.eval_method == "deterministic" else "mc",
        mask_seeding=preset.mask_seeding,
        random_state=random_state,
        device=device,
        **params,
    )


def one_hot(y, n_classes: int = 10) -> np.ndarray:
    """``y`` as one-hot rows: the targets of a Bayesian last layer."""
    return np.eye(n_classes)[np.asarray(y, dtype=np.intp)]


def network_of(est):
    """The network of a step's model (itself, the features step of a pipeline, or DDU's network)."""
    if hasattr(est, "density_") or hasattr(est, "laplace_"):
        return est.estimator_
    return est[0].net_ if hasattr(est, "steps") else est


def make_last_layer(preset: Preset, net, inference: str):
    """``Pipeline(NetFeatures(net), BayesianLinearRegression(...))`` for one-hot
    targets (Anonymous, n.d., §4), with the preset's ``last_layer_*`` variances.

    ``net`` is used as given (frozen): the runner trains it on the labelled
    set first, so the features follow the labelled set as the CNN does.

    Parameters
    ----------
    preset : Preset
        Supplies ``last_layer_noise_variance``, ``last_layer_prior_variance``
        and ``last_layer_fit_hyperparameters``.
    net : estimator
        A fitted network with ``transform`` (a
        :class:`~skdbal.MCDropoutClassifier`), frozen by
        ``NetFeatures(net, refit=False)``.
    inference : {"analytic", "mfvi"}
        The last layer's ``inference``.

    Returns
    -------
    model : sklearn.pipeline.Pipeline
        Steps ``"features"`` (:class:`~skdbal.NetFeatures`) and ``"blr"``
        (:class:`~skdbal.BayesianLinearRegression`), unfitted.

    Raises
    ------
    ValueError
        If ``inference`` is not in :data:`~skdbal.experiments.specs.LAST_LAYERS`.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    >>> from skdbal.experiments import get_preset, make_estimator, make_last_layer
    >>> preset = get_preset("gal2017")
    >>> pipe = make_last_layer(preset, make_estimator(preset), "analytic")
    >>> [name for name, _ in pipe.steps], pipe[-1].noise_variance, pipe[-1].inference
    (['features', 'blr'], 0.1, 'analytic')
    """
    from sklearn.pipeline import Pipeline

    from ..models import BayesianLinearRegression, NetFeatures

    if inference not in LAST_LAYERS:
        raise ValueError(f"last_layer must be one of {LAST_LAYERS}; got {inference!r}")
    blr = BayesianLinearRegression(
        inference=inference, noise_variance=preset.last_layer_noise_variance,
        prior_variance=preset.last_layer_prior_variance,
        fit_hyperparameters=preset.last_layer_fit_hyperparameters)
    return Pipeline([("features", NetFeatures(net, refit=False)), ("blr", blr)])


def resolve_device(device: str = "auto") -> str:
    """``"auto"``: ``"cuda"`` when torch sees a GPU, else ``"cpu"``; any other
    name is checked by torch and returned.

    Raises
    ------
    ValueError
        For a name torch does not know, or a CUDA device without a GPU.

    Examples
    --------
    >>> from skdbal.experiments.factories import resolve_device
    >>> resolve_device("cpu"), resolve_device("auto") in ("cpu", "cuda")
    ('cpu', True)
    >>> resolve_device("gpu")
    Traceback (most recent call last):
        ...
    ValueError: device must be 'auto', 'cpu', 'cuda' or another torch device; got 'gpu'
    """
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or another torch device; got {device!r}") from exc
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for, but torch sees no CUDA GPU")
    return str(device)


def fit_step_model(spec: RunSpec, step: int, X, y, valid, device: str = "cpu", state=None, start=None,
                   pool=None):
    """Step ``step``'s model of ``spec``'s run on its labelled set ``(X, y)``:
    the network (rebuilt from the cached ``state`` if given, else trained with
    the step's seed, so that it is the same model every time, on from the
    weights ``start`` with ``warm_epochs``) and, with a Bayesian last layer,
    the pipeline of its features and the layer. A run on a representation
    fits its head on the embeddings ``X`` with the step's seed (no cached
    state: a head refits in a moment); ``pool``, the embeddings of the run's
    pool, is the graph a ``"spread"`` head spreads the labels over."""
    if spec.representation != "none":
        from .representations import make_head

        return make_head(spec, step_seed(spec.seed, step), device, pool=pool).fit(X, y)
    if spec.ensemble:
        return _fit_ensemble(spec, step, X, y, state, device, valid, len(X))
    net = make_estimator(spec.preset, mc_dropout=spec.mc_dropout, random_state=step_seed(spec.seed, step),
                         device=device, valid=valid, n_train=len(X))
    if state is not None or start is not None:
        train = {"callbacks": net.callbacks}
        net.set_params(max_epochs=0, callbacks=None)
        net.fit(X[:1], y[:1])  # builds the module (and a fresh optimizer) only
        net.module_.load_state_dict(state if state is not None else start)
        if state is None:  # warm start: train on from the previous step's weights
            net.set_params(warm_start=True, callbacks=train["callbacks"], max_epochs=spec.preset.warm_epochs)
            net.fit(X, y)
    else:
        net.fit(X, y)
    if spec.laplace:   # the trained network's last-layer Laplace posterior (laplace-torch)
        from ..models import LaplaceClassifier

        return LaplaceClassifier(net, prefit=True, n_samples=spec.preset.n_samples,
                                 random_state=step_seed(spec.seed, step)).fit(X, y)
    if uses_density(spec.strategy):   # DDU: the trained network and the density of its features
        from ..models import DDUClassifier

        return DDUClassifier(net, reg_covar=DDU_REG_COVAR, prefit=True).fit(X, y)
    if spec.last_layer is None:
        return net
    return make_last_layer(spec.preset, net, spec.last_layer).fit(X, one_hot(y))


#: The jitter of DDU's class covariances in the runner: 128 features and 2 to 30 labels per class.
DDU_REG_COVAR = 1e-2


def uses_density(strategy: str) -> bool:
    """Whether a strategy name reads a feature density (its ``model_kind``, a decorator's that of the strategy it
    wraps: ``ddu``, decorated or not): its runs wrap the network in :class:`~skdbal.models.DDUClassifier`.

    Examples
    --------
    >>> from skdbal.experiments.factories import uses_density
    >>> uses_density("ddu"), uses_density("stochastic(ddu,softmax,1)"), uses_density("bald")
    (True, True, False)
    """
    from ..acquisition import get_strategy

    return get_strategy(strategy).model_kind == "density"


def _fit_ensemble(spec, step, X, y, states, device, valid, n_train):
    """A :class:`~skdbal.DeepEnsembleClassifier` of ``spec.ensemble`` of the
    preset's networks with dropout off at prediction (each member trains with
    dropout as usual), seeded by the step; with ``states`` (one module state
    per member), the members are rebuilt from them instead of trained."""
    from ..models import DeepEnsembleClassifier

    template = make_estimator(spec.preset, mc_dropout=False, device=device, valid=valid, n_train=n_train)
    ens = DeepEnsembleClassifier(template, n_members=spec.ensemble, random_state=step_seed(spec.seed, step))
    if states is None:
        return ens.fit(X, y)
    if not isinstance(states, list) or len(states) != spec.ensemble:
        raise KeyError(f"the cache holds no {spec.ensemble} member states")
    seeds = np.random.RandomState(ens.random_state).randint(np.iinfo(np.int32).max, size=spec.ensemble)
    members = []
    for seed, state in zip(seeds, states):
        member = clone(template).set_params(random_state=int(seed), max_epochs=0, callbacks=None)
        member.fit(X[:1], y[:1])  # builds the module only
        member.module_.load_state_dict(state)
        members.append(member)
    ens.estimators_, ens.classes_, ens.seeds_ = members, members[0].classes_, seeds
    return ens


def learner_template(spec: RunSpec, device: str, valid=None):
    """What a run's model is (for the learner's checks of labels and inputs);
    the models themselves are trained by :func:`fit_step_model`. ``valid``:
    the run's validation set, which a preset selecting on it needs."""
    if spec.representation != "none":
        from .representations import make_head

        return make_head(spec, spec.seed, device)
    net = make_estimator(spec.preset, mc_dropout=spec.mc_dropout and not spec.ensemble, device=device,
                         valid=valid, n_train=spec.preset.batch_size or 1)
    if spec.laplace:
        from ..models import LaplaceClassifier

        return LaplaceClassifier(net, n_samples=spec.preset.n_samples)
    if uses_density(spec.strategy):
        from ..models import DDUClassifier

        return DDUClassifier(net, reg_covar=DDU_REG_COVAR)
    return net if spec.last_layer is None else make_last_layer(spec.preset, net, spec.last_layer)

