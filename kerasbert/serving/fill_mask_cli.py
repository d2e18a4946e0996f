"""``kerasbert fill-mask``: its options, its checks before TensorFlow starts, what it runs
(`kerasbert.serving.fill_mask.fill_mask`), and ``kerasbert demo --task fill-mask``. Importing this module imports no
TensorFlow.

Example:
>>> parser = argparse.ArgumentParser()
>>> fill_mask_arguments(parser)
>>> args = parser.parse_args(["ckpt", "--text", "北京是中国的[MASK][MASK]。", "--top-k", "3"])
>>> args.path, args.text, args.top_k, args.whole_word
('ckpt', ['北京是中国的[MASK][MASK]。'], 3, True)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os

from kerasbert.choices import PREDICT_BATCH_SIZE
from kerasbert.errors import ConfigError, fail
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.finetune.train_flags import family_argument
from kerasbert.log import progress_verbosity
from kerasbert.serving.fill_mask import MASK_TOKEN, TOP_K, check_source, check_texts

__all__ = ["DEMO_FILL_MASK", "check_fill_mask", "fill_mask_arguments", "fill_mask_demo", "run_fill_mask"]

# the demo's continued pretraining on generated sentences, then the masked sentences it fills
DEMO_FILL_MASK = {"sentences": 4000, "documents_of": 4, "lr": 5e-3, "batch_size": 16, "maxlen": 64,
                  "texts": ["张伟在[MASK][MASK]工作", "这家餐厅的菜非常好[MASK]", "李娜去年加入了华为[MASK][MASK]",
                            "[MASK]天的会议推迟了"]}


def fill_mask_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``kerasbert fill-mask``: the model, the texts, the guesses, the output."""
    parser.add_argument("path", metavar="MODEL", help="a Google checkpoint (folder or prefix) or Hugging Face folder "
                                                      "with its masked-LM head, or a `kerasbert pretrain` run folder")
    parser.add_argument("--text", action="append", help=f"a text with {MASK_TOKEN} (repeatable)")
    parser.add_argument("--input", help='a text file, one text a line, or a .jsonl file of {"text": ...}')
    parser.add_argument("--output", help="write the answers here as JSONL (default: print them)")
    parser.add_argument("--top-k", type=int, default=TOP_K, help="guesses per mask and per whole word "
                                                                 "(default: %(default)s)")
    parser.add_argument("--no-whole-word", dest="whole_word", action="store_false",
                        help="no whole-word guesses for runs of adjacent masks")
    family_argument(parser)
    parser.add_argument("--maxlen", type=int, help="word pieces a text keeps (default: the model's positions, at "
                                                   "most 512; a run's --maxlen)")
    parser.add_argument("--batch-size", type=int, default=PREDICT_BATCH_SIZE,
                        help="texts the model runs at once (default: %(default)s)")


def _rows(args: argparse.Namespace) -> tuple[list[dict], list[str]]:
    """The input rows and where each comes from (``--text N`` or ``FILE: row N``)."""
    from kerasbert.text.readers import read_texts

    if args.text:
        return [{"text": text} for text in args.text], [f"--text {i + 1}" for i in range(len(args.text))]
    rows = read_texts(args.input)
    return rows, [f"{args.input}: row {i + 1}" for i in range(len(rows))]


def check_fill_mask(args: argparse.Namespace) -> None:
    """``kerasbert fill-mask``'s checks that need no TensorFlow: the options, the model folder, the texts and their
    masks, ``--output``."""
    from kerasbert.files import check_existing
    from kerasbert.finetune.runs import check_writable
    from kerasbert.serving.embed import check_batch_size

    if bool(args.text) == bool(args.input):
        raise fail(ConfigError, "fill-mask", "--text or --input (one of them)", "both" if args.text else "neither")
    check_existing(args.input, "--input")
    if args.output:
        if os.path.isdir(args.output):
            raise fail(ConfigError, f"--output {args.output}", "a file to write the answers to", "a folder")
        check_writable(args.output, "--output")
    check_batch_size(args.batch_size)
    check_source(args.path, args.model, args.maxlen, args.top_k)
    rows, where = _rows(args)
    check_texts([row["text"] for row in rows], where)


