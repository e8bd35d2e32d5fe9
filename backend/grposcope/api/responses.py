"""The error responses every API operation declares, with the one body they all send.

Every error is ``{"error": "<name>", "detail": "<one line>"}`` (grposcope.errors), and a
request that fails validation adds ``errors``: ``[{"loc": [...], "msg": "..."}]``. FastAPI's
default 422 schema (``detail`` an array) is not what this server sends; these declarations
replace it, so the published OpenAPI document describes the real answers (schemathesis
checks it: tests/hardening/test_fuzz_schema.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ValidationIssue(BaseModel):
    loc: list[str | int] = Field(description="Where: e.g. ['query', 'limit'] or ['steps', 3].")
    msg: str


class ErrorBody(BaseModel):
    """The body of every error response."""

    error: str = Field(description="The error's name: RunNotFound, ValidationError, Forbidden, …")
    detail: str = Field(description="What went wrong, in one line.")
    errors: list[ValidationIssue] | None = Field(
        default=None, description="Per-field problems (invalid requests only)."
    )


# Every operation: who is calling, what it names, what it sends, and the database.
COMMON: dict[int, str] = {
    401: "No token, or an unknown or revoked one.",
    403: "The token's role or team may not do this.",
    404: "The run, project, team, token, alert or webhook named does not exist.",
    409: "The write conflicts with data already stored.",
    422: "The request is invalid: a parameter or body field out of range or of the wrong type "
    "(`error` ValidationError, with `errors`), or a value the model cannot use.",
    500: "A database error the caller cannot fix; the server log has the details.",
    503: "The database is unavailable, or writes kept colliding: send it again.",
}
# Operations with a request body: the body guard (grposcope.api.guard) answers these first.
WITH_BODY: dict[int, str] = {
    400: "The body cannot be decoded (bad gzip, an unsupported Content-Encoding).",
    413: "The body is over GRPOSCOPE_MAX_BODY_BYTES, or the batch over its limit.",
    415: "The content type is not JSON.",
}
BODY_METHODS = frozenset({"post", "put", "patch", "delete"})
_REF = "#/components/schemas/{model}"


def declare_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (an OpenAPI document) with every operation's error responses declared with
    ErrorBody, in place of FastAPI's default 422 (whose `detail` is an array: not ours)."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    body = ErrorBody.model_json_schema(ref_template=_REF)
    components.update(body.pop("$defs", {}))
    components["ErrorBody"] = body
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    ref = {"$ref": _REF.format(model="ErrorBody")}
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            codes = {**COMMON, **(WITH_BODY if method in BODY_METHODS else {})}
            if "health" in operation.get("tags", ()):  # no token, no input: the database only
                codes = {k: v for k, v in codes.items() if k >= 500}
            responses = operation.setdefault("responses", {})
            for code, description in sorted(codes.items()):
                responses[str(code)] = {
                    "description": description,
                    "content": {"application/json": {"schema": ref}},
                }
    return schema


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """A Pydantic JSON schema with its ``$defs`` written in place: a schema put into an
    OpenAPI operation by hand (the ingest body, read raw for speed) has no ``$defs`` there,
    so a ``#/$defs/StepRecord`` reference would point at nothing."""
    defs = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {k: resolve(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)
