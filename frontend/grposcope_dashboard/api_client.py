"""The dashboard's only I/O: a small client of the public HTTP API (docs/api.md).

Why a client and not the database: the dashboard must work against any grposcope server, the
same way a user's script does (docs/model.md §1). The bearer token comes from the
``grposcope_token`` cookie of the browser's request, so every call is made with the viewer's
own rights.

Errors are errors: any 4xx or 5xx raises :class:`ApiError` with the API's ``{"error",
"detail"}``, and the page shows it. The one exception is an answer that means "nothing to show
yet" by its error name (``NOTHING_YET``: a run with no reward series or no fit so far), which
the ``optional`` helpers turn into ``None``. A 404 for an unknown run or path, a 405 or a 422
for a bad request is never read as "not available yet".
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

TOKEN_COOKIE = "grposcope_token"
API_PREFIX = "/api/v1"
DEFAULT_TIMEOUT_S = 10.0

# Error names that mean "nothing to show yet" rather than a failed request (fits/service.py).
NOTHING_YET = frozenset({"FitNotFound"})

_state: dict[str, Any] = {"base_url": "http://127.0.0.1:8000", "http": None}
_lock = threading.Lock()


class ApiError(Exception):
    """A non-2xx answer, carrying the API's ``{"error", "detail"}`` body."""

    def __init__(self, status: int, error: str, detail: str) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail


def configure(base_url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Point the dashboard at a server; ``base_url`` is ``http://HOST:PORT`` (no /api/v1)."""
    if not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
    with _lock:
        old = _state.get("http")
        _state["base_url"] = base_url.rstrip("/")
        # One pooled client for every request thread: httpx.Client is thread-safe, and reusing
        # connections keeps a 1 s refresh of 20 runs cheap.
        _state["http"] = httpx.Client(
            base_url=_state["base_url"] + API_PREFIX,
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
        )
    if old is not None:
        old.close()


def _http() -> httpx.Client:
    if _state["http"] is None:
        configure(_state["base_url"])
    return _state["http"]


def request_token() -> str | None:
    """The token of the browser request being served (cookie), if any."""
    try:
        import flask

        return flask.request.cookies.get(TOKEN_COOKIE) or None
    except RuntimeError:  # outside a request (tests, scripts)
        return None


class Api:
    """Typed calls to /api/v1 with one token; build with :func:`client` inside a request."""

    def __init__(self, token: str | None) -> None:
        self.token = token

    # -- plumbing ---------------------------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = _http().request(method, path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(
                503, "Unreachable", f"the grposcope server did not answer: {exc}"
            ) from exc
        if response.status_code >= 400:
            raise _error(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def get(self, path: str, **params: Any) -> Any:
        clean = {k: v for k, v in params.items() if v is not None and v != ""}
        return self._call("GET", path, params=clean)

    def optional(self, path: str, **params: Any) -> Any:
        """GET that answers None when the API says there is nothing to show yet (a 404 named
        in ``NOTHING_YET``); every other error is raised for the page to show."""
        try:
            return self.get(path, **params)
        except ApiError as exc:
            if exc.status == 404 and exc.error in NOTHING_YET:
                return None
            raise

    # -- accounts ---------------------------------------------------------------------------
    def me(self) -> dict[str, Any]:
        return self.get("/me")

    def teams(self) -> list[dict[str, Any]]:
        return self.get("/teams")

    def projects(self, team: str | None = None) -> list[dict[str, Any]]:
        return self.get("/projects", team=team)

    def tokens(self) -> list[dict[str, Any]]:
        return self.get("/tokens")

    def create_token(self, team: str, role: str, name: str | None = None) -> dict[str, Any]:
        return self._call("POST", "/tokens", json={"team": team, "role": role, "name": name})

    def revoke_token(self, token_id: int) -> None:
        self._call("DELETE", f"/tokens/{token_id}")

    # -- runs and series --------------------------------------------------------------------
    def runs(self, **filters: Any) -> dict[str, Any]:
        return self.get("/runs", **filters)

    def run(self, run_id: int) -> dict[str, Any]:
        return self.get(f"/runs/{run_id}")

    def series(
        self,
        run_id: int,
        keys: list[str],
        since_step: int | None = None,
        max_points: int | None = 2000,
    ) -> dict[str, Any]:
        """Several keys in one request; ``since_step`` for the incremental live reads."""
        params: dict[str, Any] = {"key": list(keys), "max_points": max_points}
        if since_step is not None:
            params["since_step"] = since_step
        return self._call("GET", f"/runs/{run_id}/series", params=params)["series"]

    def metric_keys(self, run_id: int) -> list[dict[str, Any]]:
        return self.get(f"/runs/{run_id}/metrics")["keys"]

    # -- fits (None: no fit yet) ------------------------------------------------------------
    def fit(self, run_id: int) -> dict[str, Any] | None:
        return self.optional(f"/runs/{run_id}/fit")

    def fits(self, run_id: int, limit: int = 500) -> list[dict[str, Any]]:
        found = self.optional(f"/runs/{run_id}/fits", limit=limit)
        return (found or {}).get("items", [])

    def whatif(self, run_id: int, **params: Any) -> dict[str, Any]:
        """Raises ApiError (422, with the reason) for a run without a constrained fit."""
        return self.get(f"/runs/{run_id}/whatif", **params)

    def diagnostics(self, run_id: int) -> dict[str, Any] | None:
        return self.optional(f"/runs/{run_id}/diagnostics")

    def forecast_accuracy(self, run_id: int) -> Any:
        return self.optional(f"/runs/{run_id}/forecast-accuracy")

    # -- alerts, rules, webhooks ------------------------------------------------------------
    def alert_kinds(self) -> list[dict[str, Any]]:
        """The server's alert kinds (the one source of their names), each with its label."""
        return self.get("/alert-kinds")["items"]

    def alerts(self, **filters: Any) -> dict[str, Any]:
        return self.get("/alerts", **filters)

    def acknowledge(self, alert_id: int) -> dict[str, Any]:
        return self._call("POST", f"/alerts/{alert_id}/acknowledge")

    def rule_params(self) -> list[dict[str, Any]]:
        """Each rule's parameters with default, range and meaning (the threshold form)."""
        return self.get("/rule-params")["items"]

    def rules(self, project_id: int) -> Any:
        return self.get(f"/projects/{project_id}/rules")

    def put_rule(
        self, project_id: int, kind: str, enabled: bool, params: dict[str, Any]
    ) -> dict[str, Any]:
        body = {"enabled": enabled, "params": params}
        return self._call("PUT", f"/projects/{project_id}/rules/{kind}", json=body)

    def webhooks(self) -> list[dict[str, Any]]:
        found = self.get("/webhooks")
        return found.get("items", []) if isinstance(found, dict) else found

    def create_webhook(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/webhooks", json=body)

    def delete_webhook(self, webhook_id: int) -> None:
        self._call("DELETE", f"/webhooks/{webhook_id}")

    def deliveries(self, webhook_id: int) -> Any:
        return self.get(f"/webhooks/{webhook_id}/deliveries")


def _error(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
        return ApiError(
            response.status_code, str(body.get("error", "Error")), str(body.get("detail", ""))
        )
    except (ValueError, AttributeError):
        return ApiError(response.status_code, "Error", response.text[:300])


def client(token: str | None = None) -> Api:
    """An API client for the current browser request (its cookie), or for ``token``."""
    return Api(token if token is not None else request_token())
