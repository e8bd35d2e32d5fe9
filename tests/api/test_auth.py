"""Auth boundaries: 401 without a valid token, 403 across teams and roles."""

from __future__ import annotations

from tests.api.helpers import ingest, make_run


def test_no_token_and_bad_token_are_401(api):
    assert api.client.get("/api/v1/runs").status_code == 401
    bad = api.client.get("/api/v1/runs", headers=api.headers("gs_not-a-token"))
    assert bad.status_code == 401
    assert bad.json()["error"] == "Unauthorized"


def test_health_needs_no_token(api):
    assert api.client.get("/api/v1/health").json()["status"] == "ok"


def test_writer_cannot_ingest_into_another_teams_run(api):
    run = make_run(api, api.alpha)
    response = ingest(api, api.beta, run["id"], [{"step": 1, "metrics": {"reward": 1.0}}])
    assert response.status_code == 403
    assert "alpha" in response.json()["detail"]


def test_writer_cannot_create_a_run_in_another_team(api):
    response = api.client.post(
        "/api/v1/runs", json={"project": "p", "name": "x", "team": "beta"},
        headers=api.headers(api.alpha),
    )  # fmt: skip
    assert response.status_code == 403


def test_viewer_reads_every_team_but_cannot_write(api):
    alpha_run = make_run(api, api.alpha, project="a")
    make_run(api, api.beta, project="b", run_key="kb")
    listed = api.client.get("/api/v1/runs", headers=api.headers(api.viewer)).json()
    assert {r["team"] for r in listed["items"]} == {"alpha", "beta"}
    response = ingest(api, api.viewer, alpha_run["id"], [{"step": 1, "metrics": {"r": 1.0}}])
    assert response.status_code == 403
    create = api.client.post("/api/v1/runs", json={"project": "p", "name": "x"},
                             headers=api.headers(api.viewer))  # fmt: skip
    assert create.status_code == 403


def test_only_admin_manages_tokens(api):
    body = {"team": "alpha", "role": "viewer"}
    assert api.client.post("/api/v1/tokens", json=body,
                           headers=api.headers(api.alpha)).status_code == 403  # fmt: skip
    created = api.client.post("/api/v1/tokens", json=body, headers=api.headers(api.admin))
    assert created.status_code == 201
    token = created.json()["token"]
    assert api.client.get("/api/v1/me", headers=api.headers(token)).json()["role"] == "viewer"
    revoked = api.client.delete(f"/api/v1/tokens/{created.json()['id']}",
                                headers=api.headers(api.admin))  # fmt: skip
    assert revoked.json()["revoked"] is True
    assert api.client.get("/api/v1/me", headers=api.headers(token)).status_code == 401


def test_tokens_are_stored_hashed(api):
    from sqlalchemy import select

    from grposcope.models import ApiToken

    with api.client.app.state.session_factory() as session:
        hashes = session.scalars(select(ApiToken.token_hash)).all()
    assert api.alpha not in hashes and len(hashes[0]) == 64
