"""Serve an export over HTTP with TF Serving's REST API (``kerasbert serve``): starlette, run by uvicorn.

``POST /v1/models/NAME:predict`` takes ``{"instances": [...]}``, each a string or ``{"text"[, "text_b"]}``, and
answers ``{"predictions": [...]}``: the rows `kerasbert.predict` gives, without the text sent. ``GET
/v1/models/NAME`` is TF Serving's model status; ``GET /healthz`` answers ``ok``. Instances wait in a bounded queue,
one line per client (its peer address), and `kerasbert.serving.batcher.Batcher` batches them: clients take turns,
one client's instances are sorted by length so a batch pads little, and the model runs in a thread while the event
loop reads requests. Errors answer ``{"error": "..."}``: 400 bad input, 404 unknown model, 413 too large, 429 queue
full, 500 the model failed, 504 too slow. How long a client may take and how many may be connected is
`kerasbert.serving.connections`' concern (408 too slow a client, 503 too many connections or a request cut by the
shutdown's grace).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from kerasbert.choices import EXPORT_FORMATS, SERVE_DEFAULTS, input_fields
from kerasbert.errors import ConfigError, fail
from kerasbert.log import logger
from kerasbert.serving.batcher import Batcher
from kerasbert.serving.connections import ConnectionLimits, check_number, make_server
from kerasbert.serving.export import export as export_run
from kerasbert.serving.exported import Served, open_export
from kerasbert.serving.folder import EXPORT_INFO, read_info

__all__ = ["Batcher", "check_serve", "make_app", "serve"]

VERSION = "1"  # an export is one model version, as TF Serving numbers it
STATUS = {"model_version_status": [{"version": VERSION, "state": "AVAILABLE",
                                    "status": {"error_code": "OK", "error_message": ""}}]}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
APP_LIMITS = ("max_batch", "max_wait_ms", "max_queue", "max_instances", "max_body_bytes", "timeout_s")  # make_app's


# ------------------------------------------------------------------------------------------- requests
async def _body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past ``limit`` bytes: by its Content-Length, then as it is read."""
    length = request.headers.get("content-length", "")
    too_large = f"a body of at most {limit} bytes"
    if length.isdigit() and int(length) > limit:
        raise HTTPException(413, f"body: expected {too_large}, found Content-Length {length}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"body: expected {too_large}, found more")
        chunks.append(chunk)
    return b"".join(chunks)


def _instances(body: bytes, fields: tuple[str, ...], max_instances: int) -> list[dict]:
    """``{"instances": [...]}`` -> rows of the model's input ``fields`` (``{"text"[, "text_b"]}``, or a task's own,
    `kerasbert.choices.input_fields`), or a 400 (413 past ``max_instances``)."""
    try:
        parsed = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise HTTPException(400, f"body: expected UTF-8, found {e}") from None
    except (ValueError, RecursionError) as e:
        raise HTTPException(400, f"body: expected JSON, found {type(e).__name__}: {e}") from None
    if not isinstance(parsed, dict) or "instances" not in parsed:
        hint = '. The columnar "inputs" form is not served' if isinstance(parsed, dict) and "inputs" in parsed else ""
        raise HTTPException(400, f'body: expected an object with "instances", found {_kind(parsed)}{hint}')
    instances = parsed["instances"]
    if not isinstance(instances, list):
        raise HTTPException(400, f"instances: expected a list, found {_kind(instances)}")
    if len(instances) > max_instances:
        raise HTTPException(413, f"instances: expected at most {max_instances}, found {len(instances)}. Split the "
                                 "request")
    return [_row(instance, i, fields) for i, instance in enumerate(instances)]


def _row(instance, i: int, fields: tuple[str, ...]) -> dict:
    """One instance -> its row; a 400 names the instance, what it holds and what the model reads."""
    single = fields == ("text",)
    wanted = "{" + ", ".join(f'"{field}": ...' for field in fields) + "}"
    wanted = f"a string or {wanted}" if single else wanted
    row = {"text": instance} if isinstance(instance, str) and single else instance
    if not isinstance(row, dict) or set(row) != set(fields):
        raise HTTPException(400, f"instances[{i}]: expected {wanted}, found {_kind(instance)}")
    for key, value in row.items():
        if not isinstance(value, str):
            raise HTTPException(400, f"instances[{i}].{key}: expected a string, found {_kind(value)}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise HTTPException(400, f"instances[{i}].{key}: expected Unicode text, found a lone surrogate") from None
    return row


def _kind(value) -> str:
    """A JSON value as an error message names it: ``an object with keys ['txt']``, ``a number 3``."""
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)}"[:80]
    if value is None:
        return "null"
    kinds = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return f"{kinds[type(value)]} {json.dumps(value, ensure_ascii=False)[:40]}"


