"""An experiment grid on a real dask.distributed cluster: the rows of a local run, the same resume, the
same locks. Two single-threaded worker processes on 127.0.0.1, bounded in time and closed even on failure."""
import fcntl

import pytest
from _helpers import bounded
from distributed import LocalCluster

from skdbal.experiments import run_grid
from skdbal.experiments.results import FolderLockedError

TINY = dict(dataset="digits", n_queries=2, max_epochs=2, module_params={"kernel_size": 3}, n_samples=4,
            pool_subsample=120, n_validation=40)


def no_times(path):
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    keep = [i for i, h in enumerate(header) if not h.endswith("time")]
    return [[row.split(",")[i] for i in keep] for row in lines]


def on_cluster(fn):
    return bounded(fn, 240.0, "the grid on the cluster")


def test_grid_on_a_cluster_equals_local_resumes_and_locks(tmp_path):
    local = tmp_path / "local"
    run_grid("gal2017", ["bald", "random"], [1], local, verbose=False, torch_threads=1, **TINY)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        remote = tmp_path / "remote"
        with cluster.get_client() as client:
            before = {w: v for w, v in client.run(lambda: 0).items()}
        on_cluster(lambda: run_grid("gal2017", ["bald", "random"], [1], remote, verbose=False, scheduler=address,
                                 **TINY))
        # the rows are the local ones, and grid.json says where they ran
        assert no_times(remote / "results.csv") == no_times(local / "results.csv")
        assert f'"scheduler": "{address}"' in (remote / "grid.json").read_text()
        assert len(before) == 2
        # a finished grid is not run again
        csv = (remote / "runs" / "gal2017__bald__bayesian__seed1.csv").read_bytes()
        on_cluster(lambda: run_grid("gal2017", ["bald", "random"], [1], remote, verbose=False, scheduler=address,
                                 **TINY))
        assert (remote / "runs" / "gal2017__bald__bayesian__seed1.csv").read_bytes() == csv
        # a run whose lock another process holds is refused on the worker, the other run still finishes
        other = tmp_path / "other"
        (other / "runs").mkdir(parents=True)
        with open(other / "runs" / ".gal2017__bald__bayesian__seed1.lock", "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            with pytest.raises(FolderLockedError, match="another process is writing run gal2017__bald"):
                on_cluster(lambda: run_grid("gal2017", ["bald", "random"], [1], other, verbose=False,
                                         scheduler=address, **TINY))
        assert (other / "runs" / "gal2017__random__bayesian__seed1.csv").exists()
        assert not (other / "runs" / "gal2017__bald__bayesian__seed1.csv").exists()
