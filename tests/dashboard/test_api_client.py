"""The dashboard's only I/O: bearer token, error shape, and only "no fit yet" read as None."""

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
        if path.endswith("/runs/1/fit"):
            return httpx.Response(404, json={"error": "FitNotFound", "detail": "no fit yet"})
        if path.endswith("/runs/9/fit") or path.endswith("/runs/9/fits"):
            return httpx.Response(404, json={"error": "RunNotFound", "detail": "no run 9"})
        if path.endswith("/alerts"):
            return httpx.Response(405, json={"detail": "Method Not Allowed"})
        if path.endswith("/rules"):
            return httpx.Response(404, json={"detail": "Not Found"})  # FastAPI: no such path
        if path.endswith("/diagnostics"):
            return httpx.Response(422, json={"error": "ValidationError", "detail": "run_id"})
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


def test_no_fit_yet_is_none(fake_api: list[httpx.Request]) -> None:
    assert api_client.client("t").fit(1) is None


def test_whatif_without_a_constrained_fit_raises_its_reason(fake_api) -> None:
    with pytest.raises(api_client.ApiError) as info:
        api_client.client("t").whatif(1, lr=1e-6, k_ref=None)
    assert (info.value.status, info.value.detail) == (422, "no fit")
    assert "k_ref" not in fake_api[-1].url.params  # blank inputs are not sent


@pytest.mark.parametrize(
    ("call", "status", "error"),
    [
        (lambda api: api.fit(9), 404, "RunNotFound"),  # an unknown run is not "no fit yet"
        (lambda api: api.fits(9), 404, "RunNotFound"),
        (lambda api: api.alerts(), 405, "Error"),
        (lambda api: api.rules(3), 404, "Error"),  # a path the server does not have
        (lambda api: api.diagnostics(1), 422, "ValidationError"),
    ],
)
def test_a_bad_request_is_a_real_error_not_not_available_yet(fake_api, call, status, error):
    with pytest.raises(api_client.ApiError) as info:
        call(api_client.client("t"))
    assert (info.value.status, info.value.error) == (status, error)


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
