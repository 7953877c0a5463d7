"""How the benchmark's runs use processes and threads, for every suite.

* :func:`worker_context`: the start method of the runs' worker processes, a forkserver
  where available (each worker starts from a clean interpreter, not a copy of the
  parent's threads and torch state), else spawn.
* :func:`finished_futures`: calls run in a pool of such workers, handed back as they
  finish.
* :func:`limited_threads`: the threads of one run, torch's and the BLAS/OpenMP pools'.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing.context import BaseContext


def worker_context(preload: Sequence[str] = ()) -> BaseContext:
    """A forkserver context where available (that imports the modules ``preload`` once,
    in the server, not in every worker), else spawn."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        if preload:
            context.set_forkserver_preload(list(preload))
        return context
    return multiprocessing.get_context("spawn")


def finished_futures(function: Callable, calls: Mapping[Hashable, tuple],
                     jobs: int) -> Iterator[tuple[Hashable, Future]]:
    """Run ``function(*arguments)`` for each ``key: arguments`` of ``calls`` in ``jobs``
    worker processes (:func:`worker_context`); yield ``(key, its future)`` as each call
    finishes (its result, or the exception it or its worker raised). Leaving the
    iteration early cancels the calls not started."""
    executor = ProcessPoolExecutor(jobs, mp_context=worker_context())
    try:
        pending = {executor.submit(function, *arguments): key
                   for key, arguments in calls.items()}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield pending.pop(future), future
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


@contextlib.contextmanager
def limited_threads(threads: int) -> Iterator[None]:
    """Within the block, torch and the BLAS/OpenMP pools use ``threads`` threads."""
    from threadpoolctl import threadpool_limits

    from ..network import torch_threads

    with torch_threads(threads), threadpool_limits(limits=threads):
        yield