def run_fill_mask(args: argparse.Namespace) -> int:
    """Fill the masks of the texts and print them (or write them to ``--output``), one JSON object a line."""
    from kerasbert.files import output_rows
    from kerasbert.serving.fill_mask import open_filler

    rows, where = _rows(args)
    filler = open_filler(args.path, args.model, args.maxlen)
    answers = filler([row["text"] for row in rows], args.top_k, args.whole_word, args.batch_size, where)
    output_rows([{**row, **answer} for row, answer in zip(rows, answers, strict=True)], args.output,
                "answers written")
    return 0


# ------------------------------------------------------------------------------------------- demo
def demo_corpus(folder: str, seed: int, count: int, documents_of: int) -> dict[str, str]:
    """The demo's generated Chinese sentences (`kerasbert.finetune.demo_data.write_demo_data`'s sentiment and entity
    sentences, alternating) as pretraining corpora, ``documents_of`` sentences a document: ``train`` of ``count``
    sentences, ``dev`` of a quarter as many, and their ``vocab``."""
    from kerasbert.files import write_text
    from kerasbert.text.ner_readers import read_conll

    data = write_demo_data(folder, seed=seed, n_train=count // 2, n_dev=max(count // 8, documents_of), n_test=1)
    paths = {"vocab": data["vocab"]}
    for split in ("train", "dev"):
        with open(data[f"cls_{split}"], encoding="utf-8") as f:
            opinions = [line.split("\t")[0] for line in f.read().splitlines()]
        entities = [example.text for example in read_conll(data[f"ner_{split}"])]
        sentences = [sentence for pair in zip(opinions, entities, strict=False) for sentence in pair]
        documents = ["\n".join(sentences[i:i + documents_of]) for i in range(0, len(sentences), documents_of)]
        paths[split] = os.path.join(folder, f"{split}.txt")
        write_text(paths[split], "\n\n".join(documents) + "\n")
    return paths


def fill_mask_demo(args: argparse.Namespace) -> None:
    """``kerasbert demo --task fill-mask``: the tiny config pretrained from scratch on the demo's sentences (masked LM,
    whole Chinese words where jieba is installed), then its guesses for `DEMO_FILL_MASK`'s masked sentences."""
    from kerasbert.finetune.demo_data import DEMO_TRAINING
    from kerasbert.finetune.pretrain import pretrain
    from kerasbert.serving.fill_mask import fill_mask

    settings, run = DEMO_FILL_MASK, os.path.join(args.out, "fill-mask")
    data = demo_corpus(os.path.join(args.out, "data", "fill-mask"), args.seed, settings["sentences"],
                       settings["documents_of"])
    print(f"== fill-mask: pretraining the tiny config from scratch on {data['train']}")
    result = pretrain(data["train"], run, dev=data["dev"], vocab=data["vocab"], overwrite=True, seed=args.seed,
                      epochs=args.epochs or DEMO_TRAINING["epochs"], lr=settings["lr"], maxlen=settings["maxlen"],
                      batch_size=settings["batch_size"], whole_word=importlib.util.find_spec("jieba") is not None,
                      verbose=progress_verbosity(args.quiet))
    dev = result.get("dev") or {}
    print(f"== fill-mask: dev masked-LM accuracy {dev.get('accuracy', float('nan')):.4f}")
    for row in fill_mask(run, settings["texts"], top_k=3):
        best = [[candidate["token"] for candidate in mask["candidates"]] for mask in row["masks"]]
        words = [[candidate["word"] for candidate in word["candidates"]] for word in row["words"]]
        print(json.dumps({"text": row["text"], "filled": row["filled"], "pieces": best, "words": words},
                         ensure_ascii=False))
    print(f"== fill-mask: run folder {run}; Google checkpoint {result['google']}; Hugging Face folder {result['hf']}")
