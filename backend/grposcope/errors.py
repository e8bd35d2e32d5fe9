"""One error hierarchy and one JSON shape: ``{"error": "RunNotFound", "detail": "…"}``.

Services raise these; the app maps them to responses. Services never raise HTTPException.
"""

from __future__ import annotations

from typing import Any


class GrposcopeError(Exception):
    """Base of every error the API reports to its callers."""

    status_code = 400

    def __init__(self, detail: str, *, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors

    @property
    def name(self) -> str:
        return type(self).__name__

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.name, "detail": self.detail}
        if self.errors:
            body["errors"] = self.errors
        return body


class BadRequest(GrposcopeError):
    status_code = 400


class Unauthorized(GrposcopeError):
    status_code = 401


class Forbidden(GrposcopeError):
    status_code = 403


class NotFound(GrposcopeError):
    status_code = 404


class RouteNotFound(NotFound):
    pass


class MethodNotAllowed(GrposcopeError):
    status_code = 405


class RunNotFound(NotFound):
    pass


class ProjectNotFound(NotFound):
    pass


class TeamNotFound(NotFound):
    pass


class Conflict(GrposcopeError):
    status_code = 409


class PayloadTooLarge(GrposcopeError):
    status_code = 413


class UnsupportedMediaType(GrposcopeError):
    status_code = 415


class InvalidInput(GrposcopeError):
    status_code = 422


class DatabaseUnavailable(GrposcopeError):
    status_code = 503


class WriteConflict(GrposcopeError):
    """Concurrent writes kept colliding (deadlock or serialization failure) after retries."""

    status_code = 503


class DatabaseError(GrposcopeError):
    """A database error the caller cannot fix; its SQL text stays in the server log."""

    status_code = 500
