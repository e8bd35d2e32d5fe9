"""`grposcope worker` refuses a database that is not at the newest schema revision, and
settings it cannot run with."""

from __future__ import annotations

import subprocess
import sys


def test_worker_refuses_unmigrated_database(tmp_path):
    cmd = [sys.executable, "-m", "grposcope.cli.main", "worker", "--db",
           f"sqlite:///{tmp_path / 'fresh.db'}"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "grposcope migrate" in done.stderr + done.stdout


def test_worker_rejects_negative_interval(tmp_path):
    cmd = [sys.executable, "-m", "grposcope.cli.main", "worker", "--interval", "-1", "--db",
           f"sqlite:///{tmp_path / 'x.db'}"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--interval" in done.stderr + done.stdout


def test_worker_rejects_fewer_than_one_thread(tmp_path):
    cmd = [sys.executable, "-m", "grposcope.cli.main", "worker", "--threads", "0", "--db",
           f"sqlite:///{tmp_path / 'x.db'}"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--threads" in done.stderr + done.stdout
