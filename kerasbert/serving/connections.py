"""The connections of ``kerasbert serve``: deadlines for slow clients, a cap on open connections, a bounded shutdown.

uvicorn reads a request for as long as its client takes, so a client that sends its header or body a byte at a time
holds a connection, and a file descriptor, without end; enough of them and ``accept()`` fails for everyone. Here:

- **header deadline** (``header_timeout_s``): a connection whose request header is not whole this long after it
  opened (or after the first byte of a kept-alive connection's next request) is answered 408 and closed. uvicorn
  has no such setting, so `Protocol` (uvicorn's h11 protocol, given to uvicorn as its ``http`` protocol) keeps it;
- **body deadline** (``body_timeout_s``): a body not whole this long after its header is answered 408 (JSON,
  ``Connection: close``) by `BodyDeadline`, an ASGI middleware that puts a deadline on each ``receive``;
- **connection cap** (``max_connections``): a connection beyond it is answered 503 as soon as it opens, before it
  sends a byte, so the cap holds against clients that never finish a header. uvicorn's ``limit_concurrency`` only
  refuses at each request, so `Protocol` refuses first; ``limit_concurrency`` stays set, for requests whose client
  left while the model ran. The cap is lowered to fit the process's open-file limit (`fit_open_files`), so
  ``accept()`` never runs out of file descriptors while the server holds its cap;
- **keep-alive** (``keep_alive_s``): uvicorn's ``timeout_keep_alive`` closes an idle kept-alive connection;
- **header size**: a header still incomplete past `MAX_HEADER_BYTES` (uvicorn's ``h11_max_incomplete_event_size``)
  is answered 400;
- **grace** (``grace_s``): on SIGTERM the server stops accepting, closes idle connections, and lets requests in
  flight finish for up to ``grace_s`` (uvicorn's ``timeout_graceful_shutdown``); a request still running then is
  answered 503 by `BodyDeadline`, and the process ends.

Every answer given here is JSON, ``{"error": "..."}``, as the service's own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http
import json
import math
import os

import uvicorn
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from kerasbert.choices import SERVE_DEFAULTS
from kerasbert.errors import ConfigError, fail
from kerasbert.log import logger

__all__ = ["BodyDeadline", "ConnectionLimits", "MAX_HEADER_BYTES", "Protocol", "check_number", "fit_open_files",
           "make_server"]

MAX_HEADER_BYTES = 16 * 1024  # the request line and headers; h11's default, set here so it is stated
LINGER_S = 1.0  # a refused connection is read (and dropped) this long, so that closing it does not reset the answer
ACCEPT_BATCH = 16  # the most connections asyncio accepts in one turn of the event loop (uvicorn's ``backlog``)
LISTEN_BACKLOG = 2048  # connections the kernel holds until they are accepted
LINGER_MAX = 2 * ACCEPT_BATCH  # the most refused connections lingering at once (see `Protocol._refuse`)
# File descriptors kept free beyond the cap: asyncio accepts a batch in each turn of the event loop, and a refused
# connection's descriptor is closed a few turns after it was accepted; then the lingering ones and the runtime's own.
FILES_RESERVE = 4 * ACCEPT_BATCH + LINGER_MAX + 32


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take and how many may be connected (see the module docstring).

    Args:
        header_timeout_s: float. the most seconds from a connection's opening (on a kept-alive connection, from its
            next request's first byte) to its whole request header.
        body_timeout_s: float. the most seconds from a request's header to its whole body.
        keep_alive_s: float. how long an idle kept-alive connection stays open.
        max_connections: int. the most connections open at once; beyond, 503 at once.
        grace_s: float. on SIGTERM, how long requests in flight may run before they are answered 503.

    Example:
    >>> ConnectionLimits(grace_s=20).grace_s
    20
    >>> ConnectionLimits(header_timeout_s=float("nan"))
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: header_timeout_s: expected a finite number > 0, found nan
    """

    header_timeout_s: float = SERVE_DEFAULTS["header_timeout_s"]
    body_timeout_s: float = SERVE_DEFAULTS["body_timeout_s"]
    keep_alive_s: float = SERVE_DEFAULTS["keep_alive_s"]
    max_connections: int = SERVE_DEFAULTS["max_connections"]
    grace_s: float = SERVE_DEFAULTS["grace_s"]

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            check_number(field.name, getattr(self, field.name), whole=field.name == "max_connections")


