"""The connections of `kerasbert serve` (`kerasbert.serving.connections`), on real sockets on 127.0.0.1: a slow
header or body is answered 408 in JSON and closed, a connection beyond the cap is answered 503 at once while
``/healthz`` keeps answering, an idle kept-alive connection is closed, the cap fits a low open-file limit, and
SIGTERM ends within the grace with JSON answers to the slow clients. Deadlines are a second or less, so each test
takes seconds; a stub model stands in for an export (no TensorFlow)."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from kerasbert.errors import ConfigError
from kerasbert.serving.connections import ConnectionLimits, make_server
from kerasbert.serving.server import _bind, make_app

PREDICT = b"POST /v1/models/m:predict HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
BODY = json.dumps({"instances": ["ab"]}).encode()
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"

STUB = """
class Stub:
    info = {"task": "cls", "labels": ["x"], "pairs": False}

    def __init__(self):
        self.batches = []

    def predict(self, rows, batch_size=32):
        self.batches.append(list(rows))
        if any(row["text"] == "slow" for row in rows):
            import time
            time.sleep(SLOW_S)
        return [{**row, "label": row["text"][::-1]} for row in rows]
"""
SLOW_S = 2.5
namespace: dict = {"SLOW_S": SLOW_S}
exec(STUB, namespace)  # the same stub runs here and in the server processes below
Stub = namespace["Stub"]


@contextlib.contextmanager
def serving(limits: ConnectionLimits, stub=None):
    """A server of ``stub`` in a thread of this process; yields its port."""
    with _bind("127.0.0.1", 0) as sock:
        sock.listen(256)
        server = make_server(make_app(stub or Stub(), "m"), limits)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.started
        try:
            yield sock.getsockname()[1]
        finally:
            server.should_exit = True
            thread.join(30)
            assert not thread.is_alive()


def connect(port: int, timeout: float = 10) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    with sock:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def parse(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` of one HTTP/1.1 answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body[:int(headers.get("content-length", len(body)))]


def ask(port: int, raw: bytes = HEALTHZ) -> tuple[int, dict[str, str], bytes]:
    sock = connect(port)
    sock.sendall(raw)
    return parse(read_to_close(sock))


def predict_request(body: bytes = BODY, close: bool = True) -> bytes:
    return PREDICT + b"Content-Length: %d\r\n%s\r\n" % (len(body), b"Connection: close\r\n" if close else b"") + body


# ------------------------------------------------------------------------------------------- deadlines
def test_a_slow_header_is_answered_408_in_json_and_closed():
    with serving(ConnectionLimits(header_timeout_s=0.5, keep_alive_s=10)) as port:
        for first in (PREDICT, b"", b"GET /hea"):  # half a header, nothing at all, a few bytes
            sock = connect(port)
            sock.sendall(first)
            start = time.monotonic()
            status, headers, body = parse(read_to_close(sock))
            assert 0.4 < time.monotonic() - start < 3
            assert (status, headers["content-type"], headers["connection"]) == (408, "application/json", "close")
            assert json.loads(body) == {"error": "header: expected the whole request header within 0.5 s, found it "
                                                 "unfinished. Send each request whole"}
        # a kept-alive connection's next request has the same deadline from its first byte
        sock = connect(port)
        sock.sendall(predict_request(close=False))
        time.sleep(1)  # idle between requests: the keep-alive time (10 s) applies, not the header deadline
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        start = time.monotonic()
        answers = read_to_close(sock)
        assert 0.4 < time.monotonic() - start < 3
        first, _, rest = answers.partition(b'"ba"}]}')
        assert parse(first + _)[:1] == (200,) and parse(rest)[0] == 408
        assert ask(port)[0] == 200  # and the server goes on


def test_a_slow_body_is_answered_408_in_json_and_closed():
    stub = Stub()
    with serving(ConnectionLimits(body_timeout_s=1.0), stub) as port:
        sock = connect(port)
        sock.sendall(PREDICT + b"Content-Length: %d\r\n\r\n" % len(BODY))
        start, sent = time.monotonic(), 0
        with contextlib.suppress(OSError):  # a byte every 0.1 s, each well within any per-read timeout
            for sent in range(1, len(BODY)):
                sock.sendall(BODY[sent - 1:sent])
                time.sleep(0.1)
        status, headers, body = parse(read_to_close(sock))
        assert 0.9 < time.monotonic() - start < 3
        assert (status, headers["content-type"], headers["connection"]) == (408, "application/json", "close")
        message = json.loads(body)["error"]
        assert message.startswith("body: expected it whole within 1 s of the header, found ") and "bytes by then" in \
            message and 5 <= int(message.split("found ")[1].split()[0]) < len(BODY)
        assert stub.batches == []
        status, _, body = ask(port, predict_request())  # a whole body in time is answered
        assert (status, json.loads(body)) == (200, {"predictions": [{"label": "ba"}]})


def test_an_idle_kept_alive_connection_is_closed():
    with serving(ConnectionLimits(keep_alive_s=0.5, header_timeout_s=10)) as port:
        sock = connect(port)
        sock.sendall(predict_request(close=False))
        start = time.monotonic()
        status, headers, body = parse(read_to_close(sock))
        assert 0.4 < time.monotonic() - start < 3 and status == 200 and "connection" not in headers
        assert json.loads(body) == {"predictions": [{"label": "ba"}]}


def test_connections_beyond_the_cap_are_answered_503_at_once_and_healthz_still_answers():
    with serving(ConnectionLimits(max_connections=4, header_timeout_s=1.5)) as port:
        holders = [connect(port) for _ in range(4)]
        for sock in holders:
            sock.sendall(b"GET /heal")
        time.sleep(0.3)
        for raw in (HEALTHZ, predict_request()):
            start = time.monotonic()
            status, headers, body = ask(port, raw)
            assert time.monotonic() - start < 0.5
            assert (status, headers["content-type"], headers["retry-after"]) == (503, "application/json", "1")
            assert json.loads(body) == {"error": "connections: expected at most 4 open at once, found all of them "
                                                 "in use. Retry later"}
        assert [parse(read_to_close(sock))[0] for sock in holders] == [408] * 4  # the deadline frees the cap
        assert ask(port) == (200, ask(port)[1], b"ok")


def test_a_malformed_or_oversized_header_is_answered_400_in_json():
    with serving(ConnectionLimits()) as port:
        oversized = b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + b"X-A: " + b"a" * 20_000
        for raw in (b"GARBAGE\r\n\r\n", oversized):
            status, headers, body = ask(port, raw)
            assert (status, headers["connection"]) == (400, "close")
            assert json.loads(body) == {"error": "request: expected HTTP/1.1 with a header of at most 16384 bytes, "
                                                 "found a request that cannot be read (Invalid HTTP request received)"}
        assert ask(port)[::2] == (200, b"ok")

@pytest.mark.parametrize("field,value", [("header_timeout_s", float("nan")), ("body_timeout_s", 0),
                                         ("grace_s", float("inf")), ("max_connections", 2.5),
                                         ("keep_alive_s", -1)])
def test_limits_are_finite_and_positive(field, value):
    with pytest.raises(ConfigError, match=f"{field}: expected "):
        ConnectionLimits(**{field: value})


def test_serve_and_the_cli_default_to_the_limits():
    import dataclasses
    import inspect

    from kerasbert.cli import build_parser
    from kerasbert.serving.server import serve

    limits = {field.name: field.default for field in dataclasses.fields(ConnectionLimits)}
    parameters = inspect.signature(serve).parameters
    assert {name: parameters[name].default for name in limits} == limits
    args = build_parser().parse_args(["serve", "x"])
    assert {name: getattr(args, name) for name in limits} == limits
    assert limits["body_timeout_s"] < limits["grace_s"] < 30  # a slow body gets its 408 within Kubernetes' grace

# ------------------------------------------------------------------------------------------- processes
def start_server(tmp_path, limits: dict, files: int | None = None) -> tuple[subprocess.Popen, int]:
    """A server of the stub in its own process (under an open-file limit of ``files``); returns it and its port.
    Its log goes to ``server.log`` (`server_log`)."""
    script = tmp_path / "stub_server.py"
    script.write_text(STUB + textwrap.dedent(f"""
        import resource, sys
        from kerasbert.serving.connections import ConnectionLimits, make_server
        from kerasbert.serving.server import _bind, _stopped_by_signals, make_app
        SLOW_S = {SLOW_S}
        if {files is not None}:
            resource.setrlimit(resource.RLIMIT_NOFILE, ({files!r}, {files!r}))
        sock = _bind("127.0.0.1", 0)
        sock.listen(2048)
        server = make_server(make_app(Stub(), "m"), ConnectionLimits(**{limits!r}))
        print(sock.getsockname()[1], flush=True)
        with _stopped_by_signals(server):  # as `serve` runs it
            server.run(sockets=[sock])
    """))
    log = open(tmp_path / "server.log", "w+")  # a pipe nobody reads would block the server once full
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=log, text=True)
    line = process.stdout.readline()
    assert line.strip().isdigit(), server_log(tmp_path)
    port = int(line)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if ask(port)[0] == 200:
                return process, port
        time.sleep(0.05)
    process.kill()
    raise AssertionError(server_log(tmp_path))


def server_log(tmp_path) -> str:
    return (tmp_path / "server.log").read_text()


def test_under_a_low_open_file_limit_healthz_never_hangs(tmp_path):
    """300 half headers against a 256-file limit: the cap is lowered to fit, so accept() never runs out of files."""
    process, port = start_server(tmp_path, {"header_timeout_s": 2.0}, files=256)
    holders = []
    try:
        for _ in range(300):
            sock = connect(port)
            sock.sendall(b"POST /v1/mo")
            holders.append(sock)
        for _ in range(3):
            start = time.monotonic()
            status, _, body = ask(port)
            assert time.monotonic() - start < 1 and status == 503
            assert json.loads(body)["error"].startswith("connections: expected at most 123 open")
        statuses = [parse(read_to_close(sock))[0] for sock in holders]  # none left hanging, none reset
        assert statuses.count(408) == 123 and statuses.count(503) == 300 - 123
        assert ask(port)[::2] == (200, b"ok")
    finally:
        for sock in holders:
            sock.close()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    err = server_log(tmp_path)
    assert "max_connections lowered from 512 to 123: the open-file limit is 256" in err
    assert "out of system resource" not in err and "Too many open files" not in err, err


def test_sigterm_ends_within_the_grace_with_slow_clients_answered_in_json(tmp_path):
    grace = 1.5
    process, port = start_server(tmp_path, {"grace_s": grace, "header_timeout_s": 60, "body_timeout_s": 60})
    try:
        slow_body = connect(port)
        slow_body.sendall(PREDICT + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY[:4])
        slow_header = connect(port)
        slow_header.sendall(PREDICT)
        idle = connect(port)
        idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")  # answered, then kept alive
        model = connect(port)  # waits SLOW_S for the model, longer than the grace
        model.sendall(predict_request(json.dumps({"instances": ["slow"]}).encode()))
        time.sleep(0.5)
        start = time.monotonic()
        process.send_signal(signal.SIGTERM)
        answers = {name: read_to_close(sock) for name, sock in
                   (("slow_body", slow_body), ("slow_header", slow_header), ("idle", idle), ("model", model))}
        code = process.wait(timeout=30)
        took = time.monotonic() - start
    finally:
        if process.poll() is None:
            process.kill()
    err = server_log(tmp_path)
    assert code == 0, err
    assert took < max(grace, SLOW_S) + 2  # the model's batch in progress is let finish
    status, headers, body = parse(answers["slow_body"])
    assert (status, headers["content-type"]) == (503, "application/json")
    assert json.loads(body) == {"error": "request: expected an answer within the shutdown grace of 1.5 s, found "
                                         "the server stopping first. Retry"}
    assert answers["slow_header"] == b""  # no request yet: closed at once, nothing to answer
    assert parse(answers["idle"])[::2] == (200, b"ok")  # answered before, then closed
    assert parse(answers["model"])[:2] == (503, parse(answers["model"])[1]) and \
        json.loads(parse(answers["model"])[2])["error"].startswith("request: expected an answer within the shutdown")
    assert "Internal Server Error" not in err and "Traceback" not in err, err