async def _error(request: Request, error: HTTPException) -> Response:
    return JSONResponse({"error": error.detail}, error.status_code, headers=error.headers)


class _Service:
    """The endpoints of one model."""

    def __init__(self, export: Served, name: str, batcher: Batcher, max_instances: int,
                 max_body_bytes: int, timeout_s: float) -> None:
        self.export, self.name, self.batcher = export, name, batcher
        self.max_instances, self.max_body_bytes, self.timeout_s = max_instances, max_body_bytes, timeout_s

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def status(self, request: Request) -> Response:
        if request.url.path.endswith(":predict"):
            raise HTTPException(405, f"{request.url.path}: expected POST, found {request.method}")
        self._check_model(request)
        return JSONResponse(STATUS)

    async def predict(self, request: Request) -> Response:
        self._check_model(request)
        fields = input_fields(self.export.info["task"], self.export.info["pairs"])
        rows = _instances(await _body(request, self.max_body_bytes), fields, self.max_instances)
        try:
            futures = self.batcher.submit(rows, request.client.host if request.client else None)
        except asyncio.QueueFull:
            raise HTTPException(429, f"queue: expected room for {len(rows)} instances, found it full "
                                     f"({self.batcher.max_queue}). Retry later") from None
        try:
            results = await asyncio.wait_for(asyncio.gather(*futures), self.timeout_s)
        except asyncio.TimeoutError:
            raise HTTPException(504, f"predict: expected an answer within {self.timeout_s:g} s, found none. Retry "
                                     "later or send fewer instances") from None
        except Exception as e:  # noqa: BLE001 - the model failed on this batch; the server goes on
            raise HTTPException(500, f"predict: the model failed: {type(e).__name__}: {str(e)[:300]}") from None
        return JSONResponse({"predictions": [{key: value for key, value in result.items() if key not in fields}
                                             for result in results]})

    def _check_model(self, request: Request) -> None:
        name, version = request.path_params["name"], request.path_params.get("version", VERSION)
        if name != self.name:
            raise HTTPException(404, f"model: expected {self.name!r}, found {name!r}")
        if version != VERSION:
            raise HTTPException(404, f"version: expected {VERSION!r}, found {version!r}")


