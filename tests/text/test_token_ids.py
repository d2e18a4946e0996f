"""Token ids a user passes are integers: a bool is refused, wherever it sits."""

from __future__ import annotations

import numpy as np
import pytest

from kerasbert.errors import DataError
from kerasbert.text.token_ids import refuse_bools
from kerasbert.text.tokenizer import Tokenizer


@pytest.mark.parametrize("ids", [[2, True, 3], [[2, 5], [np.True_]], np.array([True, False]), (2, [3, [False]])],
                         ids=["list", "nested-numpy-bool", "bool-array", "tuple"])
def test_a_bool_among_ids_is_refused(ids):
    with pytest.raises(DataError, match=r"^input 0: expected integer token ids, found the bool (True|False)\. "):
        refuse_bools(ids, "input 0")


def test_integer_ids_pass_and_decode_refuses_a_bool():
    refuse_bools([[2, 5], np.array([3, 4]), (np.int64(7),)], "inputs")
    tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])})
    assert tokenizer.decode([2, 4, 3]) == "a" and tokenizer.id_to_token(4) == "a"
    with pytest.raises(DataError, match="ids: expected integer token ids, found the bool True"):
        tokenizer.decode([2, True, 3])
    with pytest.raises(DataError, match="the bool False"):
        tokenizer.id_to_token(False)
