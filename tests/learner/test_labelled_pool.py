"""The bookkeeping of the learner's pool (skdbal.learner._labelled_pool), by hand: which position is which training
row, in what order labels came, what the log says; and the learner keeping exactly that state."""
import pickle

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.learner._labelled_pool import (
    LabelledPool,
    check_ids,
    has_missing,
    known_labels,
    log_entries,
    merge_labels,
    missing_mask,
)
from skdbal.learner._query import subsample


def arrays(pool):
    return pool.row.tolist(), pool.order.tolist()


# ---------------------------------------------------------------- LabelledPool
def test_the_labelled_positions_are_training_rows_in_the_order_given():
    pool = LabelledPool.of(6, [4, 1])
    assert arrays(pool) == ([-1, 1, -1, -1, 0, -1], [4, 1])
    assert pool.n == 6
    assert pool.mask.tolist() == [False, True, False, False, True, False]
    assert pool.unlabelled().tolist() == [0, 2, 3, 5]
    assert pool.row.dtype == pool.order.dtype == np.intp
    assert arrays(LabelledPool.of(3, [])) == ([-1, -1, -1], [])


def test_add_appends_new_positions_and_a_relabelled_one_keeps_its_row():
    pool = LabelledPool.of(6, [4, 1]).add(np.array([2, 4, 0]), n_rows=2)
    # 4 was row 0 and stays; 2 and 0 are new: rows 2 and 3, in the order given
    assert arrays(pool) == ([3, 1, 2, -1, 0, -1], [4, 1, 2, 0])
    assert pool.order.dtype == np.intp


def test_add_numbers_new_rows_after_every_training_row():
    # the training set may hold rows no pool position names (teach() in pool mode): 5 of them here
    assert arrays(LabelledPool.of(3, [0]).add(np.array([2]), n_rows=5)) == ([0, -1, 5], [0, 2])
    # relabelling only: nothing new
    assert arrays(LabelledPool.of(3, [0, 2]).add(np.array([2, 0]), n_rows=2)) == ([0, -1, 1], [0, 2])


def test_remove_drops_rows_and_moves_the_later_ones_up():
    pool = LabelledPool(np.array([3, 1, 2, -1, 0, -1], dtype=np.intp), np.array([4, 1, 2, 0], dtype=np.intp))
    after, keep = pool.remove(np.array([1, 0]), n_rows=4)  # rows 1 and 3 go
    assert keep.tolist() == [True, False, True, False]
    # position 4 keeps row 0; position 2's row 2 becomes 1
    assert arrays(after) == ([-1, -1, 1, -1, 0, -1], [4, 2])


def test_remove_keeps_training_rows_no_position_names():
    pool = LabelledPool(np.array([1, -1, 3], dtype=np.intp), np.array([0, 2], dtype=np.intp))
    after, keep = pool.remove(np.array([0]), n_rows=4)  # rows 0 and 2 came from teach()
    assert keep.tolist() == [True, False, True, True]
    assert arrays(after) == ([-1, -1, 2], [2])


def test_remove_refuses_an_unlabelled_position():
    pool = LabelledPool.of(4, [1, 3])
    with pytest.raises(ValueError, match=r"pool rows \[0, 2\] are not labelled"):
        pool.remove(np.array([1, 0, 2]), n_rows=2)
    assert arrays(pool) == ([-1, 0, -1, 1], [1, 3])


def test_the_pool_is_a_value_its_methods_never_change_it():
    pool = LabelledPool.of(5, [3, 0])
    before = arrays(pool)
    pool.add(np.array([1, 3]), n_rows=2)
    pool.remove(np.array([0]), n_rows=2)
    pool.labels(np.array([7, 8]), -1)
    pool.candidates()
    assert arrays(pool) == before


