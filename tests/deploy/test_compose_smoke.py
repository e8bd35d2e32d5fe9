"""The compose deployment without Docker: the commands of docker-compose.yml, run as plain
processes against a fresh database on the local Postgres, in compose order (migrate → api with
2 workers → fit worker → dashboard). A run streams in over HTTP; its points must all arrive, a
fit must appear, and the dashboard must answer. Every wait is bounded; every process and the
database are removed afterwards."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.fixtures import databases
from tests.fixtures.server import free_port

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
ADMIN_TOKEN = "gs_smoke_" + "x" * 24
N_STEPS = 120


class Stack:
    """The processes of one compose-equivalent deployment, stopped together."""

    def __init__(self, db_url: str, log_dir: Path) -> None:
        self.env = {**os.environ, "GRPOSCOPE_DATABASE_URL": db_url,
                    "GRPOSCOPE_ADMIN_TOKEN": ADMIN_TOKEN, "GRPOSCOPE_FIT_INTERVAL_S": "0.5",
                    "PYTHONUNBUFFERED": "1"}  # fmt: skip
        self.log_dir = log_dir
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def run_once(self, name: str, command: list[str], timeout: float = 120) -> str:
        out = subprocess.run(as_python(command), env=self.env, capture_output=True, text=True,
                             timeout=timeout)  # fmt: skip
        assert out.returncode == 0, f"{name} failed:\n{out.stdout}\n{out.stderr}"
        return out.stdout

    def start(self, name: str, command: list[str]) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        proc = subprocess.Popen(as_python(command), env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.procs.append((name, proc))
        return proc

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")[-3000:]

    def wait_http(self, name: str, url: str, timeout: float = 90) -> httpx.Response:
        proc = dict(self.procs)[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"{name} exited:\n{self.log(name)}"
            try:
                response = httpx.get(url, timeout=3)
                if response.status_code < 500:
                    return response
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"{name} did not answer {url} in {timeout} s:\n{self.log(name)}")

    def stop(self) -> None:
        for _, proc in reversed(self.procs):  # the process groups we started, newest first
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for _, proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def as_python(command: list[str]) -> list[str]:
    """`grposcope ...` from the compose file, run with this interpreter (no PATH lookup)."""
    assert command[0] == "grposcope"
    return [sys.executable, "-m", "grposcope.cli.main", *command[1:]]


def local(command: list[str], **flags: str) -> list[str]:
    """The compose command with loopback, free ports and the given flag values substituted."""
    out = list(command)
    for name, value in {"--host": "127.0.0.1", **flags}.items():
        if name in out:
            out[out.index(name) + 1] = value
    return out


@pytest.fixture
def compose_services() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    reason = databases.postgres_available()
    if reason:
        pytest.skip(reason)
    db_url = databases.create_postgres_database()
    running = Stack(db_url, tmp_path)
    try:
        yield running
    finally:
        running.stop()
        databases.drop_postgres_database(db_url)


def reward_steps() -> list[dict]:
    """A slow-start-then-plateau reward curve with noise and a few other TRL keys."""
    rng = random.Random(7)
    steps = []
    for t in range(1, N_STEPS + 1):
        mean = 0.75 - 0.55 * math.exp(-t / 30) * (1 + t / 30)
        steps.append({"step": t, "metrics": {"reward": mean + rng.gauss(0, 0.03),
                                             "entropy": 1.2 - 0.004 * t,
                                             "kl": 0.0005 * t, "grad_norm": "NaN" if t == 60
                                             else 0.3}})  # fmt: skip
    return steps


def test_compose_commands_serve_ingest_fit_and_dashboard(stack: Stack, compose_services: dict):
    svc = compose_services
    # 1. migrate (one-shot) installs the schema and the preset admin token, exits 0.
    stack.run_once("migrate", svc["migrate"]["command"])
    # 2. the API with 2 uvicorn workers (compose runs 4), no migrations, no embedded worker.
    api_port = str(free_port())
    stack.start("api", local(svc["api"]["command"], **{"--port": api_port, "--workers": "2"}))
    api = f"http://127.0.0.1:{api_port}"
    assert stack.wait_http("api", api + "/api/v1/health").json()["database"] == "postgresql"
    # 3. a separate fit worker, 4. the dashboard reading the API by URL.
    stack.start("worker", local(svc["worker"]["command"]))
    dash_port = str(free_port())
    stack.start("dashboard", local(svc["dashboard"]["command"],
                                   **{"--port": dash_port, "--api-url": api}))  # fmt: skip

    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=api + "/api/v1", timeout=30) as client:
        made = client.post("/tokens", json={"team": "ml", "role": "writer", "name": "trainer"},
                           headers=admin)  # fmt: skip
        assert made.status_code in (200, 201), made.text
        writer = {"Authorization": f"Bearer {made.json()['token']}"}
        run = client.post("/runs", headers=writer, json={
            "project": "smoke", "name": "compose", "run_key": "smoke-1",
            "hyperparameters": {"learning_rate": 1e-6, "optimizer": "adamw", "momentum": 0.9,
                                "k_ref": 4, "num_generations": 8}})  # fmt: skip
        assert run.status_code == 201, run.text
        run_id = run.json()["id"]
        steps = reward_steps()
        for i in range(0, N_STEPS, 20):  # streamed as a trainer would: a batch every few steps
            sent = client.post(f"/runs/{run_id}/ingest", json={"steps": steps[i : i + 20]},
                               headers=writer)  # fmt: skip
            assert sent.status_code == 200, sent.text
            assert sent.json()["inserted"] == 20 * 4

        series = client.get(f"/runs/{run_id}/series", params={"key": ["reward", "grad_norm"]},
                            headers=writer).json()["series"]  # fmt: skip
        assert series["reward"]["steps"] == list(range(1, N_STEPS + 1))
        assert series["grad_norm"]["values"][59] == "NaN"

        fit = wait_for_fit(client, run_id, writer, stack)
        assert fit["step"] == N_STEPS
        assert fit["n_points"] == N_STEPS
        assert 0.6 < fit["plateau"]["value"] < 0.9  # the curve's plateau is 0.75

    page = stack.wait_http("dashboard", f"http://127.0.0.1:{dash_port}/login")
    assert page.status_code == 200 and "grposcope" in page.text.lower()
    logged_in = httpx.get(f"http://127.0.0.1:{dash_port}/?token={ADMIN_TOKEN}", timeout=10)
    assert logged_in.status_code in (200, 302, 303, 307)


def wait_for_fit(client: httpx.Client, run_id: int, headers: dict, stack: Stack,
                 timeout: float = 120) -> dict:  # fmt: skip
    """Poll the fit until the worker has refitted on the last step (bounded)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = client.get(f"/runs/{run_id}/fit", headers=headers)
        if last.status_code == 200 and last.json().get("step") == N_STEPS:
            return last.json()
        time.sleep(0.5)
    raise AssertionError(f"no fit at step {N_STEPS} in {timeout} s: {last and last.text[:300]}"
                         f"\nworker log:\n{stack.log('worker')}")  # fmt: skip
