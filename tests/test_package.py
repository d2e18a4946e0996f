"""The public names of the package, as the README uses them."""

from __future__ import annotations

import io

import kerasbert


def test_public_api():
    for name in kerasbert.__all__:
        assert getattr(kerasbert, name) is not None
    model = kerasbert.heads.cls(kerasbert.build_transformer_model("tiny", verbose=False), 2)
    out = io.StringIO()
    info = kerasbert.summary(model, format="markdown", print_fn=lambda line, **_: out.write(line + "\n"))
    assert isinstance(info, kerasbert.Summary)
    assert info.params == 23426 == model.count_params()
    assert "| CLS-Dense (Dense) | (None, 2) | 66 | H·C+C = 32·2+2 |" in out.getvalue()
    assert kerasbert.summary.annotate is kerasbert.annotate  # the spelling works too
