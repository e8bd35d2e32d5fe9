"""`grposcope demo`, as a new user runs it: live runs, a forecast and an alert within minutes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from grposcope.demo.bandits import SCENARIOS
from tests.fixtures.server import free_port


@contextmanager
def _demo(tmp_path: Path, *args: str) -> Iterator[tuple[str, dict[str, str], str]]:
    """`grposcope demo ARGS` in a subprocess: (API base URL, auth headers, login token); on
    exit it is stopped with Ctrl-C and must exit cleanly."""
    port = free_port()
    log = open(tmp_path / "demo.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "grposcope.cli.main", "demo", "--port", str(port), *args],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
    )  # fmt: skip
    try:
        token = _login_token(tmp_path / "demo.log", proc)
        yield f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}, token
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(30) in (0, 130, -2)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()


@pytest.mark.slow
def test_demo_shows_live_runs_a_forecast_and_an_alert(tmp_path):
    with _demo(tmp_path, "--trainer-steps", "40") as (root, headers, token):
        seen = _wait_for(lambda: _state(root + "/api/v1", headers), timeout=240)
        assert seen["runs"] >= 4, seen  # three bandits and the tiny GRPOTrainer
        assert seen["fitted"], seen
        assert "dynamical_instability" in seen["alert_kinds"], seen
        page = httpx.get(f"{root}/?token={token}", timeout=30, follow_redirects=True)
        assert page.status_code == 200
    assert "grposcope demo stopped" in (tmp_path / "demo.log").read_text()


def _login_token(log_path, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text()
        if "?token=" in text:
            return text.split("?token=", 1)[1].split()[0]
        assert proc.poll() is None, text
        time.sleep(0.3)
    raise AssertionError("demo printed no login URL")


def _state(base, headers):
    runs = httpx.get(f"{base}/runs", headers=headers, timeout=10).json()["items"]
    alerts = httpx.get(f"{base}/alerts", headers=headers, timeout=10)
    kinds = {a["kind"] for a in alerts.json()["items"]} if alerts.status_code == 200 else set()
    fitted = any(r["fit"] and r["fit"].get("plateau") is not None for r in runs)
    names = {r["name"] for r in runs}
    done = len(runs) >= 4 and fitted and "dynamical_instability" in kinds
    return done, {"runs": len(runs), "names": sorted(names), "fitted": fitted,
                  "alert_kinds": sorted(kinds)}  # fmt: skip


def _wait_for(probe, timeout):
    deadline = time.monotonic() + timeout
    state = {}
    while time.monotonic() < deadline:
        try:
            done, state = probe()
        except httpx.HTTPError:
            done = False
        if done:
            return state
        time.sleep(2)
    return state


@pytest.mark.slow
def test_the_demo_keeps_starting_runs_and_flags_the_unstable_one(tmp_path):
    """A short demo (the bandits at 5x, no TRL run): after the first runs end, new ones are
    live, and the warmup-unstable run has a critical dynamical_instability alert."""
    with _demo(tmp_path, "--trainer-steps", "0", "--pace", "5") as (root, headers, _):
        seen = _wait_for(lambda: _rolling(root + "/api/v1", headers), timeout=240)
        assert seen.get("done"), seen
        assert "critical" in seen["unstable_severities"], seen


def _rolling(base, headers):
    runs = httpx.get(f"{base}/runs", headers=headers, timeout=10).json()["items"]
    by_name = {r["name"]: r for r in runs}
    unstable = by_name.get("bandit-warmup-unstable-kref24")
    severities = []
    if unstable is not None:
        alerts = httpx.get(f"{base}/alerts", headers=headers, timeout=10,
                           params={"run_id": unstable["id"], "kind": "dynamical_instability",
                                   "limit": 100}).json()["items"]  # fmt: skip
        severities = sorted({a["severity"] for a in alerts})
    first_round = {s.name for s in SCENARIOS}
    first_round_over = all(by_name.get(n, {}).get("status") == "finished" for n in first_round)
    live_later = any(r["status"] == "running" for r in runs if r["name"] not in first_round)
    done = first_round_over and live_later and "critical" in severities
    return done, {"done": done, "runs": sorted(by_name), "unstable_severities": severities,
                  "live_after_the_first_round": live_later}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_runs_then_the_server_and_leaves_nothing_behind(tmp_path, sig):
    """Ctrl-C and SIGTERM alike: the runs finish while the server still answers (no
    'unreachable', nothing left to resend), then the server stops, the temp folder goes, no
    spool is touched, and the demo says it stopped, exit status 0."""
    home, tmp, spool = tmp_path / "home", tmp_path / "tmp", tmp_path / "spool"
    home.mkdir()
    tmp.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "GRPOSCOPE_SPOOL_DIR": str(spool)}
    db = tmp_path / "kept.db"  # outside the temp folder, to read the runs' status afterwards
    port = free_port()
    log_path = tmp_path / "demo.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "grposcope.cli.main", "demo", "--port", str(port),
             "--trainer-steps", "0", "--pace", "5", "--db", f"sqlite:///{db}"],
            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=env,
        )  # fmt: skip
        try:
            token = _login_token(log_path, proc)
            headers = {"Authorization": f"Bearer {token}"}
            base = f"http://127.0.0.1:{port}/api/v1"
            seen = _wait_for(lambda: _streaming(base, headers), timeout=120)
            assert seen.get("runs", 0) >= 3, seen
            assert list(tmp.glob("grposcope-demo-*")), "the demo's temp folder"
            proc.send_signal(sig)
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    text = log_path.read_text()
    assert code == 0, text
    assert text.rstrip().endswith("grposcope demo stopped."), text
    assert "unreachable" not in text and "not yet acknowledged" not in text, text
    assert list(tmp.iterdir()) == [], "the demo's temp folder is removed"
    assert not spool.exists() and not (home / ".cache" / "grposcope").exists()
    with sqlite3.connect(db) as con:
        statuses = dict(con.execute("SELECT name, status FROM runs").fetchall())
    assert statuses and set(statuses.values()) == {"finished"}, statuses


def _streaming(base, headers):
    """Done once the three bandit runs have steps on the server."""
    runs = httpx.get(f"{base}/runs", headers=headers, timeout=10).json()["items"]
    stepped = [r for r in runs if (r.get("last_step") or 0) >= 10]
    return len(stepped) >= 3, {"runs": len(stepped)}
