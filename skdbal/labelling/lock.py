"""One server per store: an exclusive lock that ``skdbal label`` and ``skdbal labelstudio`` hold while they serve.

Two servers on one store would each run the session's loop on it: the second
one's loop fails on the first model version it records (the first server
recorded it already), and it goes on serving people a session that no longer
learns. :class:`StoreLock` refuses the second server before it reads or
writes the store.

The lock is POSIX ``flock`` on a file beside the store, ``<store>.lock``
(beside the file a symbolic link names, so that two paths to one store take
one lock), never on the store itself: SQLite keeps its own POSIX record locks
on the store, which a second descriptor of the same file, once closed, would
drop. A lock file that is a symbolic link, or not a regular file, is refused (never followed: the file it
names would be overwritten). The kernel releases the lock when its holder dies, ``kill -9``
included: a new server starts at once after a crash, and the ``.lock`` file
a crash leaves behind stops nobody (a clean stop removes it). The file holds
the holder's process id and host, to name it in the refusal. On NFS, Linux
takes ``flock`` as a lock the server arbitrates; a store is safest on a local
disk, which SQLite's write-ahead log needs anyway. Where ``fcntl`` is missing
(Windows), or the file system refuses ``flock``, the store is served
unlocked (:attr:`StoreLock.held` is False).
"""
from __future__ import annotations

import errno
import os
import socket
import stat
from pathlib import Path
from typing import Optional, Union

from .store import StoreError

__all__ = ["StoreInUse", "StoreLock", "lock_path"]


class StoreInUse(StoreError):
    """A store that another server holds (:class:`StoreLock`); ``pid`` is its process id, if known.

    Examples
    --------
    >>> import os, tempfile
    >>> from skdbal.labelling.lock import StoreInUse, StoreLock
    >>> store = os.path.join(tempfile.mkdtemp(), "project.db")
    >>> with StoreLock(store):
    ...     try:
    ...         StoreLock(store).acquire()
    ...     except StoreInUse as exc:
    ...         print(exc.pid == os.getpid())
    True
    """

    def __init__(self, message: str, pid: Optional[int] = None):
        super().__init__(message)
        self.pid = pid


def lock_path(store: Union[str, os.PathLike]) -> Path:
    """The lock file of ``store``: ``<store>.lock``, beside the file that a symbolic link names.

    Examples
    --------
    >>> from skdbal.labelling.lock import lock_path
    >>> lock_path("/data/pets.db").name
    'pets.db.lock'
    """
    path = Path(store).resolve()
    return path.with_name(path.name + ".lock")


class StoreLock:
    """An exclusive lock on a store, held while a server runs on it; a second one is refused.

    Parameters
    ----------
    store : str or path-like
        The store's file (it need not exist yet: the lock is taken before it is made).

    Attributes
    ----------
    path : pathlib.Path
        The lock file, ``<store>.lock`` (:func:`lock_path`).
    held : bool
        Whether the lock is held (False before :meth:`acquire`, after :meth:`release`, and where the
        platform or file system has no ``flock``).

    Examples
    --------
    >>> import os, tempfile
    >>> from skdbal.labelling.lock import StoreInUse, StoreLock
    >>> store = os.path.join(tempfile.mkdtemp(), "project.db")
    >>> first = StoreLock(store).acquire()
    >>> try:
    ...     StoreLock(store).acquire()                 # a second server on the same store
    ... except StoreInUse as exc:
    ...     print(str(exc).replace(store, "STORE").split(" (process")[0])
    the store STORE is in use by another skdbal server
    >>> first.release()                                # the lock file is removed
    >>> os.path.exists(first.path)
    False
    >>> with StoreLock(store) as lock:                 # free again
    ...     lock.held
    True
    """

    def __init__(self, store: Union[str, os.PathLike]):
        self.store = Path(store)
        self.path = lock_path(store)
        self.held = False
        self._fd: Optional[int] = None

    def acquire(self) -> "StoreLock":
        """Take the lock, without waiting; this lock.

        Raises
        ------
        StoreInUse
            If another server holds it: the message names the store and the holder's process id (and its
            host, if another), when it wrote them. Nothing is read or written in the store.
        StoreError
            If the store's folder is missing, or the lock file cannot be made there.
        """
        if self._fd is not None:
            return self
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: served unlocked
            return self
        if not self.path.parent.is_dir():
            raise StoreError(f"cannot make the store {self.store}: no folder {str(self.store.parent)!r}")
        while True:
            self._check_file()
            try:   # never through a symbolic link: the file it names would be truncated
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise self._odd_file("a symbolic link") from None
                raise StoreError(f"cannot lock the store {self.store}: cannot make {self.path} "
                                 f"({exc.strerror or exc})") from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise self._odd_file("not a regular file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)     # a file system without flock: served unlocked
                    return self
                holder = _read_holder(fd)
                os.close(fd)
                raise self._in_use(holder) from None
            try:  # the holder before us may have removed the file after we opened it: lock the one there now
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        except OSError:   # the holder is not named, but the lock is held
            pass
        self._fd, self.held = fd, True
        return self

    def _check_file(self) -> None:
        """Raise :class:`StoreError` if the lock file's path is a symbolic link or not a regular file."""
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise self._odd_file("a symbolic link")
        if not stat.S_ISREG(mode):
            raise self._odd_file("not a regular file")

    def _odd_file(self, what: str) -> StoreError:
        return StoreError(f"cannot lock the store {self.store}: its lock file {self.path} is {what}; "
                          "remove it and start again")

    def _in_use(self, holder) -> StoreInUse:
        pid, host = holder
        if pid is None:
            who = ""
        elif host and host != socket.gethostname():
            who = f" (process {pid} on {host})"
        else:
            who = f" (process {pid})"
        return StoreInUse(f"the store {self.store} is in use by another skdbal server{who}: one server runs on a "
                          "store at a time; stop that one, or give another store", pid)

    def release(self) -> None:
        """Release the lock and remove its file (while still held: a server starting meanwhile locks a new
        one). Releasing a lock not held does nothing."""
        fd, self._fd, self.held = self._fd, None, False
        if fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(fd)        # closing the last descriptor releases the flock

    def __enter__(self) -> "StoreLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int):
    """``(pid, host)`` that the holder wrote in its lock file, or ``(None, None)``."""
    try:
        text = os.pread(fd, 200, 0).decode("ascii", "replace").split()
        return int(text[0]), (text[1] if len(text) > 1 else None)
    except (OSError, ValueError, IndexError):
        return None, None
