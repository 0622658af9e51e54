"""The labelling session as collaborators: an offer board, the store's oracle and journal taking the board
and the store, callbacks where they report back; no import circle, no reach-in to another object's
private members, request handlers at module level."""
import ast
import math
from pathlib import Path

import numpy as np
import pytest

import skdbal
from skdbal.labelling import LabelStore, StoreJournal, StoreOracle
from skdbal.labelling._offers import OfferBoard

PACKAGE = Path(skdbal.__file__).resolve().parent
#: The modules scanned for reach-ins: the labelling session's collaborators and servers, and Label Studio's.
MODULES = sorted((PACKAGE / "labelling").glob("*.py")) + sorted((PACKAGE / "labelstudio").glob("*.py"))


def _imports(path: Path, package: str = "skdbal.labelling") -> set:
    """The modules of ``package`` that ``path`` imports anywhere (module level, functions, TYPE_CHECKING)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                names = [f"{package}.{node.module}"] if node.module else \
                    [f"{package}.{a.name}" for a in node.names]
            elif node.level == 0 and (node.module or "").startswith(package + "."):
                names = [node.module]
            else:
                continue
            found.update(n for n in names if n.count(".") == package.count(".") + 1)
    return found


def test_the_labelling_package_has_no_import_circle_not_even_under_type_checking():
    graph = {f"skdbal.labelling.{p.stem}": _imports(p) for p in (PACKAGE / "labelling").glob("*.py")
             if p.stem != "__init__"}
    assert "skdbal.labelling._oracle" in graph["skdbal.labelling.session"]   # the scan sees the imports

    def reaches(start, goal, seen=()):
        return any(t == goal or (t not in seen and reaches(t, goal, seen + (t,))) for t in graph.get(start, ()))

    circles = [m for m in graph if reaches(m, m)]
    assert circles == []


def test_no_module_reaches_into_another_objects_private_members():
    reach_ins = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                    reach_ins.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert reach_ins == []


@pytest.mark.parametrize("module, routes", [
    ("labelling.app", {"page", "batch", "item_png", "item_values", "submit", "skip", "undo", "status", "labels_csv",
                       "versions", "model_file"}),
    ("labelstudio.backend", {"health", "setup", "versions", "predict", "webhook", "train"})])
def test_the_servers_route_to_module_level_functions(module, routes):
    """Each route is a module-level function; no function of the module defines one inside (no closures)."""
    tree = ast.parse((PACKAGE / (module.replace(".", "/") + ".py")).read_text())
    top = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert routes <= top
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = [n.name for n in ast.walk(node) if n is not node and
                     isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            assert inner == [], f"{node.name} defines {inner}"


class Learner:
    """A learner as the board and the journal read it: its version, labelled rows and training labels."""
    random_state = 7

    def __init__(self, n):
        self.step_ = -1
        self.labelled_mask_ = np.zeros(n, dtype=bool)
        self.y_training_ = []


@pytest.fixture
def store(tmp_path):
    s = LabelStore(tmp_path / "s.db")
    s.add_items([f"k{i}" for i in range(6)])
    yield s
    s.close()


def board_of(store, learner, **kw):
    return OfferBoard(store, np.arange(12.0).reshape(6, 2), [f"k{i}" for i in range(6)], learner,
                      **{"batch_size": 2, "lease_timeout": 600.0, "query_kwargs": {}, **kw})


def test_the_board_offers_the_picks_then_what_was_left_and_records_the_picks_only(store):
    board = board_of(store, Learner(6))
    board.start_training()
    board.offer([4, 1], [2], {4: 0.9, 1: 0.5}, version=3)
    assert board.batch == [4, 1, 2] and not board.training                 # a new batch: the retrain is over
    assert [(q["model_version"], q["scores"], q["kind"]) for q in store.queries()] == [(3, [(4, 0.9), (1, 0.5)],
                                                                                         "batch")]
    store.add_event(1, "label", "a", annotator="x")
    assert board.pending() == [4, 2]
    got = board.next_batch("ann", n=1)
    assert [(b["item"], b["key"], b["score"], b["tail"], b["second_look"]) for b in got] == [(4, "k4", 0.9, False,
                                                                                            False)]
    assert store.live_leases() == {4: "ann"}
    got = board.next_batch("bob")                                           # 4 is held by ann, 1 is labelled
    assert [b["item"] for b in got] == [2] and math.isnan(got[0]["score"])  # left by an earlier batch: no score


def test_the_board_keeps_training_and_waiting_for_through_its_methods_and_wakes_waiters(store):
    """The loop says what it does through the board's methods, which keep the pair consistent (training
    waits for nothing) and wake people's threads; nobody writes the flags from outside."""
    import threading

    board = board_of(store, Learner(6))
    assert (board.training, board.waiting_for) == (False, None)
    with pytest.raises(AttributeError):
        board.training = True
    with pytest.raises(AttributeError):
        board.waiting_for = "x"
    board.wait_for("labels of at least two classes")
    assert (board.training, board.waiting_for) == (False, "labels of at least two classes")
    woken, waiting = [], threading.Event()

    def wait():
        with board.changed:         # the board cannot change before this thread waits: it holds the lock
            waiting.set()
            woken.append(board.changed.wait(timeout=5))

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert waiting.wait(5)
    board.start_training()
    waiter.join(5)
    assert woken == [True] and (board.training, board.waiting_for) == (True, None)
    board.finish_training()
    assert (board.training, board.waiting_for) == (False, None)


def test_the_board_guesses_with_the_published_model_only(store):
    class Half:   # a model guessing "hi" for rows whose first value is at least 6
        calls = []

        def predict(self, X):
            self.calls.append(len(X))
            return np.where(np.asarray(X)[:, 0] >= 6, "hi", "lo")

    board = board_of(store, Learner(6))
    assert board.guesses([0, 5]) == [None, None] and board.published is None
    board.offer([3, 0], [], {}, version=0)
    board.publish(0, Half())                        # guesses what is offered ahead: rows 3 and 0
    assert board.published[0] == 0 and Half.calls == [2]
    assert board.guesses([3, 0, 3]) == ["hi", "lo", "hi"] and Half.calls == [2]   # served, not computed
    assert board.guesses([5]) == ["hi"] and Half.calls == [2, 1]


def test_the_journal_reports_a_new_version_through_its_callback_before_the_store_records_it(store):
    learner = Learner(6)
    board = board_of(store, learner)
    oracle = StoreOracle(board, store, learner, retrain_after=2)
    seen = []
    journal = StoreJournal(store, oracle, on_version=lambda v: seen.append((v, len(store.models()))))
    learner.step_, learner.y_training_, oracle.cursor = 0, ["a", "b", "a"], 5
    journal.append({"step": 0, "fit_time": 0.0}, learner)
    learner.step_ = 1
    journal.append({"step": 1, "fit_time": 0.0, "accuracy": 0.5}, learner)  # no fit: no new version
    assert seen == [(0, 0)]                                                  # called before the store had it
    assert [(m["version"], m["last_event"], m["n_labels"], m["metrics"]) for m in store.models()] == [(0, 5, 3, {})]
    assert journal.last_retrain is not None


def test_the_oracle_stops_a_collect_that_waits(store):
    from skdbal.labelling._oracle import SessionStopped

    learner = Learner(6)
    oracle = StoreOracle(board_of(store, learner), store, learner, retrain_after=2)
    oracle.stop()
    with pytest.raises(SessionStopped):
        oracle.collect([0, 1])
