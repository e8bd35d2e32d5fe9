"""One BLAS thread per process (grposcope/threads.py), in this process and its children."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from grposcope.threads import THREAD_VARIABLES, one_blas_thread


@pytest.fixture
def restored(monkeypatch: pytest.MonkeyPatch):
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with threadpool_limits(limits=None):  # whatever this test sets is undone after it
        yield


def _blas_threads() -> set[int]:
    np.dot(np.ones(3), np.ones(3))  # numpy's BLAS is loaded
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_the_loaded_blas_and_the_environment_get_one_thread(restored) -> None:
    one_blas_thread()
    assert _blas_threads() == {1}
    assert all(os.environ[name] == "1" for name in THREAD_VARIABLES)


def test_a_number_the_user_set_is_kept(restored, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    one_blas_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "2"
    assert _blas_threads() <= {1, 2}


def test_a_blas_loaded_later_gets_one_thread_too() -> None:
    """scipy's OpenBLAS is a library of its own, loaded after the CLI starts: the variables
    reach it (threadpoolctl alone would only limit what was loaded)."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    code = (
        "import numpy\n"  # numpy's BLAS first, as the app's imports do
        "from grposcope.threads import one_blas_thread; one_blas_thread()\n"
        "import scipy.linalg, numpy; scipy.linalg.svd(numpy.ones((4, 4)))\n"
        "from threadpoolctl import threadpool_info\n"
        "print(sorted({i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip
    assert out.stdout.strip() == "[1]"
