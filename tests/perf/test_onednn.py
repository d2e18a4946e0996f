"""kerasbert turns TensorFlow's oneDNN kernels on when it is imported first, on x86-64, unless the user chose."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

from kerasbert.perf.onednn import ENV, prefer_onednn


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


def test_bf16_speed_is_measured_once_and_pays_from_1_25_x():
    import keras

    from kerasbert.perf.onednn import HALF_FASTER, bf16_pays, bf16_speedup

    assert bf16_pays(speedup=HALF_FASTER) and not bf16_pays(speedup=HALF_FASTER - 0.01)
    bf16_speedup.cache_clear()
    measured = bf16_speedup((256, 256, 256), rounds=3)
    if keras.config.backend() != "tensorflow":
        assert measured is None
        return
    # measured here: 0.55 on an Intel Xeon without AMX, 0.9 with AVX2, 1.9 on an AMD Zen 4, 4.0 with AMX
    assert isinstance(measured, float) and 0.05 < measured < 20
    assert bf16_speedup((256, 256, 256), rounds=3) == measured and bf16_speedup.cache_info().hits == 1


def test_bf16_by_onednn_needs_its_cpu_flags_and_a_traced_graph_outside_xla():
    import keras
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_util_port

    from kerasbert.perf.block_variants import fuses_bf16_activation
    from kerasbert.perf.onednn import cpu_flags
    from kerasbert.perf.variants import forced

    if os.path.exists("/proc/cpuinfo"):
        assert ("avx2" in cpu_flags()) == ("avx2" in open("/proc/cpuinfo").read())
    on = keras.config.backend() == "tensorflow" and _pywrap_util_port.IsMklEnabled()
    assert not fuses_bf16_activation({"avx512f"})  # eager: no graph for grappler to fuse
    seen = {}

    def trace(key):
        seen[key] = [fuses_bf16_activation(flags) for flags in ({"avx512f"}, {"avx_ne_convert"}, {"avx2"})]
        return tf.constant(0.0)

    with forced({"dense_2d": True}):
        tf.function(lambda: trace("graph"))()
        tf.function(lambda: trace("xla"), jit_compile=True)()
    with forced({"dense_2d": False}):  # 3-D projections: the GELU cannot join the matmul's kernel
        tf.function(lambda: trace("3-D"))()
    fused = on and not tf.config.list_logical_devices("GPU")
    assert seen == {"graph": [fused, fused, False], "xla": [False, False, False], "3-D": [False, False, False]}
