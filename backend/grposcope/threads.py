"""One BLAS thread per grposcope process.

The server scales by processes (API workers, fit workers), each running many small numpy
computations. OpenBLAS, numpy's and scipy's BLAS, starts a thread per core and splits a vector
operation over them once it is long enough (a dot product of tens of thousands of points, as
the rules take over a long run); when the other cores are busy with the other processes,
those threads wait on each other: measured on a 2-core machine under load, one 34,000-point
dot product took 7.8 ms with 2 BLAS threads against 0.006 ms with one.
"""

from __future__ import annotations

import os

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """One BLAS thread, unless the environment asks for another number.

    The variables cover the BLAS libraries loaded from now on (scipy's is its own library,
    loaded on first use) and child processes (uvicorn's workers); threadpoolctl sets the ones
    already loaded (an app built by a process that imported numpy first). Called at process
    start by the CLI and the app factory."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    from threadpoolctl import threadpool_limits

    wanted = os.environ["OPENBLAS_NUM_THREADS"]
    threadpool_limits(limits=int(wanted) if wanted.isdigit() else 1, user_api="blas")
