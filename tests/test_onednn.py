"""kerasbert turns TensorFlow's oneDNN kernels on when it is imported first, on x86-64, unless the user chose."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

from kerasbert.onednn import ENV, prefer_onednn


def test_set_only_before_tensorflow_on_x86_64_and_never_over_the_users_value():
    environ: dict[str, str] = {}
    assert prefer_onednn(environ, modules={"keras_hub"}, machine="x86_64") and environ == {ENV: "1"}
    assert prefer_onednn({}, modules={}, machine="AMD64")
    for environ, modules, machine in (({ENV: "0"}, {}, "x86_64"),          # the user's choice stays
                                      ({}, {"tensorflow"}, "x86_64"),     # too late: TF read it at import
                                      ({}, {}, "aarch64")):               # not measured there: TF decides
        before = dict(environ)
        assert not prefer_onednn(environ, modules, machine) and environ == before


def test_importing_kerasbert_first_turns_onednn_on_in_tensorflow():
    code = ("import os, kerasbert\nfrom tensorflow.python.util import _pywrap_util_port\n"
            f"print(os.environ.get({ENV!r}), _pywrap_util_port.IsMklEnabled())")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    switch, enabled = done.stdout.split()[-2:]
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert (switch, enabled) == ("1", "True")
    else:
        assert switch == "None"
