"""kerasbert.compat.snippets' small helpers give bert4keras 0.11.5's results on the same strings and arrays (one
oracle run); the decorators and parallel_apply_generator as bert4keras defines them."""

from __future__ import annotations

import compat_calls
import numpy as np
import pytest

from kerasbert import ConfigError, DataError
from kerasbert.compat import snippets

RNG = np.random.default_rng(1)
ARRAYS = {
    "logits": RNG.normal(size=(3, 5)) * 4,
    "matrix": RNG.normal(size=(4, 6)),
    "cube": RNG.normal(size=(2, 4, 3)).astype("float32"),
}
TEXTS = ["ＡＢＣ　１２３，全角！～", "Héllo WÖRLD Ångström ﬁ", "北京大学的学生", "", "ab\u0301c\u3000ｄ"]


def s(name, args, **kwargs):
    return [name, "snippets", name.split(":")[0], args, kwargs]


CALLS = [
    s("strQ2B", [""]),  # bert4keras's strQ2B calls Python 2's unichr: on Python 3 only "" gets through
    *[s(f"lowercase_and_normalize:{i}", [t]) for i, t in enumerate(TEXTS)],
    s("string_matching", ["北京大学的学生", ["上海", "大.的"]]), s("string_matching:no", ["北京", ["^京", "上"]]),
    s("convert_to_unicode", [{"bytes": "中文 text"}]), s("convert_to_unicode:str", ["中文"]),
    s("convert_to_str", [{"bytes": "中文"}], encoding="utf-8"), s("convert_to_str:str", ["abc"]),
    s("is_string", ["a"]), s("is_string:bytes", [{"bytes": "a"}]), s("is_string:int", [3]),
    s("is_one_of", [1, [2, 3]]),
    s("softmax", [{"array": "logits"}]), s("softmax:axis0", [{"array": "logits"}], axis=0),
    s("longest_common_substring", ["我们去北京大学玩", "他们在北京大学里"]),
    s("longest_common_substring:none", ["abc", "xyz"]),
    s("longest_common_substring:lists", [[1, 2, 3, 2, 3], [2, 3, 9, 2, 3]]),
    s("longest_common_subsequence", ["我们去北京大学玩", "他们在北京的大学里玩"]),
    s("longest_common_subsequence:ties", ["abcd", "acbd"]),
    s("longest_common_subsequence:repeats", ["aabbaab", "ababbba"]),
    s("longest_common_subsequence:none", ["abc", "xyz"]),
    s("orthogonally_resize", [{"array": "matrix"}, [8, 12]]),
    s("orthogonally_resize:shrink", [{"array": "matrix"}, [3, 10]], window=2),
    s("orthogonally_resize:window", [{"array": "cube"}, [2, 6, 3]], window=4),
    s("orthogonally_resize:same", [{"array": "cube"}, [2, 4, 3]]),
]


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return compat_calls.run_oracle(CALLS, ARRAYS, str(tmp_path_factory.mktemp("oracle")))


@pytest.mark.parametrize("call", CALLS, ids=[call[0] for call in CALLS])
def test_equals_bert4keras(out, call):
    compat_calls.check(call, ARRAYS, out, 1e-12)


def test_strq2b_by_hand():
    """bert4keras's rule: U+3000 -> " ", U+FF01..U+FF5E -> minus 0xFEE0, everything else unchanged."""
    assert snippets.strQ2B(TEXTS[0]) == "ABC 123,全角!~"
    assert snippets.strQ2B(TEXTS[4]) == "ab\u0301c d"
    assert snippets.strQ2B("".join(map(chr, range(0xFF01, 0xFF5F)))) == "".join(map(chr, range(0x21, 0x7F)))
    assert snippets.strQ2B("\uff00\uff5f。") == "\uff00\uff5f。"  # outside the block, and U+3002


def test_module_flags():
    assert snippets.is_py2 is False and snippets.uniout is None
    from kerasbert.compat.snippets import uniout  # the example's import line

    assert uniout is None


def test_insert_and_delete_arguments():
    class Base:
        def __init__(self, units=1, **kwargs):
            self.units, self.rest = units, kwargs

    class Child(Base):
        @snippets.insert_arguments(heads=2, scale=True)
        @snippets.delete_arguments("units")
        def __init__(self, **kwargs):
            super().__init__(units=8, **kwargs)

    child = Child(heads=4, other=1)
    assert (child.heads, child.scale, child.units, child.rest) == (4, True, 8, {"other": 1})
    with pytest.raises(TypeError, match="Child got an unexpected keyword argument 'units'"):
        Child(units=3)


def test_orthogonally_resize_errors():
    with pytest.raises(ConfigError, match="one per axis"):
        snippets.orthogonally_resize(np.ones((2, 2)), (4,))
    with pytest.raises(ConfigError, match="window"):
        snippets.orthogonally_resize(np.ones((3, 2)), (6, 2))


@pytest.mark.parametrize("dummy", [True, False])
def test_parallel_apply_generator(dummy):
    pairs = list(snippets.parallel_apply_generator(lambda x: x * 10, range(7), 2, 3, dummy=dummy))
    assert sorted(pairs) == [(i, i * 10) for i in range(7)]
    with pytest.raises(DataError, match="workers >= 1"):
        snippets.parallel_apply_generator(abs, [1], 0, 1)
