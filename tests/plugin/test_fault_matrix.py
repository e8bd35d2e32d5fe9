"""The client's fault matrix (issue 13) against a real `grposcope serve`, on SQLite and
Postgres: the server killed, the server stalled and then the training process killed, a
poisoned value, a batch refused for good. Each test counts what was logged against what the
server stored: nothing lost but what the fault must cost, nothing stored twice.

The server-side rows (the database killed, several writers on one run) are in tests/api."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grposcope_trainer import Run
from grposcope_trainer.spool import RunSpool, keyed_root
from tests.fixtures import databases
from tests.fixtures.server import LiveServer
from tests.plugin.helpers import Reader, RefusingProxy, assert_stored, wait_for

FAST = dict(batch_interval=0.05, max_backoff=0.5, replay_orphans=False)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'matrix.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
        databases.truncate_all(url)
    live = LiveServer(url, tmp_path / "server.log")
    live.start()
    yield live
    if live.process is not None and live.process.poll() is None:
        live.process.send_signal(signal.SIGCONT)  # a test that failed mid-stall
    live.stop()


def _stored_run(server: LiveServer, name: str) -> tuple[Reader, dict[str, Any]]:
    reader = Reader(server.url, server.admin_token)
    (summary,) = [r for r in reader.runs("matrix") if r["name"] == name]
    return reader, reader.run(summary["id"])


@pytest.mark.slow
def test_server_killed_mid_run(server: LiveServer, tmp_path: Path) -> None:
    token = server.token("alpha")
    logged = {}
    with Run("matrix", "killed", url=server.url, token=token, spool_dir=tmp_path / "spool",
             flush_timeout=60, **FAST) as run:  # fmt: skip
        for step in range(1, 301):
            if step == 100:
                server.stop(kill=True)
            if step == 200:
                server.start()
            logged[step] = {"reward": step / 300, "loss": 1.0 / step}
            run.log(step, logged[step])
            time.sleep(0.002)
    assert run.finish().delivered
    reader, detail = _stored_run(server, "killed")
    assert (detail["status"], detail["last_step"]) == ("finished", 300)
    assert_stored(reader, detail["id"], logged)  # 600 logged, 600 stored, none twice


VICTIM = textwrap.dedent(
    """
    import sys
    from grposcope_trainer import Run
    url, token, spool = sys.argv[1:4]
    run = Run(project="matrix", name="victim", url=url, token=token, spool_dir=spool,
              batch_interval=0.05, max_backoff=0.5, request_timeout=300, replay_orphans=False)
    for line in sys.stdin:
        first, last = map(int, line.split())
        for step in range(first, last + 1):
            run.log(step, {"reward": step / 1000, "loss": 1.0})
        print("LOGGED", last, flush=True)
    """
)


@pytest.mark.slow
def test_server_stalled_then_training_process_killed(server: LiveServer, tmp_path: Path) -> None:
    token = server.token("alpha")
    spool_dir = tmp_path / "spool"
    victim = subprocess.Popen(
        [sys.executable, "-c", VICTIM, server.url, token, str(spool_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    reader = Reader(server.url, server.admin_token)
    try:
        victim.stdin.write("1 50\n")
        victim.stdin.flush()
        assert victim.stdout.readline().split() == ["LOGGED", "50"]
        wait_for(lambda: any(r["last_step"] == 50 for r in reader.runs("matrix")), timeout=60)
        os.kill(server.process.pid, signal.SIGSTOP)  # stalled: connections hang, no answer
        stalled_at = time.monotonic()
        for first in range(51, 1001, 50):  # 950 steps logged into the stall
            victim.stdin.write(f"{first} {first + 49}\n")
            victim.stdin.flush()
            assert victim.stdout.readline().split() == ["LOGGED", str(first + 49)]
            time.sleep(0.2)
        (run_dir,) = [p for p in keyed_root(spool_dir, server.url, token).iterdir()]
        spool = RunSpool(run_dir.parent, run_dir.name)
        # The sender is stuck in a request (timeout 300 s): only the flusher writes these.
        wait_for(lambda: spool.pending_steps() >= 950, timeout=60)
        time.sleep(max(0.0, 10.0 - (time.monotonic() - stalled_at)))  # stalled for 10 s
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        os.kill(server.process.pid, signal.SIGCONT)

    # The next process with this server and token replays what the victim spooled.
    with Run("matrix", "next", url=server.url, token=token, spool_dir=spool_dir,
             **{**FAST, "replay_orphans": True}) as successor:  # fmt: skip
        successor.log(1, {"reward": 0.0})
        wait_for(lambda: any(r["name"] == "victim" and r["status"] == "failed"
                             for r in reader.runs("matrix")), timeout=120)  # fmt: skip
    reader, detail = _stored_run(server, "victim")
    assert_stored(reader, detail["id"], {s: {"reward": s / 1000, "loss": 1.0}
                                         for s in range(1, 1001)})  # fmt: skip


def test_poisoned_values(server: LiveServer, tmp_path: Path, caplog) -> None:
    token = server.token("alpha")
    logged = {}
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        run = Run("matrix", "poisoned", url=server.url, token=token,
                  spool_dir=tmp_path / "spool", **FAST)  # fmt: skip
        for step in range(1, 51):
            logged[step] = {"reward": step / 50, "loss": 1.0}
            poison = {"reward": 10**400, "note\x00": 1.0} if step in (10, 11) else {}
            run.log(step, {**logged[step], **poison})
            if step in (10, 11):
                del logged[step]["reward"]
        report = run.finish(timeout=60)
    assert report.delivered and report.dropped_values == 4
    reader, detail = _stored_run(server, "poisoned")
    assert_stored(reader, detail["id"], logged)  # 98 of 100 values; the 2 bad ones named
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 2 and "'reward' at step 10" in dropped[0] and "NUL" in dropped[1]


@pytest.mark.parametrize("status", [422, 500])
def test_a_batch_refused_for_good(server: LiveServer, tmp_path: Path, status: int) -> None:
    def refuse(path: str, body: Any) -> int | None:
        steps = body.get("steps") if isinstance(body, dict) else None
        if steps and any(s["step"] == 17 and "reward" in s["metrics"] for s in steps):
            return status
        return None

    proxy = RefusingProxy(server.url, refuse)
    try:
        run = Run("matrix", "refused", url=proxy.url, token=server.token("alpha"),
                  spool_dir=tmp_path / "spool", **{**FAST, "batch_interval": 0.2})  # fmt: skip
        logged = {}
        for step in range(1, 51):
            logged[step] = {"reward": step / 50, "loss": 1.0}
            run.log(step, logged[step])
        report = run.finish(timeout=60)
    finally:
        proxy.close()
    assert report.delivered and report.refused_values == 1 and proxy.refused >= 1
    del logged[17]["reward"]
    reader, detail = _stored_run(server, "refused")
    assert detail["status"] == "finished"
    assert_stored(reader, detail["id"], logged)  # every other value, and the finish
    assert '"step": 17' in report.dead_letter.read_text()
