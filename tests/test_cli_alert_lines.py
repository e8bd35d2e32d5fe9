"""`grposcope runs show`: an alert whose severity rose after it opened is dated by both steps
(the evidence's `severity_since_step`), as the run page dates it, not by its milder start."""

from __future__ import annotations

import argparse

import pytest

from grposcope.cli import runs

COLLAPSE = "rollout/reward collapsed from 0.3379 to 0.0"


def _alert(state: str = "open", since: int | None = 139) -> dict:
    evidence = {"collapse": {"key": "rollout/reward"}}
    if since is not None:
        evidence["severity_since_step"] = since
    return {"kind": "dynamical_instability", "severity": "critical", "state": state,
            "opened_step": 86, "message": COLLAPSE, "evidence": evidence}  # fmt: skip


def test_an_alert_that_rose_in_severity_names_both_steps() -> None:
    assert runs.alert_line(_alert()) == (
        f"alert dynamical_instability (critical since step 139, open since step 86): {COLLAPSE}"
    )
    assert runs.alert_line(_alert("acknowledged")).startswith(
        "alert dynamical_instability (critical since step 139, acknowledged; opened at step 86)"
    )
    assert "(critical since step 139, resolved; opened at step 86)" in runs.alert_line(
        _alert("resolved")
    )


def test_an_alert_at_its_opening_severity_reads_as_before() -> None:
    assert runs.alert_line(_alert(since=None)) == (
        f"alert dynamical_instability (critical, open) at step 86: {COLLAPSE}"
    )
    assert "(critical, open) at step 86" in runs.alert_line(_alert(since=86))


class _FakeClient:
    def __init__(self, *_: object) -> None:
        pass

    def get(self, path: str, params: dict | None = None) -> dict:
        assert path == "/runs/7"
        return {"id": 7, "name": "imported", "project": "p", "team": "t", "status": "finished",
                "hyperparameters": {}, "n_steps": 200, "last_step": 200, "fit": None,
                "alerts": [_alert()]}  # fmt: skip


def test_runs_show_prints_the_severity_step(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(runs, "ApiClient", _FakeClient)
    args = argparse.Namespace(url="http://x", token="gs_x", run="7", json=False)
    assert runs.show_run(args) == 0
    out = capsys.readouterr().out
    assert "  alert dynamical_instability (critical since step 139, open since step 86): " in out
    assert "at step 86" not in out
