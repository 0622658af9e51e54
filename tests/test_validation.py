"""The package's shared input checks, and the sites that use them instead of copies."""
import re

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner, BayesianLinearRegression
from skdbal.initial import balanced_random
from skdbal.loaders import FixedLengthSampler

X4 = np.array([[0.0], [1.0], [2.0], [3.0]])
Y4 = np.array([0, 1, 0, 1])

#: Each "int >= 1" parameter that once had its own copy of the check, called with ``value``.
POSITIVE_INT_SITES = {
    "n_per_class": lambda value, net: balanced_random([0, 0, 1, 1], n_per_class=value),
    "n_samples (the number of MC passes T)": lambda value, net: net.predict_proba_samples(
        np.zeros((2, 8, 8), dtype=np.float32), n_samples=value),
    "n (the number of items)": lambda value, net: FixedLengthSampler(value, 3),
    "n_samples (draws per epoch)": lambda value, net: FixedLengthSampler(3, value),
    "max_iter": lambda value, net: BayesianLinearRegression(max_iter=value).fit(X4, Y4.astype(float)),
    "pool_subsample": lambda value, net: ActiveLearner(LogisticRegression(), pool_subsample=value).fit(X4, Y4),
}


@pytest.mark.parametrize("value", [0, True, -2, 2.5])
@pytest.mark.parametrize("name", list(POSITIVE_INT_SITES))
def test_every_positive_int_site_names_its_parameter(name, value, fitted_net):
    with pytest.raises(ValueError, match=rf"^{re.escape(name)} must be (None or )?an int >= 1; got {value!r}$") as info:
        POSITIVE_INT_SITES[name](value, fitted_net)
    # one check, not a copy: the error comes from the shared helper
    assert any(entry.name == "check_positive_int" for entry in info.traceback)