def _check(name: str, **limits: float) -> None:
    """A `kerasbert.errors.ConfigError` for a model name no URL can hold or a limit that is not a finite positive
    number (``max_wait_ms`` may be 0; counts are integers)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise fail(ConfigError, "name", "letters, digits, '.', '_' or '-', the first a letter or digit", repr(name))
    for key, value in limits.items():
        check_number(key, value, whole=not key.endswith(("_ms", "_s")), positive=key != "max_wait_ms")
    if limits["max_instances"] > limits["max_queue"]:
        raise fail(ConfigError, "max_instances", f"at most max_queue ({limits['max_queue']})",
                   str(limits["max_instances"]))


def make_app(export: Served, name: str, max_batch: int = SERVE_DEFAULTS["max_batch"],
             max_wait_ms: float = SERVE_DEFAULTS["max_wait_ms"], max_queue: int = SERVE_DEFAULTS["max_queue"],
             max_instances: int = SERVE_DEFAULTS["max_instances"],
             max_body_bytes: int = SERVE_DEFAULTS["max_body_bytes"],
             timeout_s: float = SERVE_DEFAULTS["timeout_s"]) -> Starlette:
    """The ASGI app serving ``export`` as model ``name``; its lifespan runs the batching worker.

    Args:
        export: Served. an export opened with `kerasbert.serving.exported.open_export`.
        name: str. the model name of the URLs (``/v1/models/NAME:predict``).
        max_batch: int. the most instances the model runs at once.
        max_wait_ms: float. how long the oldest waiting instance waits for others before its batch runs.
        max_queue: int. the most instances waiting; a request that does not fit answers 429.
        max_instances: int. the most instances of one request (at most ``max_queue``); beyond, 413.
        max_body_bytes: int. the largest request body; beyond, 413.
        timeout_s: float. how long a request waits for its predictions; beyond, 504.

    Returns:
        starlette.applications.Starlette. Run it with uvicorn, or with ``starlette.testclient.TestClient`` used
        as a context manager (which runs the lifespan).
    """
    _check(name, max_batch=max_batch, max_wait_ms=max_wait_ms, max_queue=max_queue, max_instances=max_instances,
           max_body_bytes=max_body_bytes, timeout_s=timeout_s)
    batcher = Batcher(lambda rows: export.predict(rows, max_batch), max_batch, max_wait_ms, max_queue)
    service = _Service(export, name, batcher, max_instances, max_body_bytes, timeout_s)
    routes = [Route("/healthz", service.healthz),
              Route("/v1/models/{name}", service.status),
              Route("/v1/models/{name}/versions/{version}", service.status),
              Route("/v1/models/{name}:predict", service.predict, methods=["POST"]),
              Route("/v1/models/{name}/versions/{version}:predict", service.predict, methods=["POST"])]
    return Starlette(routes=routes, exception_handlers={HTTPException: _error},
                     lifespan=lambda app: batcher.running())


# ------------------------------------------------------------------------------------------- serve
def _source(path: str, backend: str | None = None, stride: int | None = None) -> str:
    """``"export"`` or ``"run"``: what `_open` serves from ``path``, checked before any model loads (so before
    TensorFlow starts): the folder, a run's files (`kerasbert.finetune.runs.finished_run`), an export's
    ``kerasbert-export.json``, and ``backend`` and ``stride`` against it."""
    from kerasbert.finetune.runs import finished_run

    if backend is not None and backend not in EXPORT_FORMATS:
        raise fail(ConfigError, "--backend", " or ".join(EXPORT_FORMATS), repr(backend))
    if not os.path.isfile(os.path.join(path, EXPORT_INFO)) and os.path.isfile(os.path.join(path, "args.json")):
        finished_run(path)
        return "run"
    if not os.path.isfile(os.path.join(path, EXPORT_INFO)):
        raise fail(ConfigError, path, f"an export folder ({EXPORT_INFO}) or a run folder (args.json)",
                   "neither" if os.path.isdir(path) else "no such folder")
    if stride is not None:
        raise fail(ConfigError, "--stride", "a run folder (an export windows as it was exported)",
                   f"the export folder {path}", "export the run again with --stride, or serve the run folder")
    info = read_info(path)
    if backend is not None and info.get("format", "saved_model") != backend:
        raise fail(ConfigError, "--backend", f"the format of the export {path}, {info.get('format')!r}",
                   repr(backend), "leave --backend out to serve an export as it was written")
    return "export"


def _open(path: str, stack: contextlib.ExitStack, backend: str | None = None, stride: int | None = None) -> Served:
    """An export folder, or a run folder exported into a temporary folder (with ``stride``, when given: see
    `kerasbert.serving.export.export`); checked (`_source`) and warmed up before serving."""
    if _source(path, backend, stride) == "run":
        folder = os.path.join(stack.enter_context(tempfile.TemporaryDirectory(prefix="kerasbert-serve-")), "export")
        logger.info("exporting the run %s into %s for serving", path, folder)
        export_run(path, folder, backend or "saved_model", stride=stride)
        path = folder
    return open_export(path)  # checked there: its labels fit its model, and it answers a text


def _check_port(port: int) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise fail(ConfigError, "port", "an integer from 0 to 65535 (0: a free one)", repr(port))


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: a free one), so a busy port fails before the model loads.

    It is made with TCP as its protocol: asyncio turns Nagle's algorithm off only on connections of such a socket,
    and with it on, each answer on a kept-alive connection waits for the client's delayed ACK.
    """
    _check_port(port)
    try:
        family, kind, protocol = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][:3]
        sock = socket.socket(family, kind, protocol or socket.IPPROTO_TCP)
    except OSError as e:
        raise fail(ConfigError, f"--host {host}", "an address to listen on", str(e)) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise fail(ConfigError, f"--host {host} --port {port}", "an address to listen on", str(e)) from None
    return sock


