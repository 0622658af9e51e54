"""The strategies in functional form: their numeric routines, as plain functions over arrays.

As :mod:`torch.nn.functional` is to its modules, this is to the strategy classes: each function lives in
its strategy's module, beside the class that calls it;
this module lists them in one public place, for code that wants the numbers
without a model (tests against references, notebooks, other libraries). The
pointwise measures (entropy, BALD's mutual information, variation ratios,
mean std) are in :mod:`skdbal.uncertainty`, shared with the models and the
noise filter.

Examples
--------
>>> import numpy as np
>>> from skdbal.acquisition.functional import log_weights
>>> np.round(log_weights(np.array([2.0, 1.0]), mode="power", beta=1.0), 3)
array([0.693, 0.   ])
"""
from ._badge import badge_select, gradient_embedding
from ._batchbald import batch_bald_select, conditional_entropy, joint_entropy_exact
from ._diversity import candidate_bound, greedy_cosine_batch, normalize_scores, unit_rows
from ._epig import epig_from_probs
from ._probcover import ball_purity, probcover_delta, probcover_graph, probcover_select
from ._regression import egl_scores
from ._stochastic import MODES as STOCHASTIC_MODES
from ._stochastic import log_weights, sample_batch
from ._typiclust import typicality, typiclust_clusters, typiclust_select

__all__ = ["batch_bald_select", "joint_entropy_exact", "conditional_entropy", "epig_from_probs", "badge_select",
           "gradient_embedding", "egl_scores", "normalize_scores", "unit_rows", "greedy_cosine_batch",
           "candidate_bound", "STOCHASTIC_MODES", "log_weights", "sample_batch",
           "typicality", "typiclust_clusters", "typiclust_select", "probcover_graph", "probcover_select",
           "ball_purity", "probcover_delta"]