def test_label_then_undo_by_hand():
    """A session: label 5, 2; relabel 5; label 0; undo 2; label 2 again."""
    pool = LabelledPool.of(6, [])
    pool = pool.add(np.array([5, 2]), n_rows=0)
    assert arrays(pool) == ([-1, -1, 1, -1, -1, 0], [5, 2])
    pool = pool.add(np.array([5]), n_rows=2)
    assert arrays(pool) == ([-1, -1, 1, -1, -1, 0], [5, 2])
    pool = pool.add(np.array([0]), n_rows=2)
    assert arrays(pool) == ([2, -1, 1, -1, -1, 0], [5, 2, 0])
    pool, keep = pool.remove(np.array([2]), n_rows=3)
    assert keep.tolist() == [True, False, True]
    assert arrays(pool) == ([1, -1, -1, -1, -1, 0], [5, 0])
    pool = pool.add(np.array([2]), n_rows=2)
    assert arrays(pool) == ([1, -1, 2, -1, -1, 0], [5, 0, 2])


def test_random_sessions_agree_with_a_list_of_labelled_positions():
    """Against the plainest model: the training set is the labelled positions, in arrival order."""
    rng = np.random.RandomState(0)
    for _ in range(50):
        n = rng.randint(1, 12)
        pool, arrived = LabelledPool.of(n, []), []
        for _ in range(20):
            if arrived and rng.rand() < 0.4:
                gone = rng.choice(arrived, rng.randint(1, len(arrived) + 1), replace=False)
                pool, keep = pool.remove(gone, n_rows=len(arrived))
                assert keep.tolist() == [p not in gone for p in arrived]
                arrived = [p for p in arrived if p not in gone]
            else:
                positions = rng.choice(n, rng.randint(1, n + 1), replace=False)
                pool = pool.add(positions, n_rows=len(arrived))
                arrived += [p for p in positions.tolist() if p not in arrived]
            expected = np.full(n, -1)
            expected[arrived] = np.arange(len(arrived))
            assert arrays(pool) == (expected.tolist(), arrived)


def test_candidates_are_the_unlabelled_positions():
    pool = LabelledPool.of(5, [1, 3])
    assert pool.candidates().tolist() == [0, 2, 4]
    assert pool.candidates([4, 0]).tolist() == [4, 0]
    assert pool.candidates(np.array([2], dtype=np.int32)).dtype == np.intp
    with pytest.raises(ValueError, match=r"candidates hold labelled pool rows \[3, 1\]"):
        pool.candidates([0, 3, 1])
    with pytest.raises(ValueError, match=r"candidates must lie in \[0, 5\)"):
        pool.candidates([5])
    with pytest.raises(ValueError, match="candidates contain duplicates"):
        pool.candidates([0, 0])
    with pytest.raises(ValueError, match="every row of the learner's pool is labelled"):
        LabelledPool.of(2, [0, 1]).candidates()


def test_labels_reads_the_pool_labels_from_the_training_labels():
    pool = LabelledPool(np.array([1, -1, 0], dtype=np.intp), np.array([2, 0], dtype=np.intp))
    y = pool.labels(np.array([7, 8]), np.nan)
    assert y.dtype == np.float64 and y[[0, 2]].tolist() == [8.0, 7.0] and np.isnan(y[1])
    assert pool.labels(np.array([7, 8]), -1).tolist() == [8, -1, 7]
    assert pool.labels(np.array(["a", "b"]), None).tolist() == ["b", None, "a"]
    assert pool.labels(np.array([[1.0, 0.0], [0.0, 1.0]]), np.nan)[[0, 2]].tolist() == [[0.0, 1.0], [1.0, 0.0]]


# ---------------------------------------------------------------- labels and the log
@pytest.mark.parametrize("y, missing_label, expected", [
    ([0.0, np.nan, 2.0], np.nan, [False, True, False]),
    ([0.0, np.nan, 2.0], None, [False, True, False]),
    (np.array(["a", None, np.nan, "b"], dtype=object), None, [False, True, True, False]),
    (np.array(["a", None, "b"], dtype=object), np.nan, [False, True, False]),
    ([0, 1, 2], np.nan, [False, False, False]),            # integers cannot be NaN
    ([0, -1, 1, -1], -1, [False, True, False, True]),
    (["a", "?", "b"], "?", [False, True, False]),
    ([0.0, 1.0], "?", [False, False]),                     # a string never marks a float label
    ([[np.nan, 1.0], [np.nan, np.nan]], np.nan, [False, True]),   # a row is missing when all of it is
])
def test_missing_mask(y, missing_label, expected):
    assert missing_mask(np.asarray(y) if not isinstance(y, np.ndarray) else y, missing_label).tolist() == expected


