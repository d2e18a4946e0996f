"""``--task seq2seq``: reading source/target files, UniLM pairs with next-token labels, training on the target
tokens only, and generation scored by ROUGE and BLEU."""

from __future__ import annotations

import json

import pytest

from kerasbert import ConfigError, DataError
from kerasbert.finetune.demo_data import write_title_data
from kerasbert.finetune.metrics import generation_metrics
from kerasbert.finetune.seq2seq import Seq2SeqTask, next_token_labels
from kerasbert.text.readers import LabelSet
from kerasbert.text.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_title_data(str(tmp_path_factory.mktemp("titles")), n_train=64, n_dev=8, n_test=8)


def test_pairs_label_the_next_target_token_only(data):
    task = Seq2SeqTask()
    tokenizer = Tokenizer(data["vocab"])
    examples = task.read(data["dev"], LabelSet([]))
    features = task.encode(tokenizer, examples, LabelSet([]), 64, "dev")
    for example, ids, segments, labels, prompt in zip(examples, features.token_ids, features.segment_ids,
                                                       features.labels, features.prompts, strict=True):
        assert ids == tokenizer.encode(example.text, example.label, maxlen=64)[0]
        target = [i for i, s in zip(ids, segments, strict=True) if s == 1]  # target pieces and the final [SEP]
        assert [label for label in labels if label] == target
        assert labels[-1] == 0 and len(labels) == len(ids)
        assert prompt == tokenizer.encode(example.text, maxlen=64 - task.target_maxlen)[0]


def test_next_token_labels_by_hand():
    assert next_token_labels([2, 5, 6, 3, 7, 3], [0, 0, 0, 0, 1, 1]) == [0, 0, 0, 7, 3, 0]


def test_tsv_files_read_source_then_target(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("今天下雨\t下雨\n明天晴天\t晴天\n", encoding="utf-8")
    examples = Seq2SeqTask().read(str(path))
    assert [(e.text, e.label) for e in examples] == [("今天下雨", "下雨"), ("明天晴天", "晴天")]


@pytest.mark.parametrize("row, what", [({"source": "今天下雨", "target": ""}, "target"),
                                       ({"source": " ", "target": "下雨"}, "source")])
def test_an_empty_source_or_target_is_refused_with_its_line(tmp_path, row, what):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"source": "好", "target": "好"}) + "\n" + json.dumps(row, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    with pytest.raises(DataError, match=f"train.jsonl:2: expected .*{what}"):
        Seq2SeqTask().read(str(path))


def test_generation_metrics_by_hand():
    same = generation_metrics(["新华社在北京举办音乐会"], ["新华社在北京举办音乐会"])
    assert same["rouge_1"] == same["rouge_2"] == same["rouge_l"] == 1.0 and same["bleu"] == pytest.approx(1.0)
    apart = generation_metrics(["新华社"], ["北京"])
    assert apart["rouge_1"] == apart["rouge_l"] == apart["bleu"] == 0.0
    # "ab" against "abc": ROUGE-1 P 1, R 2/3, F 0.8; ROUGE-2 P 1, R 1/2, F 2/3; averaged with a perfect pair
    mixed = generation_metrics(["新华社", "北京"], ["新华", "北京"])
    assert mixed["rouge_1"] == pytest.approx((0.8 + 1) / 2) and mixed["rouge_2"] == pytest.approx((2 / 3 + 1) / 2)


def test_maxlen_leaves_room_for_the_source(data):
    from kerasbert.finetune.args import TrainArgs

    with pytest.raises(ConfigError, match="--maxlen: expected more than --target-maxlen \\+ 2 = 34"):
        TrainArgs(task="seq2seq", train=data["train"], out="run", vocab=data["vocab"], maxlen=34).check()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """`kerasbert demo --task seq2seq` as a user runs it: titles of generated news paragraphs."""
    from kerasbert.cli import main

    out = str(tmp_path_factory.mktemp("demo"))
    assert main(["demo", "--task", "seq2seq", "--out", out, "--quiet"]) == 0
    return out


def test_the_demo_learns_to_write_titles(demo):
    import os

    scores = json.load(open(os.path.join(demo, "seq2seq", "eval-test.json")))
    assert scores["count"] == 100 and scores["rouge_l"] >= 0.8 and scores["bleu"] >= 0.6
    assert {"model.keras", "scores.txt", "metrics.json", "args.json"} <= set(os.listdir(os.path.join(demo, "seq2seq")))


def test_predict_writes_what_generate_finds(demo):
    import os

    from kerasbert import generate
    from kerasbert.finetune.runs import open_run
    from kerasbert.finetune.training import predict

    run = os.path.join(demo, "seq2seq")
    texts = ["昨天，华为公司在杭州举办了发布会，现场来了很多人，气氛非常热烈。", "张伟参加了会议，天气不错。"]
    rows = predict(run, texts)
    loaded = open_run(run)
    assert loaded.model.application == "unilm" and loaded.args.task == "seq2seq"
    sep = loaded.tokenizer.token_to_id("[SEP]")
    for text, row in zip(texts, rows, strict=True):
        ids = loaded.tokenizer.encode(text, maxlen=loaded.args.maxlen - loaded.args.target_maxlen)[0]
        found = generate(loaded.model, [ids], end_ids=sep, max_length=loaded.args.target_maxlen)[0].ids[0]
        assert row == {"text": text, "target": loaded.tokenizer.decode([i for i in found if i != sep])}
    assert rows[0]["target"] == "华为公司在杭州举办发布会"
