"""Bad inputs of continued pretraining (`kerasbert.finetune.pretrain.pretrain`, ``kerasbert pretrain``): rows of the
catalogue in ``tests/test_bad_inputs.py``. Each fails while the corpus and vocabulary are read, before the run
folder exists."""

from __future__ import annotations

import functools
from pathlib import Path

from kerasbert.errors import ConfigError, DataError
from kerasbert.text.limits import MAX_TEXT_CHARS
from kerasbert.text.lines import MAX_LINE_BYTES

from bad_input_kit import VOCAB, Case, config, long_line, text, vocab


def _corpus(tmp: Path, _shared=None, content: str | bytes = "很好\n北京\n\n张三\n", name: str = "corpus.txt",
            tokens: list[str] = VOCAB) -> None:
    text(tmp / name, content)
    config(tmp)
    vocab(tmp, tokens)


def _pretrain(data: str = "corpus.txt", **options):
    def call(tmp: Path):
        from kerasbert.finetune.pretrain import pretrain

        return pretrain(str(tmp / data), str(tmp / "out"), config=str(tmp / "bert_config.json"),
                        vocab=str(tmp / "vocab.txt"), epochs=1, verbose=0, **{"maxlen": 32, **options})

    return call


def _pretrain_cli(*extra: str, data: str = "corpus.txt"):
    return lambda tmp: ["pretrain", "--data", str(tmp / data), "--config", str(tmp / "bert_config.json"), "--vocab",
                        str(tmp / "vocab.txt"), "--out", str(tmp / "out"), "--epochs", "1", "--quiet",
                        *(extra or ("--maxlen", "32"))]


def rows() -> list[Case]:
    return [
        Case("pretrain-corpus-no-match", _corpus, _pretrain("corpus-*.txt"), DataError,
             ("corpus-*.txt", "found no match"), ("out",), _pretrain_cli(data="corpus-*.txt")),
        Case("pretrain-corpus-blank", functools.partial(_corpus, content="\n  \n\n"), _pretrain(), DataError,
             ("corpus.txt",), ("out",), _pretrain_cli()),
        Case("pretrain-corpus-gbk", functools.partial(_corpus, content="很好\n\n北京\n".encode("gbk")), _pretrain(),
             DataError, ("corpus.txt:1", "UTF-8", "GBK", "iconv"), ("out",), _pretrain_cli()),
        Case("pretrain-corpus-jsonl-not-an-object",
             functools.partial(_corpus, content='{"text": "很好"}\n["北京"]\n', name="corpus.jsonl"),
             _pretrain("corpus.jsonl"), DataError, ("corpus.jsonl:2",), ("out",), _pretrain_cli(data="corpus.jsonl")),
        Case("pretrain-vocab-without-mask", functools.partial(_corpus, tokens=[t for t in VOCAB if t != "[MASK]"]),
             _pretrain(), ConfigError, ("--vocab", "[MASK]"), ("out",), _pretrain_cli()),
        Case("pretrain-mask-rate", _corpus, _pretrain(mask_rate=1.5), ConfigError, ("--mask-rate", "1.5"),
             ("out",), _pretrain_cli("--maxlen", "32", "--mask-rate", "1.5")),
        Case("pretrain-maxlen-below-a-row", _corpus, _pretrain(maxlen=6), ConfigError, ("--maxlen", "6"), ("out",),
             _pretrain_cli("--maxlen", "6")),
        Case("pretrain-corpus-jsonl-nested-50000-deep",
             functools.partial(_corpus, content='{"text": "很好"}\n' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "\n",
                               name="corpus.jsonl"),
             _pretrain("corpus.jsonl"), DataError, ("corpus.jsonl:2", "nested more than 100 deep"), ("out",),
             _pretrain_cli(data="corpus.jsonl")),
        Case("pretrain-corpus-line-too-long",
             functools.partial(_corpus, content="很好\n" + "北" * (MAX_TEXT_CHARS + 1) + "\n"), _pretrain(), DataError,
             ("corpus.txt:2", "at most 1,000,000 characters", "found 1,000,001"), ("out",), _pretrain_cli()),
        Case("pretrain-corpus-line-past-the-byte-bound",
             lambda tmp, _: (_corpus(tmp), long_line(tmp / "corpus.txt", "很好\n\n北京", MAX_LINE_BYTES + 1)),
             _pretrain(), DataError, ("corpus.txt:4", "a line of at most 32,000,000 bytes", "byte offset 15"),
             ("out",), _pretrain_cli()),
        Case("pretrain-data-a-device", _corpus, _pretrain("/dev/zero"), ConfigError,
             ("--data", "/dev/zero", "not a regular file"), ("out",), _pretrain_cli(data="/dev/zero")),
    ]