def test_has_missing_is_false_for_what_cannot_be_compared():
    assert has_missing([1.0, np.nan], np.nan) and not has_missing([1.0, 2.0], np.nan)
    assert not has_missing([[1, 2], [3]], np.nan)  # ragged: no array, no missing label


def test_known_labels_become_integers_again_for_a_classifier():
    y = np.array([1.0, np.nan, 0.0, np.nan])
    missing = np.array([False, True, False, True])
    out = known_labels(y, missing, LogisticRegression())
    assert out.dtype == np.int64 and out.tolist() == [1, 0]
    assert known_labels(y, missing, LinearRegression()).dtype == np.float64
    assert known_labels(np.array([0.5, np.nan]), np.array([False, True]), LogisticRegression()).tolist() == [0.5]
    assert known_labels(np.array([1.0, 2.0]), np.array([False, False]), LogisticRegression()).dtype == np.float64
    strings = known_labels(np.array(["b", None, "a"], dtype=object), np.array([False, True, False]),
                           LogisticRegression())
    assert strings.dtype.kind == "U" and strings.tolist() == ["b", "a"]


def test_merge_labels_replaces_in_place_and_appends_in_order():
    assert merge_labels(np.array([3, 4]), np.array([7, 8, 9]), np.array([-1, 0, -1])).tolist() == [8, 4, 7, 9]
    widened = merge_labels(np.array([3, 4]), np.array([0.5]), np.array([1]))
    assert widened.dtype == np.float64 and widened.tolist() == [3.0, 0.5]
    assert merge_labels(np.array([], dtype=np.float64), np.array(["a"]), np.array([-1])).tolist() == ["a"]
    before = np.array([3, 4])
    merge_labels(before, np.array([9]), np.array([0]))
    assert before.tolist() == [3, 4]  # a new array


def test_log_entries():
    ids = np.array(["f0", "f1", "f2"])
    log = log_entries(np.array([2, 0]), ids, np.array([5, 6]), ["ann", "bob"], [1.5, 2.5],
                      np.array([-1, 0]), np.array([9]))
    assert log == [
        {"position": 2, "id": "f2", "label": 5, "annotator": "ann", "time": 1.5, "previous": None},
        {"position": 0, "id": "f0", "label": 6, "annotator": "bob", "time": 2.5, "previous": 9},
    ]
    assert all(type(e["label"]) is int and type(e["id"]) is str for e in log)  # plain values
    withdrawn = log_entries([1], ids, [None], ["u"], [None], [0], np.array([[0.0, 1.0]]))
    assert withdrawn == [{"position": 1, "id": "f1", "label": None, "annotator": "u", "time": None,
                          "previous": [0.0, 1.0]}]


def test_check_ids():
    assert check_ids(None, 3).tolist() == [0, 1, 2]
    assert check_ids(["c", "a", "b"], 3).tolist() == ["c", "a", "b"]
    with pytest.raises(ValueError, match=r"ids must have one entry per pool row \(3\); got shape \(2,\)"):
        check_ids([1, 2], 3)
    with pytest.raises(ValueError, match="ids contain duplicates"):
        check_ids([1, 2, 1], 3)


def test_subsample_is_a_draw_of_the_candidates_in_the_order_of_their_ids():
    candidates = np.array([13, 12, 11, 10, 9])
    assert np.random.RandomState(1).permutation(5)[:3].tolist() == [2, 1, 4]
    assert subsample(candidates, 3, np.random.RandomState(1)).tolist() == [9, 11, 12]
    ids = np.arange(14)[::-1]  # id of row r is 13 - r: the reverse order
    assert subsample(candidates, 3, np.random.RandomState(1), ids).tolist() == [12, 11, 9]


