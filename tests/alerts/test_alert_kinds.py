"""One source for the alert kinds: the server's rule engine. The API serves them, the
dashboard reads them from there, and the trainer plugin's copy (which may not import the
server) must equal them."""

from __future__ import annotations

import re
from pathlib import Path

from grposcope.alerts.kinds import ALERT_KINDS
from grposcope.diagnostics.engine import MESSAGES, SERIES_RULES

REPO = Path(__file__).resolve().parents[2]


def test_the_api_serves_the_engine_kinds_in_order(api):
    reply = api.client.get("/api/v1/alert-kinds", headers=api.headers(api.viewer))
    assert reply.status_code == 200
    items = reply.json()["items"]
    assert [i["kind"] for i in items] == list(ALERT_KINDS) == list(MESSAGES)
    assert all(i["description"] == MESSAGES[i["kind"]] for i in items)
    # Every series rule is a kind; the one kind without a series rule is the stall check.
    assert set(SERIES_RULES) | {"run_stalled"} == set(ALERT_KINDS)


def test_the_endpoint_needs_a_token_and_is_documented(api):
    assert api.client.get("/api/v1/alert-kinds").status_code == 401
    spec = api.client.get("/openapi.json").json()
    schema = spec["paths"]["/api/v1/alert-kinds"]["get"]["responses"]["200"]["content"]
    assert schema["application/json"]["schema"]["$ref"].endswith("/AlertKindList")


def test_the_plugin_copy_equals_the_server_list():
    from grposcope_trainer import ALERT_KINDS as PLUGIN_KINDS

    assert tuple(PLUGIN_KINDS) == ALERT_KINDS


def test_the_contract_names_the_same_six(api):
    """docs/alerts.md (the user-facing contract) lists exactly these kinds."""
    text = (REPO / "docs" / "alerts.md").read_text()
    for kind in ALERT_KINDS:
        assert re.search(rf"`{kind}`", text), kind
    assert len(ALERT_KINDS) == 6


def test_the_dashboard_keeps_no_list_of_its_own():
    dashboard = REPO / "frontend" / "grposcope_dashboard"
    for path in dashboard.rglob("*.py"):
        text = path.read_text()
        quoted = [k for k in ALERT_KINDS if f'"{k}"' in text or f"'{k}'" in text]
        # A page may name one kind to explain it; a list of them all is a second source.
        assert len(quoted) < 3, (path, quoted)


def _rule_row(text: str, kind: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| `{kind}` |"))


def test_the_plugins_stop_on_classes_match_the_rules():
    """Only a critical alert stops training, so the plugin warns about `stop_on` kinds that
    never get there (grposcope_trainer.config). Its classes cover the kinds once each and
    agree with the rules: the documented severities, the stall rule's outcomes, and
    policy_concentration's default critical_drop of 1 (never), critical when lowered."""
    from datetime import datetime, timedelta, timezone
    from types import SimpleNamespace

    import numpy as np

    from grposcope.alerts.diagnose import never_sent
    from grposcope.diagnostics import RunData
    from grposcope.diagnostics.engine import evaluate, stalled
    from grposcope.diagnostics.params import RULES, defaults
    from grposcope_trainer.config import (
        CRITICAL_ONLY_IF_CONFIGURED,
        NEVER_CRITICAL,
        STOPPING_KINDS,
    )

    classes = [set(STOPPING_KINDS), set(NEVER_CRITICAL), set(CRITICAL_ONLY_IF_CONFIGURED)]
    assert sum(len(c) for c in classes) == len(ALERT_KINDS)
    assert set().union(*classes) == set(ALERT_KINDS)
    text = (REPO / "docs" / "alerts.md").read_text()
    for kind in STOPPING_KINDS:
        assert "critical" in _rule_row(text, kind), kind
    for kind in NEVER_CRITICAL:
        assert "critical" not in _rule_row(text, kind).split(" | ")[2], kind

    params = {"stall_after_s": 10.0}
    assert stalled("running", 1e9, 5, params).severity == "warning"
    now = datetime.now(timezone.utc)
    run = SimpleNamespace(status="running", created_at=now - timedelta(days=3))
    assert never_sent(run, params, now).severity == "warning"

    critical_drop = RULES["policy_concentration"]["critical_drop"]
    assert critical_drop.default == critical_drop.hi == 1.0  # "1: never" is the default
    n = 200
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(0)
    reward = 0.1 + 0.8 * steps / n + 0.01 * rng.standard_normal(n)
    entropy = 2.0 * np.exp(-steps / 15) + 0.001 * rng.random(n)  # falls 96 % over a window
    data = RunData({"reward": (steps, reward), "entropy": (steps, entropy)}, "reward")
    p = defaults("policy_concentration")
    by_default = evaluate("policy_concentration", data, p).episodes
    lowered = evaluate("policy_concentration", data, {**p, "critical_drop": 0.8}).episodes
    assert [e.severity for e in by_default] == ["warning"]
    assert [e.severity for e in lowered] == ["critical"]
