"""Who may call the service: one rule, which the scheduler's fast path (``serving.hot``) and the app's edge
(``serving.middleware``) both ask, so that a change to it reaches both (two copies once answered differently).

The bearer token of RFC 6750 on every route under /v1/ and on /metrics; the probes stay open. The scheme is
matched case-insensitively, as RFC 7235 §2.1 says of every auth scheme (``bearer <token>`` was refused with 401),
and the token in constant time.
"""

from __future__ import annotations

import secrets


class Access:
    """``token``: the bearer token every protected route requires; None: auth is off (loopback or told so)."""

    def __init__(self, token: bytes | None) -> None:
        self.token = token

    @staticmethod
    def protects(path: str) -> bool:
        return path.startswith("/v1/") or path == "/metrics"

    def allows(self, authorization: bytes | None) -> bool:
        """Whether an ``Authorization`` header value (None: absent) grants access."""
        if self.token is None:
            return True
        scheme, _, credentials = (authorization or b"").partition(b" ")
        return scheme.lower() == b"bearer" and secrets.compare_digest(credentials.lstrip(b" "), self.token)
