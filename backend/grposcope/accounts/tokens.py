"""API tokens: random secrets shown once, stored as SHA-256 hashes.

Tokens are 256-bit random strings, so a fast unsalted hash is enough (nothing to brute
force), and it lets us look a token up by its hash in one indexed query per request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

TOKEN_PREFIX = "gs_"


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who is calling: the token's id, team and role."""

    token_id: int
    name: str
    team_id: int
    team: str
    role: str

    @property
    def can_write(self) -> bool:
        return self.role in ("writer", "admin")

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"