# ---------------------------------------------------------------- the learner keeps that state
def pool_learner():
    X = np.arange(12, dtype=float).reshape(6, 2)
    learner = ActiveLearner(LogisticRegression(), max_entropy, random_state=0, verbose=False)
    return learner.set_pool(X, [np.nan, 1, np.nan, 0, np.nan, np.nan], ids=[f"r{i}" for i in range(6)])


def test_the_learner_labels_and_unlabels_by_hand():
    learner = pool_learner()
    assert learner.pool_.row.tolist() == [-1, 0, -1, 1, -1, -1] and learner.labelled_idx_.tolist() == [1, 3]
    learner.label([5, 1], [1, 0], annotator="ann", time=1.0, refit=False)   # 5 new, 1 relabelled
    assert learner.pool_.row.tolist() == [-1, 0, -1, 1, -1, 2] and learner.labelled_idx_.tolist() == [1, 3, 5]
    assert learner.y_training_.tolist() == [0, 0, 1]
    assert learner.X_training_[:, 0].tolist() == [2.0, 6.0, 10.0]
    assert learner.label_log_ == [
        {"position": 5, "id": "r5", "label": 1, "annotator": "ann", "time": 1.0, "previous": None},
        {"position": 1, "id": "r1", "label": 0, "annotator": "ann", "time": 1.0, "previous": 1}]
    learner.unlabel([3], annotator="undo", time=2.0)
    assert learner.pool_.row.tolist() == [-1, 0, -1, -1, -1, 1] and learner.labelled_idx_.tolist() == [1, 5]
    assert learner.y_training_.tolist() == [0, 1] and learner.X_training_[:, 0].tolist() == [2.0, 10.0]
    assert learner.label_log_[-1] == {"position": 3, "id": "r3", "label": None, "annotator": "undo",
                                      "time": 2.0, "previous": 0}
    assert learner.labelled_mask_.tolist() == [False, True, False, False, False, True]
    y_pool = learner.y_pool_
    assert np.isnan(y_pool[[0, 2, 3, 4]]).all() and y_pool[[1, 5]].tolist() == [0, 1]
    assert sorted(learner.refit().query(n_instances=2, candidates=[0, 2])[0].tolist()) == [0, 2]
    with pytest.raises(ValueError, match=r"candidates hold labelled pool rows \[5\]"):
        learner.query(n_instances=1, candidates=[0, 5])


#: What an ActiveLearner keeps, by name: a pickle holds these, so renaming one breaks old pickles
#: (or needs a __setstate__ that reads the old name). The pool is one object, ``pool_``.
POOL_STATE = ["X_training_", "pool_", "_template_source", "estimator_", "n_features_in_", "rng_", "step_",
              "template_", "y_training_"]


def test_the_learners_state_keeps_its_names_and_pickles():
    learner = pool_learner().refit()
    learner.label([0], [0], refit=False)
    params = ["estimator", "query_strategy", "X_training", "y_training", "retrain", "pool_subsample",
              "random_state", "seeding", "missing_label", "verbose"]
    assert sorted(vars(learner)) == sorted(params + POOL_STATE)
    copy = pickle.loads(pickle.dumps(learner))
    copy.label([2], [1], annotator="after", refit=False)
    learner.label([2], [1], annotator="after", refit=False)
    np.testing.assert_array_equal(copy.pool_.row, learner.pool_.row)
    np.testing.assert_array_equal(copy.labelled_idx_, learner.labelled_idx_)
    np.testing.assert_array_equal(copy.y_training_, learner.y_training_)
    assert copy.label_log_ == learner.label_log_
    np.testing.assert_array_equal(copy.refit().predict(copy.X_pool_), learner.refit().predict(learner.X_pool_))


