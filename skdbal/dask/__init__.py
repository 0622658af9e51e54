"""Pools bigger than one machine, scored where they live on a Dask cluster.

:func:`write_pool` and :func:`open_pool` keep a pool in Zarr, chunked by
rows, on a disk or object store every worker reaches; :func:`query_pool`
queries it on a ``dask.distributed`` cluster, sending the model to each
worker once and bringing back only each chunk's best candidates;
:func:`acquire_among` is the driver through which a learner whose pool is a
dask array queries it there. Behind the ``dask`` extra
(``pip install 'skdbal[dask]'``); the estimators never import this
subpackage. Whatever meets a dask array pool imports it then:
:func:`skdbal.acquisition.base.acquire_among`, through which the learner
queries and the decorators filter, and the learner's pool when it is given
one. No ``import skdbal.dask`` is needed
first, and ``import skdbal`` imports no dask.
"""
from .pool import open_pool, write_pool
from .scoring import acquire_among, query_pool

__all__ = ["open_pool", "write_pool", "query_pool", "acquire_among"]
