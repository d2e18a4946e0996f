"""The HTTP server of `kerasbert serve`: TF Serving's REST shapes, micro-batched answers equal to `Export.predict`'s
under concurrent clients, every bad request answered with its status while the server goes on, the limits (413,
429, 504), failures at start, and a graceful SIGTERM in a real uvicorn process."""

from __future__ import annotations

import inspect
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from starlette.testclient import TestClient

from kerasbert import ConfigError, train
from kerasbert.cli import build_parser, main
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.log import logger
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export
from kerasbert.serving.server import make_app, serve

pytestmark = pytest.mark.slow  # trains two small models

TEXTS = ["张伟去年加入了华为公司", "李娜在北京的阿里巴巴工作。Hello, World! 2024", "这家餐厅的菜非常好吃", "王",
         "听说赵敏在腾讯公司上班", "我和刘洋昨天去了上海", "房间很脏，真的让人失望", "清华大学位于北京",
         "下个月陈杰要去深圳出差", "", "中国银行在杭州开了一家分店，周末人比较多，排队等了半小时"]
PREDICT = "/v1/models/ner:predict"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """``{"ner": (run, export), "cls": (run, export)}``: a CRF tagger and a classifier, trained briefly."""
    data = write_demo_data(str(tmp_path_factory.mktemp("data")), n_train=400, n_dev=16, n_test=16)
    out = {}
    for task, options in (("ner", {"crf": True}), ("cls", {})):
        run = str(tmp_path_factory.mktemp(f"run-{task}"))
        train(task, data[f"{task}_train"], run, dev=data[f"{task}_dev"], vocab=data["vocab"], epochs=3,
              batch_size=16, lr=2e-3, maxlen=24, verbose=0, **options)
        folder = os.path.join(str(tmp_path_factory.mktemp(f"export-{task}")), "ner" if task == "ner" else "export")
        export(run, folder)
        out[task] = (run, folder)
    return out


@pytest.fixture(scope="module")
def served(runs):
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

    return {task: open_export(folder) for task, (_, folder) in runs.items()}


@pytest.fixture(scope="module")
def client(served):
    with TestClient(make_app(served["ner"], "ner")) as client:
        yield client


def expected(export, texts: list[str]) -> list[dict]:
    """What the server answers: `Export.predict`'s rows, one text at a time, without the text."""
    return [{key: value for key, value in export.predict([{"text": text}])[0].items() if key != "text"}
            for text in texts]


class Stub:
    """A model the test holds: each row's label is its text reversed, answered once ``gate`` is open."""

    def __init__(self, pairs: bool = False) -> None:
        self.info = {"task": "cls", "labels": ["x"], "pairs": pairs}
        self.gate, self.error, self.batches = threading.Event(), None, []
        self.gate.set()

    def predict(self, rows, batch_size=32):
        self.batches.append(list(rows))
        assert self.gate.wait(20)
        if self.error:
            raise self.error
        return [{**row, "label": row["text"][::-1]} for row in rows]


def _later(function, *args, **kwargs):
    """Run ``function`` in a thread now; returns the thread's future."""
    pool = ThreadPoolExecutor(1)
    future = pool.submit(function, *args, **kwargs)
    pool.shutdown(wait=False)
    return future


# ------------------------------------------------------------------------------------------- answers
def test_status_healthz_and_unknown_models(client):
    status = {"model_version_status": [{"version": "1", "state": "AVAILABLE",
                                        "status": {"error_code": "OK", "error_message": ""}}]}
    assert client.get("/v1/models/ner").json() == client.get("/v1/models/ner/versions/1").json() == status
    assert (client.get("/healthz").status_code, client.get("/healthz").text) == (200, "ok")
    for method, path, code, message in (("GET", "/v1/models/bert", 404, "model: expected 'ner', found 'bert'"),
                                        ("POST", "/v1/models/bert:predict", 404, "found 'bert'"),
                                        ("POST", "/v1/models/ner/versions/2:predict", 404, "version: expected '1'"),
                                        ("GET", PREDICT, 405, "expected POST, found GET"),
                                        ("GET", "/v2/nothing", 404, "Not Found")):
        answer = client.request(method, path, json={"instances": ["王"]})
        assert (answer.status_code, answer.headers["content-type"]) == (code, "application/json"), path
        assert message in answer.json()["error"]


