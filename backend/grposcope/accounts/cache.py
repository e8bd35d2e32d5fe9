"""A short-lived token → principal cache, so a streaming trainer's requests skip the token
lookup (one indexed query per request; a 1-step ingest was ~10 statements in all).

Why a TTL and not invalidation only: API processes do not talk to each other, and a token
revoked through one process (or with ``grposcope token revoke`` on the database) must stop
working in all of them. The bound is the TTL: a revoked token keeps working for at most
``GRPOSCOPE_TOKEN_CACHE_S`` seconds (10 by default) in a process that had it cached; the
process that revokes it forgets it at once. Only successful lookups are cached, so a wrong
or revoked token always costs its query. Keys are the token's SHA-256 hash (the store's own
key), never the secret. ``GRPOSCOPE_TOKEN_CACHE_S=0`` turns the cache off.
"""

from __future__ import annotations

import threading

from cachetools import TTLCache

from grposcope.accounts.tokens import Principal

DEFAULT_MAX_TOKENS = 10_000


class PrincipalCache:
    """Thread-safe TTL cache of principals by token hash (request threads share it)."""

    def __init__(self, ttl_s: float, maxsize: int = DEFAULT_MAX_TOKENS) -> None:
        self._entries: TTLCache[str, Principal] | None = (
            TTLCache(maxsize=maxsize, ttl=ttl_s) if ttl_s > 0 else None
        )
        self._lock = threading.Lock()

    def get(self, token_hash: str) -> Principal | None:
        if self._entries is None:
            return None
        with self._lock:
            return self._entries.get(token_hash)

    def put(self, token_hash: str, principal: Principal) -> None:
        if self._entries is not None:
            with self._lock:
                self._entries[token_hash] = principal

    def forget_token(self, token_id: int) -> None:
        """Drop a token's entries (on revocation in this process)."""
        if self._entries is None:
            return
        with self._lock:
            stale = [h for h, p in self._entries.items() if p.token_id == token_id]
            for token_hash in stale:
                self._entries.pop(token_hash, None)
