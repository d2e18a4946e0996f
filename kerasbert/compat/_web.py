"""`WebServing`: bert4keras's ``snippets.WebServing``, a function behind an HTTP route, on kerasbert's serving stack.

bert4keras wraps bottle; here the routes are a Starlette app (``web.app``) that `WebServing.start` serves with
uvicorn, as ``kerasbert serve`` does (`kerasbert.serving.server`). The answers are bert4keras's: status 200 and the
JSON text ``{"code": 0, "desc": "succeeded", "data": func(**arguments)}``; code 1 where the request lacks a
required argument or one fails its conversion, code 2 where ``func`` raises (``desc`` its message).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kerasbert.errors import ConfigError, fail

__all__ = ["WebServing"]

METHODS = ("GET", "POST")


def _answer(code: int, desc: str, data=None) -> Response:
    """bert4keras's JSON answer (non-ASCII kept as is), always with status 200 as bottle sent it."""
    body = json.dumps({"code": code, "desc": desc, "data": {} if data is None else data}, ensure_ascii=False)
    return Response(body, media_type="application/json")


async def _fields(request: Request, method: str) -> dict[str, str] | str:
    """The request's fields: the query string's for GET, the urlencoded form's for POST (the last of a repeated
    name); a description of the body where it is not a form this reads."""
    if method == "GET":
        return dict(request.query_params)
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind not in ("", "application/x-www-form-urlencoded"):
        return f"a body of application/x-www-form-urlencoded fields, found {kind}"
    body = (await request.body()).decode("utf-8", errors="replace")
    return dict(parse_qsl(body, keep_blank_values=True))


def _check_arguments(arguments) -> None:
    if not isinstance(arguments, dict) or not all(
            isinstance(spec, (tuple, list)) and len(spec) == 2 and (spec[0] is None or callable(spec[0]))
            for spec in arguments.values()):
        raise fail(ConfigError, "WebServing.route: arguments",
                   "{name: (conversion or None, required)}, e.g. {'text': (None, True), 'n': (int, False)}",
                   repr(arguments)[:120])


class WebServing:
    """A small web interface to Python functions, as bert4keras's: each route reads its arguments from the query
    string (GET) or a urlencoded form (POST), converts them, calls the function and answers JSON.

    Args:
        host: str. the address `start` listens on.
        port: int. the port `start` listens on (0: a free one).
        server: str. bottle's server adapter in bert4keras (``"paste"``); kept for scripts that pass it, the server
            here is always uvicorn.

    Example:
    >>> from starlette.testclient import TestClient
    >>> web = WebServing(port=8864)
    >>> web.route("/add", lambda a, b=1: a + b, {"a": (int, True), "b": (int, False)})
    >>> TestClient(web.app).get("/add", params={"a": "2"}).json()
    {'code': 0, 'desc': 'succeeded', 'data': 3}
    """

    def __init__(self, host: str = "0.0.0.0", port: int = 8000, server: str = "paste") -> None:
        from kerasbert.serving.server import _check_port

        _check_port(port)
        self.host, self.port, self.server = host, port, server
        self.app = Starlette()
        self.address: tuple | None = None  # where `start` listens, once bound
        self.uvicorn = None  # the running server, once `start` runs: setting its should_exit stops it

    def wraps(self, func: Callable, arguments: dict, method: str = "GET") -> Callable:
        """The endpoint of ``func``: an async Starlette endpoint answering as the module docstring says.

        Args:
            func: callable. called with the arguments as keywords; what it returns must be JSON (lists, dicts,
                str, numbers).
            arguments: dict. ``{name: (conversion, required)}``: the conversion (``int``, ``float``, any callable,
                None: the string itself) and whether a request must give it.
            method: str. "GET" or "POST".
        """
        _check_arguments(arguments)
        if method not in METHODS:
            raise fail(ConfigError, "WebServing.route: method", '"GET" or "POST"', repr(method))

        async def endpoint(request: Request) -> Response:
            fields = await _fields(request, method)
            if isinstance(fields, str):
                return _answer(1, f"expected {fields}")
            kwargs = {}
            for name, (convert, required) in arguments.items():
                if name not in fields:
                    if required:
                        return _answer(1, f'lack of "{name}" argument')
                    continue
                try:
                    kwargs[name] = fields[name] if convert is None else convert(fields[name])
                except Exception as e:  # the request's fault: code 1, where bottle answered a 500 page
                    return _answer(1, f'wrong "{name}" argument: expected {getattr(convert, "__name__", convert)}, '
                                      f"found {fields[name]!r} ({e})")
            try:
                data = await run_in_threadpool(func, **kwargs)
                return _answer(0, "succeeded", data)
            except Exception as e:  # the function's fault: code 2 with its message, as bert4keras answers
                return _answer(2, str(e))

        return endpoint

    def route(self, path: str, func: Callable, arguments: dict, method: str = "GET") -> None:
        """Serve ``func`` at ``path`` (arguments as `wraps` takes them)."""
        self.app.router.routes.append(Route(path, self.wraps(func, arguments, method), methods=[method]))

    def start(self) -> None:
        """Serve the routes at ``host:port`` until SIGINT or SIGTERM (or ``self.uvicorn.should_exit = True``)."""
        from kerasbert.log import logger
        from kerasbert.serving.connections import make_server
        from kerasbert.serving.server import _bind, _stopped_by_signals

        with _bind(self.host, self.port) as sock:
            self.uvicorn = make_server(self.app)
            sock.listen(2048)
            self.address = sock.getsockname()[:2]
            logger.info("WebServing at http://%s:%s", *self.address)
            with _stopped_by_signals(self.uvicorn):
                self.uvicorn.run(sockets=[sock])
