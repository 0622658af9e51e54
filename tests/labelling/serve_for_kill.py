"""A labelling server for ``test_kill_server.py`` to kill (a script, not a test).

Usage: ``python serve_for_kill.py STORE PORT TOKEN FITS_LOG [LEASE_TIMEOUT]``

It serves a :class:`LabellingSession` over the 1797 digits (cheap to start:
a logistic regression, batches of 40) with uvicorn on 127.0.0.1:PORT, as
``skdbal label`` does (holding the store's lock), resuming the session in STORE if there is one. Each
time the learner trains, it appends one JSON line to FITS_LOG: this
process's id, the model's step and a digest of its training set (the
sorted ``(item, label)`` pairs), so that the test can tell which model a
restarted server trained first, and on which labels. Each submission
waits 10 ms after its label is committed before it is answered, so that
some kills land between the commit and the answer. LEASE_TIMEOUT (seconds,
600 by default) is the session's ``lease_timeout``: a short one lets leases
expire while labels arrive.
"""
import hashlib
import json
import os
import sys
import time
from pathlib import Path


def training_digest(pairs) -> str:
    """A digest of a training set, given as ``(item, label)`` pairs in any order (the test computes it too)."""
    text = json.dumps(sorted([int(item), str(label)] for item, label in pairs))
    return hashlib.sha256(text.encode()).hexdigest()


def main(store, port, token, fits_log, lease_timeout="600"):
    import uvicorn
    from sklearn.linear_model import LogisticRegression

    from skdbal import ActiveLearner
    from skdbal.acquisition import max_entropy
    from skdbal.labelling import LabellingSession
    from skdbal.labelling.app import make_app

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/, for _helpers
    from _helpers import digits_flat

    X, _ = digits_flat()
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                            seeding="step", verbose=False)
    refit = learner.refit

    def logged_refit(*args, **kwargs):
        out = refit(*args, **kwargs)
        line = json.dumps({"pid": os.getpid(), "step": int(learner.step_), "n_labels": len(learner.y_training_),
                           "digest": training_digest(zip(learner.labelled_idx_, learner.y_training_))})
        fd = os.open(fits_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())   # one short write: a kill leaves whole lines
        finally:
            os.close(fd)
        return out

    learner.refit = logged_refit
    session = LabellingSession(learner, X, classes=range(10), store=store, batch_size=40,
                               lease_timeout=float(lease_timeout))
    submit = session.submit

    def slow_to_answer(*args, **kwargs):
        event = submit(*args, **kwargs)   # committed
        time.sleep(0.01)                  # a wider window for a kill between the commit and the answer
        return event

    session.submit = slow_to_answer
    app = make_app(session, token=token)
    with session:
        uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


def locked_main(store, *args):
    """:func:`main` holding the store's lock, as ``skdbal label`` does: each restart after a kill takes it."""
    from skdbal.labelling.lock import StoreLock

    with StoreLock(store):
        main(store, *args)


if __name__ == "__main__":
    locked_main(*sys.argv[1:6])
