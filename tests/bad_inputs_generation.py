"""Bad inputs of language models, generation and the seq2seq task: rows of the catalogue in
``tests/test_bad_inputs.py``."""

from __future__ import annotations

import functools
import json

from kerasbert.errors import DataError, ModelError

from bad_input_kit import Case, cls_data, train_call, train_cli

SOURCE = [2, 5, 6, 3]  # [CLS] two pieces [SEP]


@functools.cache
def _unilm():
    from kerasbert import build_transformer_model

    return build_transformer_model("tiny", application="unilm", verbose=False)


def _generate(inputs, *args, **options):
    from kerasbert import generate

    return lambda tmp: generate(_unilm(), inputs, *args, **options)


def _build(**options):
    from kerasbert import build_transformer_model

    return lambda tmp: build_transformer_model("tiny", verbose=False, **options)


def _generate_with_an_encoder(tmp):
    from kerasbert import build_transformer_model, generate

    return generate(build_transformer_model("tiny", verbose=False), [SOURCE])


def _decoder_topk(tmp):
    """bert4keras's decoder asked for more candidates than the vocabulary holds."""
    import numpy as np

    from kerasbert.compat.snippets import AutoRegressiveDecoder

    class Decoder(AutoRegressiveDecoder):
        @AutoRegressiveDecoder.wraps(default_rtype="probas")
        def predict(self, inputs, output_ids, states):
            return np.full((len(output_ids), 20), 1 / 20)

    return Decoder(start_id=1, end_id=2, maxlen=4).beam_search([np.array(SOURCE)], topk=50)


def _seq2seq_export(tmp, _):
    """The information file of a seq2seq export: what a caller reaches before the model loads."""
    from kerasbert.serving.export import EXPORT_INFO

    (tmp / "export").mkdir()
    (tmp / "export" / EXPORT_INFO).write_text(json.dumps({"task": "seq2seq", "labels": [], "pairs": False}))


def _predict_ids(tmp):
    from kerasbert.serving.exported import predict_export

    return predict_export(str(tmp / "export"), ["今天下雨", [2, 45, 3]])


def rows() -> list[Case]:
    seq2seq_data = functools.partial(cls_data, content="今天下雨\t下雨\n明天晴天\t\n")
    return [
        Case("application-that-does-not-exist", lambda tmp, _: None, _build(application="seq2seq"), ModelError,
             ("application", "'encoder' or 'lm' or 'unilm'", "'seq2seq'")),
        Case("application-lm-on-electra", lambda tmp, _: None,
             _build(model="electra", embedding_size=16, application="lm"), ModelError,
             ("application", "model='electra'", "no next-token output")),
        Case("generate-source-longer-than-the-positions", lambda tmp, _: None,
             _generate([[2, *[5] * 60, 3]], max_length=10), ModelError,
             ("input 0", "at most 54 tokens", "64 positions", "max_length 10", "found 62")),
        Case("generate-topk-above-the-vocabulary", lambda tmp, _: None,
             _generate([SOURCE], "sample", topk=500), ModelError, ("topk", "128", "500")),
        Case("generate-an-encoder", lambda tmp, _: None, _generate_with_an_encoder, ModelError,
             ("application", "'encoder'", 'application="unilm"')),
        Case("decoder-topk-above-the-vocabulary", lambda tmp, _: None, _decoder_topk, ModelError,
             ("topk", "20", "topk=50")),
        Case("seq2seq-data-empty-target", lambda tmp, _: seq2seq_data(tmp),
             lambda tmp: train_call(tmp, task="seq2seq"), DataError, ("train.tsv:2", "column 1", "empty"),
             ("out",), lambda tmp: train_cli(tmp, task="seq2seq")),
        Case("seq2seq-export-given-ids", _seq2seq_export, _predict_ids, DataError,
             ("row 1 text", "a string (the export tokenizes it)", "a list [2, 45, 3]")),
    ]