def test_predictions_are_the_exports_rows(client, served):
    want = expected(served["ner"], TEXTS)
    assert any(row["entities"] for row in want)
    for instances in (TEXTS, TEXTS[:1], [{"text": text} for text in TEXTS]):
        answer = client.post(PREDICT, json={"instances": instances})
        assert answer.status_code == 200 and answer.json() == {"predictions": want[:len(instances)]}
    assert client.post("/v1/models/ner/versions/1:predict", json={"instances": TEXTS[:2]}).json()["predictions"] \
        == want[:2]
    assert client.post(PREDICT, json={"instances": []}).json() == {"predictions": []}
    assert client.post(PREDICT, json={"instances": [""]}).json() == {"predictions": [{"entities": []}]}
    long = "张伟去年加入了华为公司" * 10_000  # 110,000 characters; the model reads its first maxlen pieces
    assert client.post(PREDICT, json={"instances": [long]}).json()["predictions"] == expected(served["ner"], [long])


@pytest.mark.parametrize("task", ["ner", "cls"])
def test_concurrent_clients_get_the_answers_of_single_requests(served, task):
    requests = [TEXTS[i % len(TEXTS):i % len(TEXTS) + 1 + i % 3] for i in range(96)]  # 1 to 3 texts each
    batches = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: batches.extend(int(size) for size in re.findall(r"^batch of (\d+)",
                                                                                   record.getMessage()))
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        with TestClient(make_app(served[task], task, max_wait_ms=20)) as client:
            path = f"/v1/models/{task}:predict"
            single = {text: client.post(path, json={"instances": [text]}).json()["predictions"][0] for text in TEXTS}
            batches.clear()
            with ThreadPoolExecutor(16) as pool:  # 16 clients, 6 requests each
                answers = list(pool.map(lambda texts: client.post(path, json={"instances": texts}), requests))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert single == dict(zip(TEXTS, expected(served[task], TEXTS), strict=True))
    assert max(batches) > 3 and sum(batches) == sum(map(len, requests))  # requests shared batches
    for texts, answer in zip(requests, answers, strict=True):
        assert answer.status_code == 200
        for text, got in zip(texts, answer.json()["predictions"], strict=True):
            if task == "ner":
                assert got == single[text]
                continue
            # a batch's shape moves a float sum by an ulp, which can move the 6th decimal of a probability
            assert got["label"] == single[text]["label"] and got["probabilities"].keys() == single[text][
                "probabilities"].keys()
            np.testing.assert_allclose(list(got["probabilities"].values()),
                                       list(single[text]["probabilities"].values()), atol=2e-6)


# ------------------------------------------------------------------------------------------- bad requests
BAD = [(b"\xff\xfe{}", 400, "body: expected UTF-8, found 'utf-8' codec can't decode byte 0xff"),
       (b'{"instances": ["', 400, "body: expected JSON, found JSONDecodeError"),
       (b"[]", 400, 'body: expected an object with "instances", found a list []'),
       (b'{"inputs": ["a"]}', 400, 'The columnar "inputs" form is not served'),
       (b'{"instances": "abc"}', 400, 'instances: expected a list, found a string "abc"'),
       (b'{"instances": ["a", 3]}', 400, 'instances[1]: expected a string or {"text": ...}, found a number 3'),
       (b'{"instances": [null]}', 400, "instances[0]: expected a string or {\"text\": ...}, found null"),
       (b'{"instances": [{"txt": "a"}]}', 400, "found an object with keys ['txt']"),
       (b'{"instances": [{"text": "a", "text_b": "b"}]}', 400, "found an object with keys ['text', 'text_b']"),
       (b'{"instances": [{"text": ["a"]}]}', 400, 'instances[0].text: expected a string, found a list ["a"]'),
       (b'{"instances": ["\\ud800"]}', 400, "instances[0].text: expected Unicode text, found a lone surrogate"),
       (b'{"instances": [' + b'"a",' * 256 + b'"a"]}', 413, "instances: expected at most 256, found 257"),
       (b'{"instances": ["' + "王".encode() * 333_334 + b'"]}', 413,
        "body: expected a body of at most 1000000 bytes, found Content-Length 1000021")]


@pytest.mark.parametrize("body,code,message", BAD, ids=[f"{code}-{i}" for i, (_, code, _) in enumerate(BAD)])
def test_a_bad_request_gets_its_status_and_the_server_goes_on(client, served, body, code, message):
    answer = client.post(PREDICT, content=body, headers={"content-type": "application/json"})
    assert (answer.status_code, answer.headers["content-type"]) == (code, "application/json")
    assert message in answer.json()["error"], answer.json()
    assert client.post(PREDICT, json={"instances": TEXTS[:1]}).json()["predictions"] == expected(served["ner"],
                                                                                                  TEXTS[:1])


def test_a_big_body_without_a_length_is_cut_off_as_it_is_read(client):
    answer = client.post(PREDICT, content=iter([b'{"instances": ["', b"x" * 600_000, b"x" * 600_000, b'"]}']))
    assert answer.status_code == 413 and answer.json() == {
        "error": "body: expected a body of at most 1000000 bytes, found more"}
    assert client.post(PREDICT, json={"instances": ["王"]}).status_code == 200


