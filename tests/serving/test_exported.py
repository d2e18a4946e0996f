"""`kerasbert predict --model` on OpenVINO and ONNX exports (`kerasbert.serving.exported`): a fresh process answers
as the export does in this one and never imports TensorFlow or Keras, a missing folder is refused at once, and an
export whose labels are not its model's is refused before any prediction."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from kerasbert.errors import ConfigError
from kerasbert.serving.exported import open_export, predict_export

from bad_input_kit import Shared

pytestmark = pytest.mark.slow  # trains a small model, and starts processes

TEXTS = ["这家餐厅的菜非常好吃", "房间很脏，真的让人失望"]
CLI = ("import json, sys\n"
       "from kerasbert.cli import main\n"
       "code = main(sys.argv[1:])\n"
       "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras'))\n"
       "print(json.dumps({'code': code, 'loaded': loaded[:5]}))\n")


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, str]:
    from kerasbert.serving.export import export

    shared = Shared(tmp_path_factory.mktemp("shared"))
    onnx = str(shared.folder / "onnx")
    export(str(shared.trained), onnx, "onnx")
    return {"openvino": str(shared.exported), "onnx": onnx}


def run_cli(*args: str) -> tuple[list[str], dict, str]:
    """``kerasbert ARGS`` in a fresh process: its output lines, then its exit status and the modules it loaded."""
    done = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    return lines[:-1], json.loads(lines[-1]), done.stderr


@pytest.mark.parametrize("fmt", ["openvino", "onnx"])
def test_predict_model_never_imports_tensorflow(exports, fmt, tmp_path):
    texts = [arg for text in TEXTS for arg in ("--text", text)]
    lines, status, err = run_cli("predict", "--model", exports[fmt], *texts)
    assert status == {"code": 0, "loaded": []}, err
    assert [json.loads(line) for line in lines] == predict_export(exports[fmt], TEXTS)
    out = tmp_path / "new" / "predictions.jsonl"  # a folder that does not exist yet is made
    lines, status, err = run_cli("predict", "--model", exports[fmt], "--text", TEXTS[0], "--output", str(out))
    assert status == {"code": 0, "loaded": []} and lines == [f"1 predictions written to {out}"], err
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == predict_export(
        exports[fmt], TEXTS[:1])


def test_a_missing_export_is_refused_without_tensorflow(tmp_path):
    lines, status, err = run_cli("predict", "--model", str(tmp_path / "nothing"), "--text", "a")
    assert (lines, status) == ([], {"code": 2, "loaded": []})
    assert err == (f"kerasbert predict: error: {tmp_path / 'nothing'}: expected an export folder with "
                   "kerasbert-export.json (`kerasbert export RUN OUT`), found no such folder\n")


@pytest.mark.parametrize("change,message", [
    ({"labels": ["neg"]}, "labels: expected 2 labels, one per score of the model, found 1: ['neg']"),
    ({"labels": ["a", "b", "c", "d"]}, "labels: expected 2 labels, one per score of the model, found 4"),
])
def test_an_export_whose_labels_are_not_its_models_is_refused(exports, tmp_path, change, message):
    for fmt, folder in exports.items():
        changed = tmp_path / fmt
        shutil.copytree(folder, changed)
        info = json.loads((changed / "kerasbert-export.json").read_text(encoding="utf-8"))
        (changed / "kerasbert-export.json").write_text(json.dumps({**info, **change}), encoding="utf-8")
        with pytest.raises(ConfigError, match="^" + str(changed / "kerasbert-export.json").replace("\\", "\\\\")):
            open_export(changed)
        with pytest.raises(ConfigError) as caught:
            predict_export(changed, TEXTS)
        assert message in str(caught.value) and str(caught.value).endswith("export the run again")


SERVE = ("import json, os, signal, sys, threading, time, urllib.request\n"
         "from kerasbert.cli import main\n"
         "answers = []\n"
         "def stop_when_served():\n"
         "    for _ in range(1200):\n"
         "        try:\n"
         "            answers.append(json.loads(urllib.request.urlopen(sys.argv[1], data=sys.argv[2].encode(),\n"
         "                                                             timeout=5).read()))\n"
         "            break\n"
         "        except OSError:\n"
         "            time.sleep(0.05)\n"
         "    os.kill(os.getpid(), signal.SIGTERM)\n"
         "threading.Thread(target=stop_when_served, daemon=True).start()\n"
         "code = main(sys.argv[3:])\n"
         "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras'))\n"
         "print(json.dumps({'code': code, 'loaded': loaded[:5], 'answers': answers}))\n")


@pytest.mark.parametrize("fmt", ["openvino", "onnx"])
def test_serve_never_imports_tensorflow(exports, fmt):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url, body = f"http://127.0.0.1:{port}/v1/models/m:predict", json.dumps({"instances": TEXTS[:1]})
    done = subprocess.run([sys.executable, "-c", SERVE, url, body, "serve", exports[fmt], "--port", str(port),
                           "--name", "m"], capture_output=True, text=True, timeout=120)
    want = [{key: value for key, value in row.items() if key != "text"} for row in predict_export(exports[fmt],
                                                                                                   TEXTS[:1])]
    assert json.loads(done.stdout.splitlines()[-1]) == {"code": 0, "loaded": [], "answers": [{"predictions": want}]}, \
        done.stderr


def test_every_option_of_predict_and_serve_has_help():
    from kerasbert.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    for name in ("predict", "serve"):
        missing = [action.option_strings or action.dest for action in commands[name]._actions
                   if action.help is None]
        assert missing == [], name
