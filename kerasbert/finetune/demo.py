"""``kerasbert demo``: each task trained from scratch on its bundled data with the tiny config, offline, then
scored on its test file and asked for a few predictions.

Each task's data comes from its writer in `DEMO_WRITERS` (``"module:function"``, called with the folder and a seed,
answering its ``train``, ``dev``, ``test`` and ``vocab`` paths), its training settings from
`kerasbert.finetune.demo_data.DEMO_TRAINING` and ``DEMO_OPTIONS``, and the inputs it predicts from `DEMO_TEXTS`.

Example:
>>> sorted(DEMO_WRITERS) == sorted(DEMO_TEXTS)
True
"""

from __future__ import annotations

import argparse
import importlib
import json
import os

from kerasbert.finetune.demo_data import DEMO_OPTIONS, DEMO_SENTENCES, DEMO_TRAINING
from kerasbert.log import progress_verbosity

__all__ = ["DEMO_ALL", "DEMO_COMMANDS", "DEMO_TEXTS", "DEMO_WRITERS", "demo_arguments", "demo_files", "run_demo"]

# the inputs each demo task predicts after training
DEMO_TEXTS = {"cls": ["这家餐厅的菜非常好吃，服务也很满意", "房间很脏，真的让人失望"],
              "ner": ["张伟去年加入了华为公司", "李娜和王芳昨天去了北京"],
              "seq2seq": ["昨天，华为公司在杭州举办了发布会，现场来了很多人，气氛非常热烈。"],
              "span": ["张伟去年加入了北京大学", "李娜在杭州银行工作"],
              "relation": ["张伟出生于北京，后来在华为公司工作", "复旦大学位于上海", "李娜昨天去了南京"],
              "qa": [{"question": "谁在杭州工作？", "context": "张伟在杭州工作。李娜是南京人。"},
                     {"question": "李娜是哪里人？", "context": "张伟在杭州工作。李娜是南京人。"}],
              "sim": [{"text": "从北京到上海怎么走", "text_b": "怎么从北京去上海"},
                      {"text": "从北京到上海怎么走", "text_b": "从北京到广州怎么走"},
                      {"text": "银行几点开门", "text_b": "银行几点关门"}],
              "multilabel": ["服务员很好，价格太差", "环境一般，味道令人惊喜", "我们上周去的"],
              "rerank": [{"query": "张伟在哪里工作", "passage": passage}
                         for passage in ("张伟是杭州人", "张伟每天去华为公司上班", "张伟现在住在上海")]}
# each demo task's data writer, "module:function" (folder, seed) -> its train, dev, test and vocab paths
DEMO_WRITERS = {"cls": "kerasbert.finetune.demo:classic_data", "ner": "kerasbert.finetune.demo:classic_data",
                "seq2seq": "kerasbert.finetune.demo_data:write_title_data",
                "span": "kerasbert.finetune.demo:span_data",
                "relation": "kerasbert.finetune.relation_demo_data:write_relation_data",
                "qa": "kerasbert.finetune.qa_demo_data:write_qa_data",
                "sim": "kerasbert.finetune.paraphrase_data:write_paraphrase_data",
                "multilabel": "kerasbert.finetune.multilabel_demo_data:write_multilabel_data",
                "rerank": "kerasbert.finetune.rerank_demo_data:write_rerank_data"}
DEMO_ALL = ("cls", "ner")  # what `kerasbert demo` runs by default; seq2seq needs the seq2seq extra
# demos that are not a train task, "module:function" (the parsed arguments) -> None: each writes, trains and prints
DEMO_COMMANDS = {"fill-mask": "kerasbert.serving.fill_mask_cli:fill_mask_demo"}


def classic_data(folder: str, seed: int, task: str = "cls") -> dict[str, str]:
    """The cls or ner demo files (`kerasbert.finetune.demo_data.write_demo_data`, both written together)."""
    from kerasbert.finetune.demo_data import write_demo_data

    data = write_demo_data(os.path.dirname(folder), seed=seed, sentences=DEMO_SENTENCES["ner"])
    return {split: data[f"{task}_{split}"] for split in ("train", "dev", "test")} | {"vocab": data["vocab"]}


def span_data(folder: str, seed: int) -> dict[str, str]:
    """The span demo files: nested entities in texts of up to ``DEMO_SENTENCES["span"]`` sentences."""
    from kerasbert.finetune.demo_data import write_span_data

    return write_span_data(folder, seed=seed, sentences=DEMO_SENTENCES["span"])


def demo_files(task: str, out: str, seed: int) -> dict[str, str]:
    """The demo's ``train``, ``dev``, ``test`` and ``vocab`` files of ``task``, written under ``out/data``."""
    module, function = DEMO_WRITERS[task].split(":")
    writer = getattr(importlib.import_module(module), function)
    folder = os.path.join(out, "data", task)
    return writer(folder, seed, task) if writer is classic_data else writer(folder, seed=seed)


def demo_arguments(parser: argparse.ArgumentParser) -> None:
    """``kerasbert demo``'s options: the task, the output folder, epochs, seed, quiet."""
    parser.add_argument("--task", choices=(*DEMO_TEXTS, *DEMO_COMMANDS, "all"), default="all",  # bundled data
                        help=f"the task to train on its bundled data, or all ({', '.join(DEMO_ALL)}); fill-mask: "
                             "pretrain on the demo's sentences, then fill masks (default: %(default)s)")
    parser.add_argument("--out", default="kerasbert-demo", help="folder for the data and runs (default: %(default)s)")
    parser.add_argument("--epochs", type=int,
                        help=f"epochs (default: {DEMO_TRAINING['epochs']}; "
                             f"seq2seq {DEMO_OPTIONS['seq2seq']['epochs']})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def run_demo(args: argparse.Namespace) -> int:
    """Train, score and predict each task ``args.task`` names (all: `DEMO_ALL`)."""
    from kerasbert.finetune.metrics import score_text
    from kerasbert.finetune.training import evaluate, predict, train

    for task in DEMO_ALL if args.task == "all" else (args.task,):
        if task in DEMO_COMMANDS:
            module, function = DEMO_COMMANDS[task].split(":")
            getattr(importlib.import_module(module), function)(args)
            continue
        data, run = demo_files(task, args.out, args.seed), os.path.join(args.out, task)
        print(f"== {task}: training the tiny config from scratch on {data['train']}")
        settings = {**DEMO_TRAINING, **DEMO_OPTIONS.get(task, {})}
        train(task, data["train"], run, dev=data["dev"], vocab=data["vocab"],
              **{**settings, "epochs": args.epochs or settings["epochs"]}, seed=args.seed, overwrite=True,
              verbose=progress_verbosity(args.quiet))
        print(f"== {task}: test set\n{score_text(evaluate(run, data['test'], verbose=0))}")
        for row in predict(run, DEMO_TEXTS[task]):
            print(json.dumps(row, ensure_ascii=False))
        print(f"== {task}: run folder {run}")
    return 0
