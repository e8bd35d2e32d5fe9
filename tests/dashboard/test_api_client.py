"""The dashboard's only I/O: bearer token, error shape, 404 → None for endpoints not built."""

from __future__ import annotations

import httpx
import pytest

from grposcope_dashboard import api_client


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        path = request.url.path
        if path.endswith("/fit"):
            return httpx.Response(404, json={"error": "FitNotFound", "detail": "no fit yet"})
        if path.endswith("/whatif"):
            return httpx.Response(422, json={"error": "InvalidInput", "detail": "no fit"})
        if path.endswith("/tokens"):
            return httpx.Response(403, json={"error": "Forbidden", "detail": "admins only"})
        if path.endswith("/series"):
            return httpx.Response(200, json={"run_id": 1, "series": {"reward": {"steps": [3]}}})
        return httpx.Response(200, json={"team": "ml", "role": "viewer", "name": "x"})

    client = httpx.Client(base_url="http://api/api/v1", transport=httpx.MockTransport(handler))
    monkeypatch.setitem(api_client._state, "http", client)
    return seen


def test_sends_the_token_as_bearer(fake_api: list[httpx.Request]) -> None:
    assert api_client.client("gs_abc").me()["role"] == "viewer"
    assert fake_api[-1].headers["authorization"] == "Bearer gs_abc"


def test_series_passes_keys_and_since_step(fake_api: list[httpx.Request]) -> None:
    api_client.client("t").series(1, ["reward", "rewards/acc/mean"], since_step=2)
    query = fake_api[-1].url.params
    assert query.get_list("key") == ["reward", "rewards/acc/mean"]
    assert query["since_step"] == "2"
    assert query["max_points"] == "2000"


def test_missing_fit_and_whatif_are_none(fake_api: list[httpx.Request]) -> None:
    api = api_client.client("t")
    assert api.fit(1) is None
    assert api.whatif(1, lr=1e-6, k_ref=None) is None
    assert "k_ref" not in fake_api[-1].url.params  # blank inputs are not sent


def test_errors_carry_the_api_error_shape(fake_api: list[httpx.Request]) -> None:
    with pytest.raises(api_client.ApiError) as info:
        api_client.client("t").tokens()
    assert info.value.status == 403
    assert info.value.error == "Forbidden"
    assert info.value.detail == "admins only"


def test_unreachable_server_is_a_503_api_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = httpx.Client(base_url="http://api/api/v1", transport=httpx.MockTransport(refuse))
    monkeypatch.setitem(api_client._state, "http", client)
    with pytest.raises(api_client.ApiError) as info:
        api_client.client("t").me()
    assert info.value.status == 503


def test_configure_rejects_a_url_without_scheme() -> None:
    with pytest.raises(ValueError, match="base_url"):
        api_client.configure("localhost:8000")
