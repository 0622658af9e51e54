"""One server per store (:class:`skdbal.labelling.lock.StoreLock`), and a store readable by its owner only.

Before: nothing locked a store. A second ``skdbal label`` on the store of a running one started, its loop
died on ``UNIQUE constraint failed: models.version``, and it kept serving; and a new store was made 0644
while ``labels.csv`` was 0600.
"""
import os
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _helpers import stop_process, wait_for_http

from skdbal.labelling import LabelStore, StoreError
from skdbal.labelling.lock import StoreInUse, StoreLock, lock_path

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")

fcntl = pytest.importorskip("fcntl", reason="the store is locked with flock, which this platform lacks")


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def snapshot(store: Path) -> dict:
    """The bytes and modification times of the store and of SQLite's files beside it (not the lock's)."""
    paths = [Path(f"{store}{end}") for end in ("", "-wal", "-shm", "-journal")]
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in paths if p.exists()}


# ----------------------------------------------------------------------------------------------- the lock

def test_a_second_lock_on_a_store_is_refused_naming_the_store_and_the_holder(tmp_path):
    store = tmp_path / "s.db"
    with StoreLock(store) as first:
        assert first.held and first.path == tmp_path / "s.db.lock"
        assert mode(first.path) == 0o600
        assert first.path.read_text().split()[0] == str(os.getpid())
        with pytest.raises(StoreInUse) as refused:
            StoreLock(store).acquire()
        assert refused.value.pid == os.getpid()
        assert str(refused.value) == (f"the store {store} is in use by another skdbal server (process "
                                      f"{os.getpid()}): one server runs on a store at a time; stop that one, or "
                                      "give another store")
        assert isinstance(refused.value, StoreError)       # a ValueError: the commands say it in one line
    assert not first.held and os.listdir(tmp_path) == []   # released: the lock file is removed
    with StoreLock(store):                                 # and free again
        pass


def test_two_paths_to_one_store_take_one_lock(tmp_path):
    (tmp_path / "real").mkdir()
    store = tmp_path / "real" / "s.db"
    link = tmp_path / "link.db"
    link.symlink_to(store)
    assert lock_path(link) == lock_path(store) == tmp_path / "real" / "s.db.lock"
    with StoreLock(store):
        with pytest.raises(StoreInUse):
            StoreLock(link).acquire()
        with pytest.raises(StoreInUse):
            StoreLock(tmp_path / "real" / ".." / "real" / "s.db").acquire()


def test_a_lock_file_left_by_a_crash_stops_nobody(tmp_path):
    store = tmp_path / "s.db"
    lock_path(store).write_text("999999999 elsewhere\n")     # a holder long dead: nobody holds the flock
    with StoreLock(store) as lock:
        assert lock.path.read_text() == f"{os.getpid()} {__import__('socket').gethostname()}\n"


def test_a_holder_that_wrote_nothing_is_refused_without_a_pid(tmp_path):
    store = tmp_path / "s.db"
    with open(lock_path(store), "w") as held:     # another program's flock on the file, no pid in it
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(StoreInUse, match=r"in use by another skdbal server: one server") as refused:
            StoreLock(store).acquire()
    assert refused.value.pid is None


def test_a_lock_in_a_missing_folder_is_the_store_s_own_error(tmp_path):
    store = tmp_path / "no" / "s.db"
    with pytest.raises(StoreError, match=f"cannot make the store {re.escape(str(store))}: no folder"):
        StoreLock(store).acquire()
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------------------- the store's mode

@pytest.mark.parametrize("target", ["victim.txt", "s.db"])
def test_a_lock_file_that_is_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path, target):
    """``s.db.lock`` a link to another file, or to the store itself: refused in one line naming the lock
    file, nothing written (before: the link was followed and its target truncated to the pid and host)."""
    store = tmp_path / "s.db"
    LabelStore(store).close()
    (tmp_path / "victim.txt").write_text("precious\n")
    os.symlink(target, tmp_path / "s.db.lock")
    before = {name: (tmp_path / name).read_bytes() for name in ("victim.txt", "s.db")}
    with pytest.raises(StoreError) as refused:
        StoreLock(store).acquire()
    assert str(refused.value) == (f"cannot lock the store {store}: its lock file {tmp_path / 's.db.lock'} is a "
                                  "symbolic link; remove it and start again")
    assert {name: (tmp_path / name).read_bytes() for name in ("victim.txt", "s.db")} == before
    assert os.path.islink(tmp_path / "s.db.lock")


