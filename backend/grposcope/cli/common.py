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


DEFAULT_URL = "http://127.0.0.1:8000"


def api_settings(url: str | None = None, token: str | None = None) -> tuple[str, str | None]:
    """The server URL and token for client commands: flags first, then the environment. The
    URL goes through the plugin's normaliser (one for every client): a trailing /api/v1 and a
    missing http:// are accepted, it is returned without /api/v1."""
    from grposcope_trainer.config import server_base

    given = url or os.environ.get("GRPOSCOPE_URL") or DEFAULT_URL
    try:
        base = server_base(given)
    except ValueError as exc:
        source = "--url" if url else "GRPOSCOPE_URL"
        raise CliError(f"{source}: {exc}") from None
    return base, token or os.environ.get("GRPOSCOPE_TOKEN")


def url_source(url: str | None) -> str:
    """Where the server URL came from, for error messages: a refused connection to the
    default URL is most often an unset GRPOSCOPE_URL, so say so."""
    if url:
        return "--url"
    if os.environ.get("GRPOSCOPE_URL"):
        return "GRPOSCOPE_URL"
    return "the default, because GRPOSCOPE_URL is not set (set it or pass --url)"


class ApiClient:
    """A thin HTTP client for the CLI's client commands; errors become one-line CliErrors."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30):
        import httpx

        self.url, token = api_settings(url, token)
        self._source = url_source(url)
        if not token:
            unset_url = "" if url or os.environ.get("GRPOSCOPE_URL") else (
                f"; GRPOSCOPE_URL is not set either (the default is {DEFAULT_URL})"
            )  # fmt: skip
            raise CliError(f"no token: set GRPOSCOPE_TOKEN (or pass --token){unset_url}")
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
            raise CliError(
                f"cannot reach grposcope at {self.url} ({self._source}): {exc}"
            ) from None
        if response.is_redirect:  # never the API's answer: the URL points elsewhere
            raise CliError(
                f"{self.url} ({self._source}) answered {response.status_code} with a redirect "
                f"to {response.headers.get('location')!r}, not the grposcope API; give the "
                "server's base URL, e.g. http://HOST:8000"
            )
        if response.status_code >= 400:
            try:
                body = response.json()
                message = ": ".join(str(body[k]) for k in ("error", "detail") if body.get(k))
            except (ValueError, AttributeError):
                message = response.text[:200]
            if response.status_code in (401, 403):  # often a token for another server
                message += f" (server {self.url}, from {self._source})"
            raise CliError(f"server answered {response.status_code}: {message}")
        try:
            return response.json()
        except ValueError:
            raise CliError(
                f"{self.url} ({self._source}) answered {response.status_code} with "
                f"{response.headers.get('content-type', 'no content type')!r}, not the JSON of "
                "the grposcope API; is it the grposcope server's base URL?"
            ) from None

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.request("POST", path, **kwargs)


def add_client_options(parser: Any) -> None:
    parser.add_argument(
        "--url",
        help=f"server URL, with or without /api/v1 (default: GRPOSCOPE_URL, else {DEFAULT_URL})",
    )
    parser.add_argument("--token", help="API token (default: GRPOSCOPE_TOKEN)")


class ProgressBar:
    """A progress bar on stderr for long commands (`bandit sweep`, `import`), drawn only when
    stderr is a terminal: piped or redirected output stays clean for tools and logs.

    Use as a context manager; advance by a count (``advance(n)``, e.g. records sent) or set
    the position (``bar(done, total)``, the dynamics' ``Progress`` callback)."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "it") -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=total, desc=desc, unit=unit, file=sys.stderr, leave=False,
            disable=not _is_terminal(sys.stderr), dynamic_ncols=True,
        )  # fmt: skip

    def advance(self, n: int = 1) -> None:
        self._bar.update(n)

    def __call__(self, done: int, total: int) -> None:
        if self._bar.total != total:
            self._bar.reset(total=total)
        self._bar.update(done - self._bar.n)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.close()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def alert_line(alert: dict) -> str:
    """One alert of `runs show` and `fit --alerts`: dated by the step it reached its severity
    where that differs from its opening (the evidence's ``severity_since_step``, docs/api.md),
    as the run page dates it ("unstable since step 139 (warned from step 86)"): "alert
    dynamical_instability (critical since step 139, open since step 86): …", not "at step 86",
    the milder start."""
    kind, severity, state = alert.get("kind"), alert.get("severity"), alert.get("state")
    opened = alert.get("opened_step")
    since = (alert.get("evidence") or {}).get("severity_since_step")
    if since is None or since == opened:
        when = f"({severity}, {state}) at step {opened}"
    elif state == "open":
        when = f"({severity} since step {since}, open since step {opened})"
    else:  # acknowledged or resolved: the state has no "since" here, the opening has
        when = f"({severity} since step {since}, {state}; opened at step {opened})"
    return f"alert {kind} {when}: {alert.get('message')}"
