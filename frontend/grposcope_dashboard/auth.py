"""Login by token: ``/?token=…`` sets the ``grposcope_token`` cookie; /logout clears it.

Why a cookie: ``serve`` prints ``http://HOST:PORT/?token=TOKEN``; opening it must log the user
in, and the token must not stay in the address bar (bookmarks, screenshots, referers), so the
first request stores it in an HttpOnly cookie and redirects to the same page without it.
Every later API call is made with that token, so the API enforces the roles, not the page.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import flask

from grposcope_dashboard import api_client
from grposcope_dashboard.api_client import TOKEN_COOKIE, ApiError

COOKIE_MAX_AGE_S = 30 * 24 * 3600
# Dash's own endpoints (layout, callbacks, assets) pass through: a callback without a valid
# token gets a 401 from the API, which the page shows as "log in again".
PASSTHROUGH = ("/_dash", "/assets", "/_favicon", "/_reload", "/login", "/favicon.ico")


def install(server: flask.Flask) -> None:
    """Add the token-URL login, the logout route and the redirect of anonymous visitors."""
    server.before_request(_before_request)
    server.add_url_rule("/logout", "logout", logout)


def _before_request() -> flask.Response | None:
    token = flask.request.args.get("token")
    if token:
        return login_with(token)
    path = flask.request.path
    if path.startswith(PASSTHROUGH) or path == "/logout":
        return None
    if not flask.request.cookies.get(TOKEN_COOKIE):
        return flask.redirect("/login?" + urlencode({"next": _without_token()}))
    return None


def login_with(token: str) -> flask.Response:
    """Check the token with GET /me, then store it and drop it from the URL."""
    try:
        api_client.client(token).me()
    except ApiError as exc:
        reason = "invalid" if exc.status in (401, 403) else "unreachable"
        return flask.redirect("/login?" + urlencode({"error": reason}))
    target = _without_token()
    if target.startswith("/login"):
        target = flask.request.args.get("next") or "/"
    response = flask.redirect(local_path(target))  # a path like //evil.example/ too
    response.set_cookie(
        TOKEN_COOKIE,
        token,
        max_age=COOKIE_MAX_AGE_S,
        httponly=True,
        samesite="Lax",
        secure=flask.request.scheme == "https",
    )
    return response


def local_path(target: str | None) -> str:
    """``target`` if it is a path on this server, else ``/``: never an open redirect.

    ``https://evil.example``, ``//evil.example`` and ``/\\evil.example`` (which browsers
    read as ``//``) all name another host; only a plain absolute path stays here.
    """
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or any(c in target for c in "\\\r\n\t"):
        return "/"
    return target


def logout() -> flask.Response:
    response = flask.redirect("/login?logged_out=1")
    response.delete_cookie(TOKEN_COOKIE)
    return response


def _without_token() -> str:
    """The current path and query, minus ``token`` (and ``next`` bookkeeping kept)."""
    args = [(k, v) for k, v in flask.request.args.items(multi=True) if k != "token"]
    path = flask.request.path
    return path + ("?" + urlencode(args) if args else "")
