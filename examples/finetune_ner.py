"""Fine-tune an NER tagger, score it on a test split (entity-level F1) and tag new sentences, offline.

By default it writes the bundled generated Chinese NER data (``kerasbert.finetune.demo_data``: PER, LOC,
ORG; texts of one to six sentences, many read in windows with ``stride``) to a temporary folder, removed at the
end, and trains the tiny config from scratch on it as ``kerasbert demo`` does (8 epochs: from scratch, fewer find
few entities): test micro-F1 0.78.

    python examples/finetune_ner.py [--out RUN_FOLDER] [--epochs 8] [--crf]

For a real model, set TRAIN, DEV, TEST, VOCAB, CONFIG, CHECKPOINT, LR, MAXLEN and STRIDE below to your files
(CoNLL: ``char tag`` a line, a blank line between sentences) and a Google checkpoint, or run the
same from the command line:

    kerasbert train --task ner --config chinese_L-12_H-768_A-12/bert_config.json \
        --checkpoint chinese_L-12_H-768_A-12/bert_model.ckpt --vocab chinese_L-12_H-768_A-12/vocab.txt \
        --train train.txt --dev dev.txt --lr 2e-5 --maxlen 128 --epochs 3 --crf --out runs/ner
"""

import argparse
import json
import tempfile

from kerasbert.finetune.demo_data import DEMO_OPTIONS, DEMO_SENTENCES, DEMO_TRAINING, write_demo_data
from kerasbert.finetune.metrics import per_type_table
from kerasbert.finetune.training import evaluate, predict, train

parser = argparse.ArgumentParser(description="fine-tune an NER tagger (default: offline demo data)")
parser.add_argument("--out", help="the run folder, new or empty (default: a new temporary folder)")
parser.add_argument("--overwrite", action="store_true", help="replace the run in --out")
parser.add_argument("--epochs", type=int, default=DEMO_TRAINING["epochs"])
parser.add_argument("--crf", action="store_true", help="a CRF on the tagging head")
args = parser.parse_args()

with tempfile.TemporaryDirectory(prefix="kerasbert-data-") as scratch:
    # The bundled demo data; for a real model set these to your files and the checkpoint's folder,
    # with CONFIG = ".../bert_config.json", CHECKPOINT = ".../bert_model.ckpt", LR = 2e-5, MAXLEN = 128 and
    # STRIDE = None where every text fits in MAXLEN word pieces.
    demo = write_demo_data(scratch, sentences=DEMO_SENTENCES["ner"])
    TRAIN, DEV, TEST, VOCAB = demo["ner_train"], demo["ner_dev"], demo["ner_test"], demo["vocab"]
    CONFIG, CHECKPOINT = "tiny", None
    LR, MAXLEN = DEMO_TRAINING["lr"], DEMO_TRAINING["maxlen"]
    STRIDE, BATCH_SIZE = DEMO_OPTIONS["ner"]["stride"], DEMO_OPTIONS["ner"]["batch_size"]
    run = args.out or tempfile.mkdtemp(prefix="kerasbert-ner-")

    result = train("ner", TRAIN, run, dev=DEV, vocab=VOCAB, config=CONFIG, checkpoint=CHECKPOINT,
                   crf=args.crf, epochs=args.epochs, lr=LR, maxlen=MAXLEN, stride=STRIDE, batch_size=BATCH_SIZE,
                   overwrite=args.overwrite, verbose=0)
    if result.get("dev"):
        print(f"dev, best epoch {result['best_epoch']}: micro-F1 {result['dev']['f1']:.4f}")
    if TEST:
        test = evaluate(run, TEST, verbose=0)
        print(f"test: micro-F1 {test['f1']:.4f}  macro-F1 {test['macro_f1']:.4f}")
        print(per_type_table(test))
for row in predict(run, ["张伟去年加入了华为公司", "李娜和王芳昨天去了北京"]):
    print(json.dumps(row, ensure_ascii=False))
print(f"run folder: {run}")
