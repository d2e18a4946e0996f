"""kerasbert.compat.snippets.WebServing answers as bert4keras's (bottle) WebServing does, read from its source:
``json.dumps({"code", "desc", "data"}, ensure_ascii=False)`` with status 200; code 1 for a missing required
argument (and here for one that fails its conversion), code 2 with the message where the function raises."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from starlette.testclient import TestClient

from kerasbert import ConfigError
from kerasbert.compat.snippets import WebServing


def synonyms(text, n=2, k=1):
    """A stand-in for the example's gen_synonyms: bert4keras calls it with the converted arguments as keywords."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [text * i for i in range(n)][:k] + ["同义句"]


ARGUMENTS = {"text": (None, True), "n": (int, False), "k": (int, False)}


def bert4keras_body(code, desc, data=None):
    """The text bert4keras's wraps() returns: its `outputs` dict dumped with ensure_ascii=False."""
    return json.dumps({"code": code, "desc": desc, "data": {} if data is None else data}, ensure_ascii=False)


@pytest.fixture(scope="module")
def client():
    web = WebServing(port=8864)
    web.route("/gen_synonyms", synonyms, ARGUMENTS)
    web.route("/post", synonyms, ARGUMENTS, method="POST")
    return TestClient(web.app)


@pytest.mark.parametrize("params, expected", [
    ({"text": "苹果"}, bert4keras_body(0, "succeeded", [""] + ["同义句"])),
    ({"text": "苹果", "n": "3", "k": "2"}, bert4keras_body(0, "succeeded", ["", "苹果", "同义句"])),
    ({"text": ""}, bert4keras_body(0, "succeeded", ["", "同义句"])),  # an empty value is given, as in bottle
    ({"n": "3"}, bert4keras_body(1, 'lack of "text" argument')),
    ({"text": "a", "n": "-1"}, bert4keras_body(2, "n must be >= 0, got -1")),
])
def test_get_answers_as_bert4keras(client, params, expected):
    response = client.get("/gen_synonyms", params=params)
    assert response.status_code == 200 and response.text == expected
    assert response.headers["content-type"].startswith("application/json")


def test_wrong_type_is_one_clear_answer(client):
    answer = client.get("/gen_synonyms", params={"text": "a", "n": "three"}).json()
    assert answer["code"] == 1 and answer["data"] == {}
    assert answer["desc"].startswith("wrong \"n\" argument: expected int, found 'three'")


def test_post_reads_the_form(client):
    response = client.post("/post", data={"text": "苹果", "n": "2", "k": "5"})
    assert response.text == bert4keras_body(0, "succeeded", ["", "苹果", "同义句"])
    assert client.post("/post", data={"n": "2"}).text == bert4keras_body(1, 'lack of "text" argument')
    answer = client.post("/post", json={"text": "a"}).json()
    assert answer["code"] == 1 and "application/x-www-form-urlencoded" in answer["desc"]
    assert client.get("/post", params={"text": "a"}).status_code == 405  # a route serves its one method


def test_unserializable_data_is_code_2():
    web = WebServing()
    web.route("/set", lambda: {1, 2}, {})
    answer = TestClient(web.app).get("/set").json()
    assert answer["code"] == 2 and "not JSON serializable" in answer["desc"]


def test_bad_routes_and_ports():
    web = WebServing()
    with pytest.raises(ConfigError, match="arguments"):
        web.route("/x", synonyms, {"text": None})
    with pytest.raises(ConfigError, match="method"):
        web.route("/x", synonyms, ARGUMENTS, method="PUT")
    with pytest.raises(ConfigError, match="port"):
        WebServing(port=70000)


def test_start_serves_over_http():
    web = WebServing(host="127.0.0.1", port=0)
    web.route("/gen_synonyms", synonyms, ARGUMENTS)
    thread = threading.Thread(target=web.start, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while (web.uvicorn is None or not web.uvicorn.started) and time.time() < deadline:
        time.sleep(0.05)
    try:
        host, port = web.address
        response = httpx.get(f"http://{host}:{port}/gen_synonyms", params={"text": "你好", "n": "2"}, timeout=10)
        assert response.text == bert4keras_body(0, "succeeded", ["", "同义句"])
    finally:
        web.uvicorn.should_exit = True
        thread.join(timeout=30)
    assert not thread.is_alive()
