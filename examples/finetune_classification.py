"""Fine-tune a sentence classifier, score it on a test split and predict new sentences, offline.

By default it writes the bundled generated Chinese sentiment data (``kerasbert.demo_data``) and
trains the tiny config from scratch on it (about 25 s on 2 CPU cores, test accuracy 1.00):

    python examples/finetune_classification.py [--out RUN_FOLDER] [--epochs 3]

For a real model, point it at a Google checkpoint and your own files (``text<TAB>label`` a line),
with a BERT learning rate:

    python examples/finetune_classification.py --config chinese_L-12_H-768_A-12/bert_config.json \
        --checkpoint chinese_L-12_H-768_A-12/bert_model.ckpt --vocab chinese_L-12_H-768_A-12/vocab.txt \
        --train train.tsv --dev dev.tsv --test test.tsv --lr 2e-5 --maxlen 128 --out runs/cls
"""

import argparse
import json
import tempfile

from kerasbert.demo_data import write_demo_data
from kerasbert.training import evaluate, predict, train

parser = argparse.ArgumentParser(description="fine-tune a sentence classifier (default: offline demo data)")
parser.add_argument("--out", help="the run folder, new or empty (default: a new temporary folder)")
parser.add_argument("--overwrite", action="store_true", help="empty --out first")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--config", default="tiny", help="bert_config.json or a preset (default: tiny)")
parser.add_argument("--checkpoint", help="Google bert_model.ckpt (default: random weights)")
parser.add_argument("--vocab", help="vocab.txt of the checkpoint (default: the demo vocabulary)")
parser.add_argument("--train", help="training file (default: the demo data; then --dev and --test too)")
parser.add_argument("--dev")
parser.add_argument("--test")
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--maxlen", type=int, default=64)
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()

if args.train is None:
    demo = write_demo_data(tempfile.mkdtemp(prefix="kerasbert-data-"))
    args.train, args.dev, args.test = demo["cls_train"], demo["cls_dev"], demo["cls_test"]
    args.vocab = args.vocab or demo["vocab"]
run = args.out or tempfile.mkdtemp(prefix="kerasbert-cls-")

result = train("cls", args.train, run, dev=args.dev, vocab=args.vocab, config=args.config, checkpoint=args.checkpoint,
               epochs=args.epochs, lr=args.lr, maxlen=args.maxlen, batch_size=args.batch_size,
               overwrite=args.overwrite, verbose=0)
if result.get("dev"):
    dev = result["dev"]
    print(f"dev, best epoch {result['best_epoch']}: accuracy {dev['accuracy']:.4f}  macro-F1 {dev['macro_f1']:.4f}")
if args.test:
    test = evaluate(run, args.test, verbose=0)
    print(f"test: accuracy {test['accuracy']:.4f}  macro-F1 {test['macro_f1']:.4f}")
for row in predict(run, ["这家餐厅的菜非常好吃，服务也很满意", "房间很脏，真的让人失望"]):
    print(json.dumps(row, ensure_ascii=False))
print(f"run folder: {run}")