def test_pairs_are_two_texts(served):
    stub = Stub(pairs=True)
    with TestClient(make_app(stub, "pairs")) as client:
        answer = client.post("/v1/models/pairs:predict", json={"instances": [{"text": "ab", "text_b": "c"}]})
        assert answer.json() == {"predictions": [{"label": "ba"}]} and stub.batches == [[{"text": "ab", "text_b": "c"}]]
        answer = client.post("/v1/models/pairs:predict", json={"instances": ["ab"]})
        assert (answer.status_code, answer.json()) == (400, {"error": 'instances[0]: expected {"text": ..., '
                                                                      '"text_b": ...}, found a string "ab"'})


# ------------------------------------------------------------------------------------------- limits
def test_a_full_queue_answers_429_with_the_real_model(served):
    app = make_app(served["ner"], "ner", max_queue=4, max_instances=4, max_wait_ms=4000)
    with TestClient(app) as client:
        first = _later(client.post, PREDICT, json={"instances": TEXTS[:4]})  # waits 4 s for more instances
        time.sleep(1.5)
        answer = client.post(PREDICT, json={"instances": TEXTS[4:5]})
        assert (answer.status_code, answer.json()) == (429, {"error": "queue: expected room for 1 instances, found "
                                                                      "it full (4). Retry later"})
        assert first.result(timeout=30).json()["predictions"] == expected(served["ner"], TEXTS[:4])
        assert client.post(PREDICT, json={"instances": TEXTS[4:5]}).json()["predictions"] == expected(
            served["ner"], TEXTS[4:5])


def test_a_busy_model_answers_429_then_504_and_a_failing_one_500():
    stub = Stub()
    with TestClient(make_app(stub, "m", max_batch=2, max_queue=2, max_instances=2, max_wait_ms=0,
                             timeout_s=1.5)) as client:
        stub.gate.clear()  # the model holds the first batch
        first = _later(client.post, "/v1/models/m:predict", json={"instances": ["a", "b"]})
        while not stub.batches:
            time.sleep(0.01)
        second = _later(client.post, "/v1/models/m:predict", json={"instances": ["c", "d"]})  # fills the queue
        time.sleep(0.5)
        assert client.post("/v1/models/m:predict", json={"instances": ["e"]}).status_code == 429
        assert [answer.result(timeout=10).status_code for answer in (first, second)] == [504, 504]
        assert "expected an answer within 1.5 s" in first.result().json()["error"]
        stub.gate.set()  # the worker now drops the timed-out instances; until it has, the queue is still full
        deadline, answer = time.monotonic() + 10, None
        while answer is None or (answer.status_code == 429 and time.monotonic() < deadline):
            answer = client.post("/v1/models/m:predict", json={"instances": ["fg"]})
            time.sleep(0.05 if answer.status_code == 429 else 0)
        assert answer.json() == {"predictions": [{"label": "gf"}]}
        stub.error = ValueError("no")
        answer = client.post("/v1/models/m:predict", json={"instances": ["h"]})
        assert (answer.status_code, answer.json()) == (500, {"error": "predict: the model failed: ValueError: no"})
        stub.error = None
        assert client.post("/v1/models/m:predict", json={"instances": ["ij"]}).json()["predictions"] == [
            {"label": "ji"}]
    assert ["c", "d"] not in [[row["text"] for row in batch] for batch in stub.batches]  # timed out while waiting


# ------------------------------------------------------------------------------------------- start
def test_bad_exports_and_settings_fail_at_start(runs, tmp_path):
    with pytest.raises(ConfigError, match="expected an export folder .* or a run folder .*, found no such folder"):
        serve(str(tmp_path / "nothing"))
    with pytest.raises(ConfigError, match="found neither"):
        serve(str(tmp_path))
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "kerasbert-export.json").write_text(open(os.path.join(runs["ner"][1], "kerasbert-export.json")).read())
    with pytest.raises(ConfigError, match="expected a readable SavedModel"):
        serve(str(cut), port=0)
    with pytest.raises(ConfigError, match="max_instances: expected at most max_queue"):
        serve(runs["ner"][1], max_queue=8)
    with pytest.raises(ConfigError, match=r"max_wait_ms: expected a finite number >= 0, found -1"):
        make_app(Stub(), "m", max_wait_ms=-1)
    with pytest.raises(ConfigError, match="name: expected letters, digits"):
        serve(runs["ner"][1], name="a/b")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(ConfigError, match="expected an address to listen on"):
            serve(runs["ner"][1], port=busy.getsockname()[1])
    assert main(["serve", str(tmp_path / "nothing")]) == 2


