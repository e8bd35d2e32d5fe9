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
