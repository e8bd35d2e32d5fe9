"""The fault matrix's database row (issue 13): Postgres killed with SIGKILL mid-run and started
again (crash recovery), under a live `grposcope serve` and a training process that keeps
logging. Every logged value must be stored once: the server answers 503 while the database is
down, the client keeps the steps and resends them.

The Postgres is a private cluster (initdb into the test's folder, its own port), so killing it
touches nothing else on the machine. It needs the PostgreSQL server binaries and root (to run
them as the `postgres` user); it says why when it skips."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grposcope_trainer import Run
from tests.fixtures.server import LiveServer, free_port
from tests.plugin.helpers import Reader, assert_stored

BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


class Cluster:
    """A throwaway Postgres cluster run as the `postgres` user on 127.0.0.1:port."""

    def __init__(self) -> None:
        # pytest's own tmp folders are private to root; the postgres user needs a path it can
        # traverse, so the cluster gets a folder of its own (removed by the fixture)
        self.root = Path(tempfile.mkdtemp(prefix="grposcope-pg-"))
        self.root.chmod(0o755)
        self.bin = Path(BIN[-1])
        self.data = self.root / "pgdata"
        self.port = free_port()
        self.log = self.root / "postgres.log"

    def _as_postgres(self, *args: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True,
                       capture_output=True, timeout=120)  # fmt: skip

    def init(self) -> None:
        self.data.mkdir()
        shutil.chown(self.data, "postgres", "postgres")
        self.log.touch()
        shutil.chown(self.log, "postgres", "postgres")
        self._as_postgres(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust",
                          "-U", "postgres")  # fmt: skip

    def start(self) -> None:
        opts = f"-p {self.port} -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                          "-o", opts, "-w", "-t", "60", "start")  # fmt: skip

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend: no shutdown, no checkpoint."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        subprocess.run(["pkill", "-KILL", "-P", str(pid)], check=False)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)

    def stop(self) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", str(self.bin / "pg_ctl"), "-D",
                        str(self.data), "-m", "immediate", "stop"],
                       check=False, capture_output=True, timeout=60)  # fmt: skip

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if not BIN or os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs the PostgreSQL server binaries and root to run them as 'postgres'")
    c = Cluster()
    try:
        c.init()
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(c.root, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.postgres
def test_database_killed_mid_run_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    server = LiveServer(cluster.url, tmp_path / "server.log").start()
    try:
        logged = {}
        with Run("matrix", "db-killed", url=server.url, token=server.token("alpha"),
                 spool_dir=tmp_path / "spool", flush_timeout=120, batch_interval=0.05,
                 max_backoff=0.5, replay_orphans=False) as run:  # fmt: skip
            for step in range(1, 301):
                if step == 100:
                    cluster.kill()
                if step == 200:
                    cluster.start()
                logged[step] = {"reward": step / 300, "loss": 1.0 / step}
                run.log(step, logged[step])
                time.sleep(0.005)
        assert run.finish().delivered
        reader = Reader(server.url, server.admin_token)
        (summary,) = [r for r in reader.runs("matrix") if r["name"] == "db-killed"]
        detail = reader.run(summary["id"])
        assert (detail["status"], detail["last_step"]) == ("finished", 300)
        assert_stored(reader, detail["id"], logged)  # 600 logged, 600 stored, none twice
        assert "Traceback" not in server.log_path.read_text()  # one line per outage, no dumps
    finally:
        server.stop()
