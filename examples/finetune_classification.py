"""Fine-tune a sentence classifier, score it on a test split and predict new sentences, offline.

By default it writes the bundled generated Chinese sentiment data (``kerasbert.finetune.demo_data``) to a
temporary folder, removed at the end, and trains the tiny config from scratch on it as ``kerasbert demo``
does (8 epochs; the best on dev is kept): test accuracy 1.00.

    python examples/finetune_classification.py [--out RUN_FOLDER] [--epochs 8]

For a real model, set TRAIN, DEV, TEST, VOCAB, CONFIG, CHECKPOINT, LR and MAXLEN below to your files
(``text<TAB>label`` a line) and a Google checkpoint, or run the same from the command line:

    kerasbert train --task cls --config chinese_L-12_H-768_A-12/bert_config.json \
        --checkpoint chinese_L-12_H-768_A-12/bert_model.ckpt --vocab chinese_L-12_H-768_A-12/vocab.txt \
        --train train.tsv --dev dev.tsv --lr 2e-5 --maxlen 128 --out runs/cls
"""

import argparse
import json
import tempfile

from kerasbert.finetune.demo_data import DEMO_TRAINING, write_demo_data
from kerasbert.finetune.training import evaluate, predict, train

parser = argparse.ArgumentParser(description="fine-tune a sentence classifier (default: offline demo data)")
parser.add_argument("--out", help="the run folder, new or empty (default: a new temporary folder)")
parser.add_argument("--overwrite", action="store_true", help="replace the run in --out")
parser.add_argument("--epochs", type=int, default=DEMO_TRAINING["epochs"])
args = parser.parse_args()

with tempfile.TemporaryDirectory(prefix="kerasbert-data-") as scratch:
    # The bundled demo data; for a real model set these to your files and the checkpoint's folder,
    # with CONFIG = ".../bert_config.json", CHECKPOINT = ".../bert_model.ckpt", LR = 2e-5, MAXLEN = 128.
    demo = write_demo_data(scratch)
    TRAIN, DEV, TEST, VOCAB = demo["cls_train"], demo["cls_dev"], demo["cls_test"], demo["vocab"]
    CONFIG, CHECKPOINT = "tiny", None
    LR, MAXLEN, BATCH_SIZE = DEMO_TRAINING["lr"], DEMO_TRAINING["maxlen"], DEMO_TRAINING["batch_size"]
    run = args.out or tempfile.mkdtemp(prefix="kerasbert-cls-")

    result = train("cls", TRAIN, run, dev=DEV, vocab=VOCAB, config=CONFIG, checkpoint=CHECKPOINT,
                   epochs=args.epochs, lr=LR, maxlen=MAXLEN, batch_size=BATCH_SIZE,
                   overwrite=args.overwrite, verbose=0)
    if result.get("dev"):
        dev = result["dev"]
        print(f"dev, best epoch {result['best_epoch']}: accuracy {dev['accuracy']:.4f}  "
              f"macro-F1 {dev['macro_f1']:.4f}")
    if TEST:
        test = evaluate(run, TEST, verbose=0)
        print(f"test: accuracy {test['accuracy']:.4f}  macro-F1 {test['macro_f1']:.4f}")
for row in predict(run, ["这家餐厅的菜非常好吃，服务也很满意", "房间很脏，真的让人失望"]):
    print(json.dumps(row, ensure_ascii=False))
print(f"run folder: {run}")