def check_number(key: str, value: object, whole: bool, positive: bool = True) -> None:
    """A ConfigError naming ``key`` unless ``value`` is an integer (``whole``) or a finite number, above 0 (or at
    least 0 when not ``positive``)."""
    if (isinstance(value, bool) or not isinstance(value, int if whole else int | float) or not math.isfinite(value)
            or value < 0 or (positive and value == 0)):
        expected = f"{'an integer' if whole else 'a finite number'} {'>' if positive else '>='} 0"
        raise fail(ConfigError, key, expected, repr(value))


def _answer(status: int, message: str, **headers: str) -> bytes:
    """A whole HTTP/1.1 answer ``{"error": message}`` that closes the connection."""
    body = json.dumps({"error": message}).encode()
    lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}", "content-type: application/json",
             f"content-length: {len(body)}", "connection: close",
             *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap that refuses at once.

    Args:
        limits: ConnectionLimits. the deadlines and the cap; the others are uvicorn's.
        lingering: dict. the server's refused connections still lingering, oldest first (at most `LINGER_MAX`).
    """

    def __init__(self, *args, limits: ConnectionLimits, lingering: dict, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.limits, self.lingering = limits, lingering
        self._header_timer: asyncio.TimerHandle | None = None
        self._refused = self._drained = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self.connections.discard(self)  # a refused connection is not one of those the cap counts
            self._refuse(503, f"connections: expected at most {self.limits.max_connections} open at once, found "
                              "all of them in use. Retry later", retry_after="1")
            return
        self._start_header_timer()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            self._drained = True  # read and dropped until the client closes or the linger ends
            return
        if self.cycle is None or self.cycle.response_complete:  # the first bytes of a request
            self._start_header_timer()
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle:  # its header is whole: a new request began
            self._stop_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        self.lingering.pop(self, None)
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """A request h11 cannot read (a malformed or an over-long header) is answered in JSON too."""
        self._refuse(400, f"request: expected HTTP/1.1 with a header of at most {MAX_HEADER_BYTES} bytes, found a "
                          f"request that cannot be read ({msg.rstrip('.')})")

    def _start_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._header_late)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self._refuse(408, f"header: expected the whole request header within {self.limits.header_timeout_s:g} s,"
                              " found it unfinished. Send each request whole")

    def _refuse(self, status: int, message: str, **headers: str) -> None:
        """Answer ``status`` with ``message``, end the sending side, and close once the client has, or after
        `LINGER_S`: closing with unread bytes would reset the connection, and the client could lose the answer.
        With `LINGER_MAX` lingering, the oldest whose request has been read closes to make room (closing it resets
        nothing); with none such, or when the client is gone, this connection closes at once."""
        self._refused = True
        self._stop_header_timer()
        self.connections.discard(self)
        self.transport.write(_answer(status, message, **headers))
        if len(self.lingering) >= LINGER_MAX:
            read = next((protocol for protocol in self.lingering if protocol._drained), None)
            if read is not None:
                del self.lingering[read]
                read.transport.close()
        try:
            linger = len(self.lingering) < LINGER_MAX and self.transport.can_write_eof()
            if linger:
                self.transport.write_eof()
        except OSError:  # the client has gone already
            linger = False
        if not linger:
            self.transport.close()
            return
        self.lingering[self] = None
        self.loop.call_later(LINGER_S, self.transport.close)


class BodyDeadline:
    """ASGI middleware: a body not whole ``limits.body_timeout_s`` after its header is answered 408 and its
    connection closed; a request cut short by the end of the shutdown grace is answered 503.

    The 408 is raised as a starlette ``HTTPException`` from ``receive``, so the app's handler answers it as it
    answers every error.

    Args:
        app: ASGI app. the app to wrap.
        limits: ConnectionLimits. ``body_timeout_s`` and ``grace_s`` are read.
    """

    def __init__(self, app: ASGIApp, limits: ConnectionLimits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, self._receive(receive), sending)
        except asyncio.CancelledError:  # uvicorn cancels what still runs when the grace ends: answer, then end
            if not started:
                logger.warning("answered 503 to %s %s: still running when the shutdown grace ended", scope["method"],
                               scope["path"])
                body = json.dumps({"error": f"request: expected an answer within the shutdown grace of "
                                            f"{self.limits.grace_s:g} s, found the server stopping first. Retry"})
                await send({"type": "http.response.start", "status": 503,
                            "headers": [(b"content-type", b"application/json"), (b"connection", b"close"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body.encode()})

    def _receive(self, receive: Receive) -> Receive:
        """``receive`` with a deadline on the body: ``body_timeout_s`` from now, for all of it together."""
        loop = asyncio.get_running_loop()
        deadline, read, whole = loop.time() + self.limits.body_timeout_s, 0, False

        async def receiving() -> Message:
            nonlocal read, whole
            if whole:
                return await receive()  # after the body, receive waits for a disconnect: no deadline
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
            except asyncio.TimeoutError:
                raise HTTPException(408, f"body: expected it whole within {self.limits.body_timeout_s:g} s of the "
                                         f"header, found {read} bytes by then. Send each request whole",
                                    headers={"Connection": "close"}) from None
            read += len(message.get("body", b""))
            whole = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        return receiving


def fit_open_files(max_connections: int) -> int:
    """``max_connections``, lowered where the open-file limit cannot hold it and `FILES_RESERVE` more.

    The soft limit is first raised toward the hard one. Without ``resource`` (Windows) the cap stays.
    """
    try:
        import resource
    except ImportError:
        return max_connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
    needed = in_use + max_connections + FILES_RESERVE
    if soft != resource.RLIM_INFINITY and soft < needed:
        wanted = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    fits = max_connections if soft == resource.RLIM_INFINITY else min(max_connections, soft - in_use - FILES_RESERVE)
    if fits < 1:
        raise fail(ConfigError, "max_connections", f"room for connections under the open-file limit ({soft}, with "
                   f"{in_use} open and {FILES_RESERVE} kept free)", "none", "raise it with ulimit -n")
    if fits < max_connections:
        logger.warning("max_connections lowered from %d to %d: the open-file limit is %d (ulimit -n), %d are open "
                       "and %d are kept free", max_connections, fits, soft, in_use, FILES_RESERVE)
    return fits


class _Server(uvicorn.Server):
    """uvicorn's server whose sockets keep `LISTEN_BACKLOG`: asyncio listens with its accept batch, uvicorn's
    ``backlog``, which is kept small so that a burst of connections cannot open more files than `FILES_RESERVE`."""

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets=sockets)
        for sock in sockets or ():
            sock.listen(LISTEN_BACKLOG)


def make_server(app: ASGIApp, limits: ConnectionLimits = ConnectionLimits()) -> uvicorn.Server:
    """A uvicorn server of ``app`` that holds ``limits``; run it with ``.run(sockets=[sock])``.

    Args:
        app: ASGI app. the app to serve (`kerasbert.serving.server.make_app`).
        limits: ConnectionLimits. the deadlines, the cap (fitted to the open-file limit here) and the grace.

    Returns:
        uvicorn.Server. Setting its ``should_exit`` stops it as SIGTERM does.
    """
    cap, lingering = fit_open_files(limits.max_connections), {}
    limits = dataclasses.replace(limits, max_connections=cap)
    config = uvicorn.Config(BodyDeadline(app, limits), log_level="warning", access_log=False, lifespan="on",
                            http=lambda *args, **kwargs: Protocol(*args, limits=limits, lingering=lingering, **kwargs),
                            ws="none",
                            limit_concurrency=cap + 1,  # uvicorn counts the connection asking too
                            backlog=ACCEPT_BATCH,
                            timeout_keep_alive=limits.keep_alive_s, timeout_graceful_shutdown=limits.grace_s,
                            h11_max_incomplete_event_size=MAX_HEADER_BYTES)
    return _Server(config)
