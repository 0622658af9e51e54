"""The package's shared input checks, and the sites that use them instead of copies."""
import re

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner, BayesianLinearRegression
from skdbal.initial import balanced_random
from skdbal.models import FixedLengthSampler

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


def test_label_columns_hand_computed():
    from skdbal._validation import label_columns

    out = label_columns(np.array(["cat", "dog", "emu"]), ["emu", "cat", "emu", "dog"])
    assert out.dtype == np.intp and out.tolist() == [2, 0, 2, 1]
    # unsorted classes: the position in classes as given, not in sorted order
    assert label_columns([3, 1, 2], np.array([1, 2, 3, 3])).tolist() == [1, 2, 0, 0]
    assert label_columns(np.array(["b", "a", "c"]), np.array(["a", "c", "b"])).tolist() == [1, 2, 0]
    assert label_columns(np.array([0.5, -1.0]), [-1.0, 0.5]).tolist() == [1, 0]
    # no classes: the labels are the column indices already, as for a noise filter on a model without classes_
    out = label_columns(None, np.array([2, 0, 1], dtype=np.int64))
    assert out.dtype == np.intp and out.tolist() == [2, 0, 1]
    assert label_columns(None, [1, 0], n_columns=2).tolist() == [1, 0]
    assert label_columns([10, 20], np.array([], dtype=int)).tolist() == []


def test_label_columns_names_unknown_labels():
    from skdbal._validation import label_columns

    with pytest.raises(ValueError, match=r"^y_pool contains labels not in classes: \['fox', 'yak'\]"):
        label_columns(["cat", "dog"], ["dog", "yak", "fox", "yak"], "y_pool")
    with pytest.raises(ValueError, match=r"^y contains labels not in classes: \[0, 5\]"):
        label_columns([3, 1, 2], [1, 5, 0])
    with pytest.raises(ValueError, match=r"labels not in classes: \['1'\]"):  # the string '1' is not the int 1
        label_columns([1, 2], ["1"])
    with pytest.raises(ValueError, match=r"labels not in classes: \[2\]"):
        label_columns(np.array(["a", "b"]), [2])
    with pytest.raises(ValueError, match=r"^y must hold class indices in \[0, 2\) when classes is not given.*\[2\]"):
        label_columns(None, [0, 2], n_columns=2)
    with pytest.raises(ValueError, match=r"^y_test must hold class indices .*\[-1\]"):
        label_columns(None, [0, -1], "y_test")
    with pytest.raises(TypeError, match=r"^y must hold integer class indices when classes is not given"):
        label_columns(None, np.array(["a"]))
    with pytest.raises(ValueError, match="classes must be 1-D and non-empty"):
        label_columns([], [0])


def test_the_label_lookup_is_written_once():
    """No module but _validation maps labels to columns itself (searchsorted over classes, or a dict of them)."""
    from pathlib import Path

    import skdbal

    package = Path(skdbal.__file__).resolve().parent
    pattern = re.compile(r"searchsorted\([^)]*classes"
                         r"|\{\s*\w+\s*:\s*\w+\s+for\s+\w+\s*,\s*\w+\s+in\s+enumerate\([^)]*classes")
    offenders = [f"{path.relative_to(package)}:{number}" for path in sorted(package.rglob("*.py"))
                 if path.name != "_validation.py"
                 for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not offenders
