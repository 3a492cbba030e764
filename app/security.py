"""Security middleware: headers on every answer, a body size limit, no leaked internals.

A plain ASGI middleware (not Starlette's BaseHTTPMiddleware) so it sees every response,
including static files, errors and 413s it sends itself, and so it can count a streamed body.
It is also the app's last-resort error handler: Starlette's own 500 handler sits outside every
user middleware, so its answers would lack the headers.
"""

from __future__ import annotations

import asyncio
import json
import logging

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

# Only our own origin. 'unsafe-inline' for styles because plotly.js sets element styles and
# injects its own <style> rules at run time (it cannot draw without them); scripts stay 'self'
# only: plotly's SVG heatmaps need neither eval nor inline scripts. data:/blob: images are what
# Plotly's "download PNG" button and its heatmap rendering (canvas -> image) produce.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'"
)

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


class SecurityMiddleware:
    """Adds SECURITY_HEADERS to every HTTP response; answers 413 for bodies over the limit and
    a generic 500 (logged with its traceback, none sent) for any unexpected exception.

    The body is read (up to `max_body_bytes`) before the app runs and then replayed to it, so
    a body without Content-Length (chunked) is limited too, and no handler ever sees part of
    an oversized body.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(send_with_headers)
            return

        chunks: list[bytes] = []
        size = 0
        first: Message | None = None
        while True:
            message = await receive()
            if message["type"] != "http.request":  # http.disconnect: pass it on as it is
                first = message
                break
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_body_bytes:
                await self._too_large(send_with_headers)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                first = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
                break

        assert first is not None
        buffered: Message = first
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return buffered
            return await receive()

        try:
            await self.app(scope, replay, send_with_headers)
        except Exception:
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            if started:  # too late for an error status: the client sees a cut response
                raise
            await self._send_json(send_with_headers, 500, "internal server error")

    async def _too_large(self, send: Send) -> None:
        detail = (
            f"request body is larger than the limit of {self.max_body_bytes} bytes (max_body_bytes)"
        )
        await self._send_json(send, 413, detail, close=True)

    @staticmethod
    async def _send_json(send: Send, status: int, detail: str, close: bool = False) -> None:
        body = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if close:  # the unread rest of the body makes the connection unusable
            headers.append((b"connection", b"close"))
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": headers,
            }
        )
        await send({"type": "http.response.body", "body": body})


class ConcurrencyLimitMiddleware:
    """At most `limit` POST requests under /api/ (the inference routes) run at once; the others
    wait here, in the event loop, holding no worker thread.

    FastAPI runs plain `def` routes in a thread pool of 40: without a bound, a burst of large
    requests runs 40 model calls at once, each holding its tensors and its JSON (a 256-token
    answer with nested maps peaks at ~300 MB), sharing the same cores, so every one of them is
    slow. GET requests (pages, health, static files) are never held back.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._semaphore: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or not str(scope.get("path", "")).startswith("/api/")
        ):
            await self.app(scope, receive, send)
            return
        if self._semaphore is None:  # created on first use, in the server's event loop
            self._semaphore = asyncio.Semaphore(self.limit)
        async with self._semaphore:
            await self.app(scope, receive, send)
