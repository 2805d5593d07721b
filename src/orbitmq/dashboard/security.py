"""The dashboard's guard: security headers on every answer, CSRF checks on every state change.

A pure ASGI middleware (it sees every answer, also the login's 401 and the static files):

- Headers: ``Content-Security-Policy`` (``default-src 'self'``, ``frame-ancestors 'none'``,
  ``form-action 'self'``: the pages use no inline script or style), ``X-Frame-Options: DENY``,
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``.
- CSRF, for every method but GET/HEAD/OPTIONS (signed double-submit cookie): each browser gets
  a random ``orbitmq_csrf`` cookie (HttpOnly, SameSite=Strict); a form carries
  ``csrf_token`` = HMAC-SHA256(this process's secret, cookie value), which pages render through
  ``request.state.csrf_token`` (an ``X-CSRF-Token`` header also counts). Another site can
  neither read the cookie nor compute the token, and basic credentials the browser resends on
  its own do not help it. Requests a browser marks as cross-site (``Sec-Fetch-Site``) or whose
  ``Origin`` is not this server's are refused before the token is even looked at.

A refusal is a 403 with one line saying what was wrong; refusals are logged at most once per
:data:`LOG_INTERVAL_S` with how many were refused since the last line. Bodies of state-changing
requests are read here (at most :data:`MAX_FORM_BYTES`; more is a 413) and handed on unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "MAX_FORM_BYTES",
    "SECURITY_HEADERS",
    "RateLimitedLog",
    "SecurityMiddleware",
]

logger = logging.getLogger(__name__)

CSRF_COOKIE = "orbitmq_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
MAX_FORM_BYTES = 1 << 20
"""Largest body a state-changing request may carry (a test message's body included)."""
LOG_INTERVAL_S = 10.0
SAFE_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; "
        "object-src 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


class RateLimitedLog:
    """WARNING lines at most once per :data:`LOG_INTERVAL_S`, each with how many were held back."""

    def __init__(self, log: logging.Logger, interval_s: float = LOG_INTERVAL_S) -> None:
        self._log = log
        self._interval_s = interval_s
        self._held = 0
        self._logged_at = -interval_s

    def note(self, line: str) -> None:
        now = time.monotonic()
        if now - self._logged_at < self._interval_s:
            self._held += 1
            return
        held, self._held, self._logged_at = self._held, 0, now
        self._log.warning("%s (%d more like it since the last such line)", line, held)


class SecurityMiddleware:
    """Security headers and CSRF checks (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, secret: bytes | None = None) -> None:
        self.app = app
        self._secret = secret or secrets.token_bytes(32)
        self._refusals = RateLimitedLog(logger)

    def token_for(self, cookie_value: str) -> str:
        return hmac.new(self._secret, cookie_value.encode(), hashlib.sha256).hexdigest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        cookie_value = _cookie(headers.get("cookie", ""))
        new_cookie = None
        if cookie_value is None:
            cookie_value = new_cookie = secrets.token_urlsafe(32)
        token = self.token_for(cookie_value)
        scope.setdefault("state", {})["csrf_token"] = token

        async def send_guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    out[name] = value
                if new_cookie is not None:
                    out.append(
                        "set-cookie",
                        f"{CSRF_COOKIE}={new_cookie}; Path=/; HttpOnly; SameSite=Strict",
                    )
            await send(message)

        if scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send_guarded)
            return
        problem = _cross_site(scope, headers)
        body = b""
        if problem is None:
            body_or_problem = await _read_body(receive)
            if isinstance(body_or_problem, str):
                await self._refuse(scope, receive, send_guarded, body_or_problem, 413)
                return
            body = body_or_problem
            if new_cookie is not None:
                problem = "no CSRF cookie: open the page again and resubmit the form"
            elif not hmac.compare_digest(
                _submitted_token(headers, body).encode("utf-8", "replace"), token.encode()
            ):
                problem = "missing or wrong CSRF token: open the page again and resubmit the form"
        if problem is not None:
            await self._refuse(scope, receive, send_guarded, problem, 403)
            return
        await self.app(scope, _replay(body, receive), send_guarded)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, problem: str, status: int) -> None:
        self._refusals.note(f"refused {scope['method'][:20]} {str(scope.get('path', ''))[:200]}: {problem}")
        response = PlainTextResponse(f"Refused: {problem}.", status_code=status)
        await response(scope, receive, send)


def _cookie(header: str) -> str | None:
    """The CSRF cookie's value, when it looks like one this middleware issued."""
    try:
        jar = SimpleCookie(header)
    except CookieError:
        return None
    morsel = jar.get(CSRF_COOKIE)
    if morsel is None or not 16 <= len(morsel.value) <= 128:
        return None
    return morsel.value


def _cross_site(scope: Scope, headers: Headers) -> str | None:
    """Why the request comes from another site, or None when nothing says it does."""
    fetch_site = headers.get("sec-fetch-site", "")
    if fetch_site in ("cross-site", "same-site"):
        return f"cross-site request (Sec-Fetch-Site: {fetch_site})"
    origin = headers.get("origin")
    if origin is None:
        return None
    host = headers.get("host", "")
    expected = f"{scope.get('scheme', 'http')}://{host}"
    if origin.lower() != expected.lower():
        return f"cross-origin request (Origin {origin[:100]} is not {expected[:100]})"
    return None


async def _read_body(receive: Receive) -> bytes | str:
    """The request body, or why it was not read (too large)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            return f"request body larger than {MAX_FORM_BYTES} bytes"
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _submitted_token(headers: Headers, body: bytes) -> str:
    """The token a request carries: the header, else the urlencoded form's field."""
    given = headers.get(CSRF_HEADER)
    if given:
        return given
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/x-www-form-urlencoded":
        try:
            values = parse_qs(body.decode("latin-1"), max_num_fields=1000).get(CSRF_FIELD, [])
        except ValueError:
            return ""
        return values[0] if values else ""
    if content_type == "multipart/form-data":
        return _multipart_token(body)
    return ""


def _multipart_token(body: bytes) -> str:
    """The ``csrf_token`` part of a multipart body (a small field: scanned, not fully parsed)."""
    marker = f'name="{CSRF_FIELD}"'.encode()
    at = body.find(marker)
    if at < 0:
        return ""
    start = body.find(b"\r\n\r\n", at)
    if start < 0:
        return ""
    end = body.find(b"\r\n", start + 4)
    return body[start + 4 : end if end >= 0 else None].decode("latin-1")[:128]


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the already-read body on once, then the connection's own."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
