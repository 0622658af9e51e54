"""An experiment grid's runs spread over a Dask cluster's workers.

Each run is one task. The run files stay in the grid's output folder, which
every worker must reach (a shared file system): the same per-run locks
(``flock`` on the run's lock file; on NFS, Linux maps it to a POSIX record
lock the server arbitrates) and the same resume from the last finished step
as a local run, because the task is the local run's own code. The strategies
and decorators registered in the user's code travel with each task and are
registered on the worker before it runs. A worker that dies loses only the
step it was computing: Dask gives the task to another worker, which resumes
the run from its files.
"""
from __future__ import annotations

from typing import Callable, Sequence, Tuple

__all__ = ["map_runs"]


def map_runs(scheduler, fn: Callable, calls: Sequence[Tuple[tuple, dict]], keys: Sequence[str]) -> list:
    """``[fn(*args, **kwargs) for args, kwargs in calls]``, one task per call on a cluster.

    Every call runs to its end, failed or not, before the first failure is
    raised: the other runs of a grid are not thrown away for one.

    Parameters
    ----------
    scheduler : str or distributed.Client
        The scheduler's address (``tcp://host:8786``) or a connected client.
    fn : callable
        Must pickle (a module-level function).
    calls : sequence of (args, kwargs)
    keys : sequence of str
        A name for each task, shown on the dashboard (a run's id).

    Returns
    -------
    list
        Each call's result, in order.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> from skdbal.dask.grid import map_runs
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
    ...     map_runs(cluster.scheduler_address, divmod, [((7, 2), {}), ((9, 4), {})], ["a", "b"])
    [(3, 1), (2, 1)]
    """
    from distributed import Client, wait

    own = not isinstance(scheduler, Client)
    client = Client(scheduler) if own else scheduler
    try:
        futures = [client.submit(fn, *args, key=f"run-{key}", pure=False, **kwargs)
                   for (args, kwargs), key in zip(calls, keys)]
        wait(futures)
        for f in futures:
            if f.status == "error":
                f.result()  # raises the run's own exception
        return client.gather(futures)
    finally:
        if own:
            client.close()