def test_a_lock_file_that_is_not_a_regular_file_is_refused(tmp_path):
    store = tmp_path / "s.db"
    (tmp_path / "s.db.lock").mkdir()
    with pytest.raises(StoreError, match=re.escape(f"its lock file {tmp_path / 's.db.lock'} is not a regular file")):
        StoreLock(store).acquire()


def test_a_new_store_and_its_wal_and_shm_are_readable_by_their_owner_only(tmp_path):
    """Before: 0644 (SQLite's default), while the labels CSV beside it was 0600."""
    path = tmp_path / "s.db"
    store = LabelStore(path)
    store.add_items(["a", "b"])
    store.add_event(0, "label", "cat")
    assert {p.name: mode(p) for p in tmp_path.iterdir()} == {"s.db": 0o600, "s.db-wal": 0o600, "s.db-shm": 0o600}
    store.close()
    assert [p.name for p in tmp_path.iterdir()] == ["s.db"] and mode(path) == 0o600


def test_a_store_made_before_keeps_its_mode(tmp_path):
    path = tmp_path / "s.db"
    LabelStore(path).close()
    os.chmod(path, 0o640)
    store = LabelStore(path)
    store.add_items(["a", "b"])
    assert mode(path) == 0o640 and mode(f"{path}-wal") == 0o640     # SQLite gives its files the store's mode
    store.close()
    assert mode(path) == 0o640


# ----------------------------------------------------------------------------------------- the commands

def test_skdbal_label_on_a_held_store_is_one_line_and_touches_nothing(tmp_path, capsys):
    """The command's start path, in this process: refused after the port and before the store is read."""
    import argparse

    from skdbal.labelling.cli import add_parser, run

    rows = tmp_path / "rows.npy"
    np.save(rows, np.arange(40, dtype=np.float32).reshape(20, 2))
    store = tmp_path / "s.db"
    LabelStore(store).close()
    before = snapshot(store)
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--npy", str(rows), "--classes", "a,b", "--store", str(store), "--port", "0"])
    with StoreLock(store):
        assert run(args) == 2
        assert snapshot(store) == before
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"skdbal label: error: the store {store} is in use by another skdbal server (process {os.getpid()}): "
        "one server runs on a store at a time; stop that one, or give another store"]
    assert sorted(os.listdir(tmp_path)) == ["rows.npy", "s.db"]


def test_skdbal_label_with_a_linked_lock_file_is_one_line_and_touches_nothing(tmp_path, capsys):
    import argparse

    from skdbal.labelling.cli import add_parser, run

    rows = tmp_path / "rows.npy"
    np.save(rows, np.arange(40, dtype=np.float32).reshape(20, 2))
    store = tmp_path / "s.db"
    LabelStore(store).close()
    (tmp_path / "victim.txt").write_text("precious\n")
    os.symlink("victim.txt", tmp_path / "s.db.lock")
    before = snapshot(store)
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--npy", str(rows), "--classes", "a,b", "--store", str(store), "--port", "0"])
    assert run(args) == 2
    assert snapshot(store) == before and (tmp_path / "victim.txt").read_text() == "precious\n"
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"skdbal label: error: cannot lock the store {store}: its lock file {tmp_path / 's.db.lock'} is a "
        "symbolic link; remove it and start again"]


def test_store_path_is_the_store_that_make_session_makes(tmp_path, monkeypatch):
    """Without --store, the store (and so its lock) is skdbal-<name>.db here, known before the pool is read."""
    import argparse

    from skdbal.labelling.cli import add_parser, make_session, store_path

    monkeypatch.chdir(tmp_path)
    rows = tmp_path / "rows.npy"
    np.save(rows, np.arange(40, dtype=np.float32).reshape(20, 2))
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--npy", str(rows), "--classes", "a,b"])
    assert store_path(args) == "skdbal-rows.db"
    session, _, store = make_session(args)
    session.store.close()
    assert store == "skdbal-rows.db" and (tmp_path / store).exists()