def check_serve(path: str, name: str | None = None, port: int = SERVE_DEFAULTS["port"],
                settings: dict | None = None, backend: str | None = None,
                stride: int | None = None) -> tuple[str, dict, ConnectionLimits]:
    """What `serve` checks before it binds an address or loads a model, none of it needing TensorFlow: the model name,
    the ``settings`` (`make_app`'s limits and `ConnectionLimits`' fields, their defaults where left out), the port,
    and the folder with ``backend`` and ``stride`` (`_source`).

    Returns:
        The model name (default: the folder's name), `make_app`'s limits, and the `ConnectionLimits`.
    """
    name = name or os.path.basename(os.path.abspath(path))
    settings = {**{key: SERVE_DEFAULTS[key] for key in APP_LIMITS}, **(settings or {})}
    limits = {key: settings.pop(key) for key in APP_LIMITS}
    _check(name, **limits)
    connections = ConnectionLimits(**settings)  # the rest: a misspelled setting is a TypeError
    _check_port(port)
    _source(path, backend, stride)
    return name, limits, connections


def serve(path: str, host: str = SERVE_DEFAULTS["host"], port: int = SERVE_DEFAULTS["port"], name: str | None = None,
          max_batch: int = SERVE_DEFAULTS["max_batch"], max_wait_ms: float = SERVE_DEFAULTS["max_wait_ms"],
          max_queue: int = SERVE_DEFAULTS["max_queue"], max_instances: int = SERVE_DEFAULTS["max_instances"],
          max_body_bytes: int = SERVE_DEFAULTS["max_body_bytes"], timeout_s: float = SERVE_DEFAULTS["timeout_s"],
          header_timeout_s: float = SERVE_DEFAULTS["header_timeout_s"],
          body_timeout_s: float = SERVE_DEFAULTS["body_timeout_s"],
          keep_alive_s: float = SERVE_DEFAULTS["keep_alive_s"],
          max_connections: int = SERVE_DEFAULTS["max_connections"], grace_s: float = SERVE_DEFAULTS["grace_s"],
          backend: str | None = None, stride: int | None = None) -> None:
    """Serve an export (or a run, exported first into a temporary folder) until SIGINT or SIGTERM.

    A bad export, run, name, setting or address fails here with a `kerasbert.errors.ConfigError`, before any
    request. On SIGTERM the server stops accepting connections, closes idle ones, lets the requests it holds finish
    for up to ``grace_s``, answers those still running 503, and returns.

    Args:
        path: str. an export folder (``kerasbert export``) or a run folder (``kerasbert train``).
        host: str. the address to listen on.
        port: int. the port; 0 picks a free one (the log line names it).
        name: str. the model name of the URLs; default: the folder's name.
        max_batch, max_wait_ms, max_queue, max_instances, max_body_bytes, timeout_s: as in `make_app`.
        header_timeout_s, body_timeout_s, keep_alive_s, max_connections, grace_s: as in
            `kerasbert.serving.connections.ConnectionLimits`.
        backend: str or None. ``saved_model``, ``openvino`` or ``onnx``: the format a run is exported to (default
            ``saved_model``); an export is served in its own format, which ``backend``, when given, must name.
        stride: int or None. a run folder: split long texts into windows sharing this many word pieces (None: as the
            run was trained); an export windows as it was exported.
    """
    path = os.fspath(path)
    settings = {"max_batch": max_batch, "max_wait_ms": max_wait_ms, "max_queue": max_queue,
                "max_instances": max_instances, "max_body_bytes": max_body_bytes, "timeout_s": timeout_s,
                "header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s, "keep_alive_s": keep_alive_s,
                "max_connections": max_connections, "grace_s": grace_s}
    name, limits, connections = check_serve(path, name, port, settings, backend, stride)  # before the slow load
    with contextlib.ExitStack() as stack:
        sock = stack.enter_context(_bind(host, port))
        served = _open(path, stack, backend, stride)
        server = make_server(make_app(served, name, **limits), connections)
        sock.listen(2048)  # from here a connection waits for the server instead of being refused
        address = sock.getsockname()
        url = f"http://{f'[{address[0]}]' if ':' in address[0] else address[0]}:{address[1]}"
        labels = f", {len(served.info['labels'])} labels" if served.info["labels"] else ""
        logger.info("serving %s (%s%s) at %s/v1/models/%s:predict", served.path, served.info["task"], labels, url,
                    name)
        with _stopped_by_signals(server):
            server.run(sockets=[sock])


@contextlib.contextmanager
def _stopped_by_signals(server) -> Iterator[None]:
    """SIGINT and SIGTERM stop ``server`` gracefully; after, uvicorn raises the signal again, which ends here."""
    signals = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
    previous = {sig: signal.signal(sig, lambda *_: setattr(server, "should_exit", True)) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