# ---------------------------------------------------------------- the learner reads as one class
def test_no_module_of_the_learner_imports_it_back():
    """Only the package's __init__ imports _active_learner; not even under TYPE_CHECKING does another."""
    import ast
    import pathlib

    import skdbal.learner

    folder = pathlib.Path(skdbal.learner.__file__).parent
    importers = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = {a.name for a in node.names}
                if (node.module or "").endswith("_active_learner") or "ActiveLearner" in names \
                        or (node.module is None and "_active_learner" in names):
                    importers.add(path.name)
    assert importers == {"__init__.py"}


def test_every_method_is_defined_in_a_class_not_bound_from_a_module_function():
    from skdbal.learner import PredictiveMixin, SimulationMixin

    assert ActiveLearner.__mro__[1:3] == (PredictiveMixin, SimulationMixin)
    for cls in (ActiveLearner, PredictiveMixin, SimulationMixin):
        for name, value in vars(cls).items():
            function = getattr(value, "fget", None) or getattr(value, "fn", None) or value
            if callable(function) and hasattr(function, "__qualname__"):
                assert function.__qualname__.startswith(cls.__name__ + "."), (cls.__name__, name)
    # the public surface is the one the class always had
    for name in ["set_pool", "label", "unlabel", "query", "teach", "fit", "refit", "simulate", "predict",
                 "predict_proba", "score", "get_params", "set_params"]:
        assert callable(getattr(ActiveLearner, name)), name


def test_the_pool_attributes_are_read_from_the_one_pool_object():
    learner = pool_learner()
    pool = learner.pool_
    assert isinstance(pool, LabelledPool)
    assert learner.X_pool_ is pool.X and learner.pool_ids_ is pool.ids and learner.label_log_ is pool.log
    assert learner.n_pool_ == 6 and learner.labelled_idx_.tolist() == [1, 3]
    learner.label([0], [1], refit=False)
    assert learner.pool_ is not pool and learner.labelled_idx_.tolist() == [1, 3, 0]
    assert pool.order.tolist() == [1, 3]  # the pool before is a value, unchanged (but for the shared log)
    assert not hasattr(ActiveLearner(), "X_pool_") and not hasattr(ActiveLearner(), "labelled_idx_")
    with pytest.raises(ValueError, match="needs the learner's pool"):
        _ = ActiveLearner().labelled_mask_


def test_a_failed_retrain_loses_no_label_and_logs_nothing():
    learner = pool_learner().refit()
    before = (learner.pool_, list(learner.label_log_), learner.y_training_.copy())
    with pytest.raises(TypeError):
        learner.label([0], [1], bogus=1)  # a fit parameter the model refuses: the retrain fails
    assert learner.pool_ is before[0] and learner.label_log_ == before[1]
    np.testing.assert_array_equal(learner.y_training_, before[2])


def test_no_module_of_the_learner_reaches_into_another_objects_private_members():
    """``self._x`` (and ``cls._x``) only: no ``learner._template()``, ``getattr(learner, "_pool_hash")`` or
    ``lean.__dict__`` of another object in a module function."""
    import ast
    from pathlib import Path

    import skdbal.learner

    found = []
    for path in sorted(Path(skdbal.learner.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__"):
                owner = node.value.id if isinstance(node.value, ast.Name) else None
                if owner not in ("self", "cls"):
                    found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_")
                    and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert found == []


def test_the_mixins_declare_what_they_need_of_their_host():
    from typing import get_type_hints

    from skdbal.learner import PredictiveMixin, SimulationMixin

    assert {"estimator_", "_ensure_initial_fit", "_model_or_template"} <= set(get_type_hints(PredictiveMixin))
    assert {"random_state", "verbose", "_check_params", "_template", "_make_template", "_unchanged_on_error",
            "_reset_pool", "_pool_hash"} <= set(get_type_hints(SimulationMixin))
    for cls in (PredictiveMixin, SimulationMixin):   # declared, not defined: the host's own are found
        for name in get_type_hints(cls):
            assert name not in vars(cls), (cls.__name__, name)
        for name in get_type_hints(cls):
            if name not in ("estimator_", "n_features_in_", "rng_", "history_", "_pool_hash"):
                assert hasattr(ActiveLearner(verbose=False), name), name   # ActiveLearner provides each
