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


def test_runs_show_says_when_the_fits_regime_is_not_determined(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A monotone saturating rise fitted with ζ < 1 read "regime oscillatory" in `runs show`
    while `grposcope fit` added "not determined"; both say it now."""
    fit = {"regime": "oscillatory", "regime_determined": False,
           "regime_undetermined_by": "zeta_interval",
           "oscillator": {"zeta_lo": 0.41, "zeta_hi": 1.9},
           "plateau": {"value": 0.99, "lo": 0.97, "hi": 1.01}}  # fmt: skip

    class _Client(_FakeClient):
        def get(self, path: str, params: dict | None = None) -> dict:
            return {**super().get(path, params), "fit": fit, "alerts": []}

    monkeypatch.setattr(runs, "ApiClient", _Client)
    args = argparse.Namespace(url="http://x", token="gs_x", run="7", json=False)
    assert runs.show_run(args) == 0
    out = capsys.readouterr().out
    assert "fit: regime oscillatory, not determined: ζ 80 % 0.410–1.900, plateau 0.99" in out
    fit["regime_determined"], fit["regime_undetermined_by"] = True, None
    assert runs.show_run(args) == 0
    assert "fit: regime oscillatory, plateau 0.99 [0.97, 1.01]" in capsys.readouterr().out
