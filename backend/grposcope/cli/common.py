"""Pieces shared by the CLI commands: the user-facing error and the API client settings."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from grposcope.dynamics.fit_result import finite


class CliError(Exception):
    """An error the user can fix; printed as one line, exit code non-zero, no traceback."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def print_json(payload: Any) -> None:
    """Print JSON for tools. A non-finite number the model computed is null (`finite`, the
    convention of every fit, what-if and stability answer); metric values from the API arrive
    already in the API's form ("NaN", "Infinity", "-Infinity" for the values a run logged)."""
    json.dump(finite(payload), sys.stdout, indent=2, sort_keys=False, allow_nan=False)
    sys.stdout.write("\n")


def api_settings(url: str | None = None, token: str | None = None) -> tuple[str, str | None]:
    """The server URL and token for client commands: flags first, then the environment. The
    URL may be given with or without a trailing /api/v1 (the contract); it is returned without."""
    url = (url or os.environ.get("GRPOSCOPE_URL") or "http://127.0.0.1:8000").rstrip("/")
    token = token or os.environ.get("GRPOSCOPE_TOKEN")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    return url.rstrip("/"), token


class ApiClient:
    """A thin HTTP client for the CLI's client commands; errors become one-line CliErrors."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30):
        import httpx

        self.url, token = api_settings(url, token)
        if not token:
            raise CliError("no token: set GRPOSCOPE_TOKEN (or pass --token)")
        self._http = httpx.Client(
            base_url=self.url + "/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach grposcope at {self.url}: {exc}") from None
        if response.status_code >= 400:
            try:
                body = response.json()
                message = f"{body.get('error')}: {body.get('detail')}"
            except ValueError:
                message = response.text[:200]
            raise CliError(f"server answered {response.status_code}: {message}")
        return response.json()

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.request("POST", path, **kwargs)


def add_client_options(parser: Any) -> None:
    parser.add_argument("--url", help="server URL (default: GRPOSCOPE_URL or 127.0.0.1:8000)")
    parser.add_argument("--token", help="API token (default: GRPOSCOPE_TOKEN)")
