"""Bad inputs of language models, generation and the seq2seq task: rows of the catalogue in
``tests/test_bad_inputs.py``."""

from __future__ import annotations

import functools
import json

from kerasbert.errors import ConfigError, DataError, ModelError

from bad_input_kit import Case, cls_data, text, train_call, train_cli

SOURCE = [2, 5, 6, 3]  # [CLS] two pieces [SEP]


@functools.cache
def _unilm(family: str = "bert"):
    from kerasbert import build_transformer_model

    return build_transformer_model("tiny", model=family, application="unilm", verbose=False)


def _generate(inputs, *args, family: str = "bert", **options):
    """generate on a tiny unilm model: a BERT's 64 positions, or a RoFormer's rotary ones, which set no length."""
    from kerasbert import generate

    return lambda tmp: generate(_unilm(family), inputs, *args, **options)


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
    from kerasbert.serving.folder import EXPORT_INFO

    (tmp / "export").mkdir()
    (tmp / "export" / EXPORT_INFO).write_text(json.dumps({"task": "seq2seq", "labels": [], "pairs": False}))


def _portable_seq2seq(tmp, _, files: dict | None = None, **changes) -> None:
    """An ONNX seq2seq export's folder as far as is read before its decoder loads: its information file, its
    vocabulary and two stand-in graph files (a tiny BERT's: 2 layers, hidden 32, 64 positions)."""
    from kerasbert.serving.folder import EXPORT_INFO, vocab_checksum

    folder = tmp / "export"
    vocab = text(folder / "vocab.txt", "".join(t + "\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "今", "天"]))
    for name in ("prefill.onnx", "step.onnx"):
        text(folder / name, b"not read")
    text(tmp / "elsewhere.onnx", b"outside the export")
    decoder = {"format": "onnx", "int8": False, "layers": 2, "hidden_size": 32, "vocab_size": 6, "max_length": 64,
               "files": files or {"prefill": "prefill.onnx", "step": "step.onnx"}}
    info = {"format": "onnx", "task": "seq2seq", "labels": [], "pairs": False, "maxlen": 32, "target_maxlen": 8,
            "beams": 2, "lowercase": True, "vocab_sha256": vocab_checksum(str(vocab)), "decoder": decoder, **changes}
    text(folder / EXPORT_INFO, json.dumps(info))


def _saved_seq2seq(tmp, _, **decoder) -> None:
    """A seq2seq SavedModel export's information file, all that is read before the SavedModel loads: a BERT-base's
    search with 4096 beams over 512 positions."""
    from kerasbert.serving.folder import EXPORT_INFO

    info = {"format": "saved_model", "task": "seq2seq", "labels": [], "pairs": False, "maxlen": 512,
            "target_maxlen": 32, "beams": 4096, "decoder": decoder}
    text(tmp / "export" / EXPORT_INFO, json.dumps(info))


def _predict_ids(tmp):
    from kerasbert.serving.exported import predict_export

    return predict_export(str(tmp / "export"), ["今天下雨", [2, 45, 3]])


def _predict_text(tmp):
    from kerasbert.serving.exported import predict_export

    return predict_export(str(tmp / "export"), ["今天"])


def _predict_cli(tmp) -> list[str]:
    return ["predict", "--model", str(tmp / "export"), "--text", "今天"]


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
        Case("generate-input-holding-a-bool", lambda tmp, _: None, _generate([[2, True, 3]], max_length=4), DataError,
             ("generate: input 0", "integer token ids", "the bool True")),
        Case("generate-start-id-for-a-unilm", lambda tmp, _: None, _generate([SOURCE], start_id=2), ModelError,
             ("generate: start_id", "None for a language model or UniLM", "no decoder start", "start_id=2")),
        Case("generate-max_length-more-than-the-positions", lambda tmp, _: None, _generate([SOURCE], max_length=500),
             ModelError, ("max_length", "the model's 64 positions", "max_length 500, more than the positions")),
        Case("generate-max_length-a-million-without-a-position-table", lambda tmp, _: None,
             _generate([SOURCE], max_length=10**6, family="roformer"), DataError,
             ("max_length", "at most 2048 tokens", "1000000")),
        Case("generate-max_length-beyond-int32", lambda tmp, _: None, _generate([SOURCE], max_length=2**31),
             DataError, ("max_length", "at most 2048 tokens", "2147483648")),
        Case("generate-a-million-samples", lambda tmp, _: None,
             _generate([SOURCE], "sample", n=10**6, family="roformer"), DataError,
             ("batch_size x (beams or n)", "at most 4096 rows", "1 x 1000000 = 1000000", "lower n")),
        Case("generate-a-billion-samples-in-a-batch", lambda tmp, _: None,
             _generate([SOURCE, SOURCE], "sample", n=10**9), DataError,
             ("at most 4096 rows", "2 x 1000000000 = 2000000000")),
        Case("generate-cache-beyond-the-bound", lambda tmp, _: None,
             _generate([SOURCE], "sample", n=4096, max_length=2048, family="roformer"), ModelError,
             ("generate", "at most 4,294,967,296 bytes", "4096 rows x 2 layers x 2052 positions x 32 hidden",
              "lower batch_size")),
        Case("generate-temperature-infinite", lambda tmp, _: None,
             _generate([SOURCE], "sample", temperature=float("inf")), DataError,
             ("temperature", "a finite temperature > 0", "temperature=inf")),
        Case("generate-topk-above-the-vocabulary", lambda tmp, _: None,
             _generate([SOURCE], "sample", topk=500), ModelError, ("topk", "128", "500")),
        Case("generate-an-encoder", lambda tmp, _: None, _generate_with_an_encoder, ModelError,
             ("application", "'encoder'", 'application="unilm"')),
        Case("decoder-topk-above-the-vocabulary", lambda tmp, _: None, _decoder_topk, ModelError,
             ("topk", "20", "topk=50")),
        Case("seq2seq-data-empty-target", lambda tmp, _: seq2seq_data(tmp),
             lambda tmp: train_call(tmp, task="seq2seq"), DataError, ("train.tsv:2", "column 1", "empty"),
             ("out",), lambda tmp: train_cli(tmp, task="seq2seq")),
        Case("seq2seq-target-maxlen-beyond-the-bound", lambda tmp, _: seq2seq_data(tmp),
             lambda tmp: train_call(tmp, task="seq2seq", target_maxlen=5000), ConfigError,
             ("--target-maxlen", "from 1 to 2048", "5000"), ("out",),
             lambda tmp: train_cli(tmp, "--target-maxlen", "5000", task="seq2seq")),
        Case("seq2seq-export-decoder-file-outside-its-folder",
             functools.partial(_portable_seq2seq, files={"prefill": "../elsewhere.onnx", "step": "step.onnx"}),
             _predict_text, ConfigError,
             ("decoder.files.prefill", "a file name inside the export folder", "'../elsewhere.onnx'"), (),
             _predict_cli),
        Case("seq2seq-export-decoder-file-an-absolute-path",
             lambda tmp, shared: _portable_seq2seq(tmp, shared, files={"prefill": "prefill.onnx",
                                                                        "step": str(tmp / "elsewhere.onnx")}),
             _predict_text, ConfigError, ("decoder.files.step", "a file name inside the export folder"), (),
             _predict_cli),
        Case("seq2seq-export-beams-beyond-the-bound", functools.partial(_portable_seq2seq, beams=10**6),
             _predict_text, ConfigError, ("kerasbert-export.json beams", "from 1 to 4096", "1000000"), (),
             _predict_cli),
        Case("seq2seq-export-target-maxlen-beyond-the-positions",
             functools.partial(_portable_seq2seq, target_maxlen=100), _predict_text, ConfigError,
             ("kerasbert-export.json maxlen", "more than target_maxlen + 2 (102)", "at most 64 (the model's "
              "positions)", "found 32")),
        Case("seq2seq-savedmodel-cache-of-one-source-beyond-the-bound",
             functools.partial(_saved_seq2seq, layers=12, hidden_size=768, max_length=512), _predict_text,
             ConfigError, ("kerasbert-export.json decoder", "at most 4,294,967,296 bytes",
                           "4096 rows x 12 layers x 512 positions x 768 hidden x 4 bytes x 2 = 154,618,822,656 bytes",
                           "fewer beams or a lower --maxlen"), (), _predict_cli),
        Case("seq2seq-savedmodel-hidden-size-not-a-number",
             functools.partial(_saved_seq2seq, layers=12, hidden_size="768"), _predict_text, ConfigError,
             ("kerasbert-export.json decoder", "layers and hidden_size, whole numbers >= 1", "12 and '768'"), (),
             _predict_cli),
        Case("seq2seq-export-given-ids", _seq2seq_export, _predict_ids, DataError,
             ("row 1 text", "a string (the export tokenizes it)", "a list [2, 45, 3]")),
    ]
