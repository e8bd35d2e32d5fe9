"""A server URL that does not lead to the API: the dashboard's redirect to its login page is
named as such, never mistaken for a refusal of the run's hyperparameters, and the data stays
in the spool."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx

from grposcope_trainer import Run
from tests.fixtures.server import LiveServer


def test_a_redirect_is_named_and_the_hyperparameters_stay(tmp_path: Path, caplog) -> None:
    server = LiveServer(f"sqlite:///{tmp_path / 'd.db'}", tmp_path / "s.log", dashboard=True)
    server.start()
    try:
        writer = server.token("ml", "writer")
        # a path prefix the server does not have: the dashboard's catch-all answers with a 302
        url = server.url + "/grposcope"
        with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
            run = Run(project="p", name="r", url=url, token=writer,
                      hyperparameters={"learning_rate": 1e-3, "k_ref": 2},
                      spool_dir=tmp_path / "spool", batch_interval=0.02, max_backoff=0.1,
                      replay_orphans=False)  # fmt: skip
            for step in range(1, 21):
                run.log(step, {"reward": step / 20})
            report = run.finish(timeout=2)
        assert not report.delivered and report.pending_steps == 20
        messages = [r.getMessage() for r in caplog.records]
        assert not any("hyperparameters" in m for m in messages), messages
        (named,) = [m for m in messages if "instead of the grposcope API" in m]
        assert "HTTP 302" in named and "redirect to '/login" in named and url in named
        assert "base URL" in named and str(report.spool_path) in named
        # the close names the way out, not "resent by the next process" at the same URL
        assert f"replay --adopt {report.spool_path} --url URL" in report.message
        assert "did not answer as the grposcope API" in report.message
        admin = {"Authorization": f"Bearer {server.admin_token}"}
        assert httpx.get(f"{server.url}/api/v1/runs", headers=admin).json()["items"] == []
    finally:
        server.stop()