def test_the_cli_defaults_are_serves():
    args = build_parser().parse_args(["serve", "x"])
    defaults = {name: p.default for name, p in inspect.signature(serve).parameters.items() if name != "path"}
    assert {name: getattr(args, name) for name in defaults} == defaults


def test_sigterm_lets_the_request_in_flight_finish(runs, served):
    """``kerasbert serve RUN`` in a real process: exported to a temporary folder, served, stopped by SIGTERM."""
    run, _ = runs["ner"]
    process = subprocess.Popen([sys.executable, "-m", "kerasbert", "serve", run, "--port", "0", "--max-wait-ms",
                                "2500", "--name", "ner"], stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        lines = []
        while " at http" not in (lines or [""])[-1]:  # the line that names the URL
            lines.append(process.stderr.readline())
            assert lines[-1], "the server ended before serving:\n" + "".join(lines)
        url = re.search(r" at (http://\S+)$", lines[-1]).group(1)
        folder = re.search(r"into (\S+) for serving", "".join(lines)).group(1)
        assert os.path.isdir(folder)
        import httpx

        answer = _later(httpx.post, url, json={"instances": TEXTS[:2]}, timeout=30)
        time.sleep(1)  # the request waits in the queue (--max-wait-ms 2500) when SIGTERM comes
        process.send_signal(signal.SIGTERM)
        assert answer.result(timeout=30).json() == {"predictions": expected(served["ner"], TEXTS[:2])}
        assert process.wait(timeout=30) == 0, process.stderr.read()
        assert not os.path.exists(os.path.dirname(folder))
    finally:
        if process.poll() is None:
            process.kill()
        process.stderr.close()



def test_sigterm_with_slow_clients_ends_within_the_grace(runs):
    """``kerasbert serve EXPORT`` with a client sending its body a byte a second and one holding half a header:
    SIGTERM ends the process within ``--grace-s``, the slow body is answered 503 in JSON, the half header closed."""
    from test_server_connections import PREDICT, parse, read_to_close

    grace = 3
    process = subprocess.Popen([sys.executable, "-m", "kerasbert", "serve", runs["ner"][1], "--port", "0", "--name",
                                "m", "--grace-s", str(grace), "--body-timeout-s", "60", "--header-timeout-s", "60"],
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        lines = []
        while " at http" not in (lines or [""])[-1]:
            lines.append(process.stderr.readline())
            assert lines[-1], "the server ended before serving:\n" + "".join(lines)
        port = int(re.search(r":(\d+)/v1/models/", lines[-1]).group(1))
        body = b'{"instances": ["' + "张伟".encode() * 20 + b'"]}'
        slow_body = socket.create_connection(("127.0.0.1", port), timeout=30)
        slow_body.sendall(PREDICT + b"Content-Length: %d\r\n\r\n" % len(body))

        def trickle():  # a byte a second, until the server closes the connection
            for i in range(len(body)):
                try:
                    slow_body.sendall(body[i:i + 1])
                except OSError:
                    return
                time.sleep(1)

        threading.Thread(target=trickle, daemon=True).start()
        slow_header = socket.create_connection(("127.0.0.1", port), timeout=30)
        slow_header.sendall(PREDICT)
        time.sleep(1.5)
        start = time.monotonic()
        process.send_signal(signal.SIGTERM)
        answers = [read_to_close(sock) for sock in (slow_body, slow_header)]
        assert process.wait(timeout=30) == 0
        took = time.monotonic() - start
        log = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
        process.stderr.close()
    # well before the 60 s the slow clients could hold it (the grace plus the process's own exit, which a loaded
    # machine stretches): the server ended them at the grace rather than waiting for them
    assert took < 30, took
    status, headers, answer = parse(answers[0])
    assert (status, headers["content-type"]) == (503, "application/json")
    assert answer == (b'{"error": "request: expected an answer within the shutdown grace of 3 s, found the server '
                      b'stopping first. Retry"}')
    assert answers[1] == b""
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log

def test_connections_of_the_served_socket_have_nagle_off():
    """Answers on a kept-alive connection go out at once: asyncio sets TCP_NODELAY only on a TCP-protocol socket."""
    import asyncio

    from kerasbert.serving.server import _bind

    async def accepted_nodelay() -> int:
        accepted = asyncio.get_running_loop().create_future()

        class Protocol(asyncio.Protocol):
            def connection_made(self, transport):
                accepted.set_result(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP,
                                                                                  socket.TCP_NODELAY))

        with _bind("127.0.0.1", 0) as sock:
            sock.listen()
            server = await asyncio.get_running_loop().create_server(Protocol, sock=sock)
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            value = await asyncio.wait_for(accepted, 10)
            writer.close()
            server.close()
            return value

    assert asyncio.run(accepted_nodelay()) != 0
