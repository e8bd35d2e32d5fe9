"""An imported run (`grposcope import`, one batch then finished) gets the same treatment as a
live one from the server's embedded worker: a fit, scored forecasts, diagnostics, and
`grposcope runs show --json` with its fit and alerts."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = pytest.mark.slow


def _cli(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "grposcope.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_imported_real_run_is_fitted_scored_and_diagnosed(live_server, real_logs):
    token = live_server.token("alpha")
    path = real_logs / "unsloth_official_qwen25_3b_gsm8k_G8.csv"
    done = _cli("import", str(path), "--project", "imported", "--url", live_server.url,
                "--token", token, "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=live_server.url + "/api/v1", headers=headers, timeout=30) as c:
        run_id = c.get("/runs", params={"project": "imported"}).json()["items"][0]["id"]
        deadline = time.monotonic() + 120
        accuracy: dict = {}
        while time.monotonic() < deadline and not accuracy.get("items"):
            accuracy = c.get(f"/runs/{run_id}/forecast-accuracy").json()
            time.sleep(0.5)
        assert [i["fraction"] for i in accuracy["items"]] == [0.2, 0.4, 0.6]
        fit = c.get(f"/runs/{run_id}/fit").json()
        assert fit["step"] == 250 and fit["status"] in ("ok", "not_converged")
        rules = {
            r["kind"]: r["status"] for r in c.get(f"/runs/{run_id}/diagnostics").json()["rules"]
        }
        assert rules["reward_hacking"] == "unavailable"  # this log has no eval series
        assert rules["run_stalled"] == "ok"  # finished runs never stall
    shown = _cli("runs", "show", str(run_id), "--json", "--url", live_server.url, "--token", token)
    assert shown.returncode == 0, shown.stderr
    detail = json.loads(shown.stdout)
    assert detail["fit"]["step"] == 250 and isinstance(detail["alerts"], list)