# -------------------------------------------------------------------------------- two real skdbal label

def start_label(store, rows, log):
    """A real ``skdbal label`` on ``store``, on a free port: the process and its address, once it answers."""
    with open(log, "ab") as err:     # the process holds its own copy
        proc = subprocess.Popen([sys.executable, "-m", "skdbal", "label", "--npy", str(rows), "--classes", "a,b",
                                 "--store", str(store), "--port", "0"], stdout=subprocess.PIPE, stderr=err,
                                text=True, env=ENV, cwd=ROOT)
    line = proc.stdout.readline()
    found = re.search(r"open (http://127\.0\.0\.1:\d+/)", line)
    assert found, f"no address in {line!r}; its stderr:\n{Path(log).read_text()[-3000:]}"
    assert wait_for_http(found.group(1), process=proc) is not None
    return proc, found.group(1)


def n_queries(store: Path, scratch: Path) -> int:
    """The queries recorded in ``store``, read from a copy of it and its -wal (a reader of the store itself
    would write in its -shm)."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    for end in ("", "-wal"):
        if Path(f"{store}{end}").exists():
            shutil.copyfile(f"{store}{end}", scratch / f"copy.db{end}")
    conn = sqlite3.connect(scratch / "copy.db")
    try:
        return conn.execute("SELECT COUNT(*) FROM queries").fetchone()[0]
    finally:
        conn.close()


def quiet(store: Path, timeout: float = 120.0) -> dict:
    """The store's snapshot once the first batch is recorded and it stays the same for a second (nobody
    labels: the server writes nothing more)."""
    deadline = time.time() + timeout
    while n_queries(store, store.parent / "scratch") == 0:
        assert time.time() < deadline, "the first server recorded no first batch"
        time.sleep(0.2)
    before = snapshot(store)
    while time.time() < deadline:
        time.sleep(1.0)
        now = snapshot(store)
        if now == before:
            return now
        before = now
    raise AssertionError("the store kept changing with nobody labelling")


@pytest.mark.slow
def test_a_second_skdbal_label_on_a_store_is_refused_and_one_starts_after_kill_9(tmp_path):
    """Two real servers: the second is refused in one line naming the store and the first's process, the
    store left byte for byte as it was (mtimes too); after ``kill -9`` of the first, a new one starts."""
    rows = tmp_path / "rows.npy"
    np.save(rows, np.arange(40, dtype=np.float32).reshape(20, 2))
    store = tmp_path / "s.db"
    procs = []
    try:
        first, url = start_label(store, rows, tmp_path / "first.log")
        procs.append(first)
        before = quiet(store)
        second = subprocess.run([sys.executable, "-m", "skdbal", "label", "--npy", str(rows), "--classes", "a,b",
                                 "--store", str(store), "--port", "0"], capture_output=True, text=True,
                                timeout=120, env=ENV, cwd=ROOT)
        assert (second.returncode, second.stdout) == (2, ""), second.stderr
        assert second.stderr.splitlines() == [
            f"skdbal label: error: the store {store} is in use by another skdbal server (process {first.pid}): "
            "one server runs on a store at a time; stop that one, or give another store"]
        assert snapshot(store) == before
        assert first.poll() is None and wait_for_http(url, process=first) is not None   # the first serves on

        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        assert lock_path(store).exists()            # left by the kill; the kernel released the flock
        third, url = start_label(store, rows, tmp_path / "third.log")
        procs.append(third)
        assert lock_path(store).read_text().split()[0] == str(third.pid)
        assert stop_process(third, signal.SIGTERM, grace=60) == 0
        assert not lock_path(store).exists()        # a clean stop removes it
    finally:
        for proc in procs:
            stop_process(proc, signal.SIGKILL, grace=10)
            proc.stdout.close()
