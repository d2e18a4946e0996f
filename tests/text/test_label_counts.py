"""kerasbert.text.label_counts: each training label counted, and a rare one (a likely typo) warned about with the
file and lines it is on; the tasks' labels as training counts them."""

from __future__ import annotations

import pytest

from kerasbert.text.label_counts import RARE_RATIO, count_labels, rare_labels, report_labels


def _lines(**counts: int) -> dict[str, list[int]]:
    return {label: [0] * count for label, count in counts.items()}


def test_counts_are_most_frequent_first_with_their_lines():
    counts = count_labels([("neg", 1), ("pos", 2), ("pos", 3), ("pso", 7), ("neg", 9), ("pos", 11)])
    assert counts == {"pos": [2, 3, 11], "neg": [1, 9], "pso": [7]}
    assert list(counts) == ["pos", "neg", "pso"]


@pytest.mark.parametrize("counts, rare", [
    (_lines(pos=32, neg=31, pso=1), ["pso"]),  # seen once among labels seen more often
    (_lines(a=1, b=1, c=1), []),  # every label once: none stands out
    (_lines(a=2, b=1), ["b"]),
    (_lines(a=1000, b=9), ["b"]),  # 9 x 100 < 1000
    (_lines(a=1000, b=10), []),  # 10 x 100 = 1000: not fewer than 1 in 100
    (_lines(a=500, b=480, c=4, d=5), ["c"]),
])
def test_the_rare_rule(counts, rare):
    assert RARE_RATIO == 100
    assert rare_labels(counts) == rare


def test_the_report_lists_each_label_and_warns_for_a_typo_naming_its_line(log_lines):
    labelled = [("pos", 1), ("neg", 2), ("pos", 3), ("pso", 4), ("neg", 5), ("pos", 6)]
    assert report_labels(labelled, "train.tsv") == {"pos": [1, 3, 6], "neg": [2, 5], "pso": [4]}
    assert log_lines() == [
        "3 labels in train.tsv: pos 3, neg 2, pso 1",
        "train.tsv:4: label 'pso' is seen once, 'pos' 3 times: a misspelt label trains as a class of its own; "
        "correct it, or keep it if it is meant"]


def test_the_report_names_three_lines_of_a_rare_label_and_is_quiet_but_for_warnings(log_lines):
    labelled = [("PER", line) for line in range(1, 501)] + [("LCO", line) for line in (7, 9, 12, 40)]
    report_labels(labelled, "train.conll", "entity type", verbose=0)
    assert log_lines() == ["train.conll:7, 9, 12, ...: entity type 'LCO' is seen 4 times, 'PER' 500 times: a misspelt "
                           "entity type trains as a class of its own; correct it, or keep it if it is meant"]
    assert report_labels([], "empty.tsv") == {} and len(log_lines()) == 1


def test_what_each_task_counts(tmp_path):
    from kerasbert.finetune.tasks import get_task

    cls_file = tmp_path / "train.tsv"
    cls_file.write_text("很好\tpos\n太差\tneg\n\n还行\tpso\n", encoding="utf-8")
    cls = get_task("cls")
    assert list(cls.labelled(cls.read(str(cls_file)))) == [("pos", 1), ("neg", 2), ("pso", 4)]
    ner_file = tmp_path / "train.conll"
    ner_file.write_text("张 B-PER\n三 I-PER\n去 O\n北 B-LOC\n京 I-LOC\n\n李 B-PER\n", encoding="utf-8")
    ner = get_task("ner")
    assert ner.label_noun == "entity type"
    assert list(ner.labelled(ner.read(str(ner_file)))) == [("PER", 1), ("LOC", 1), ("PER", 7)]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("很好\t好\t1\n太差\t好\t0\n", encoding="utf-8")
    sim = get_task("sim")
    examples = sim.read(str(pairs))
    assert [example.label for example in examples] == ["1", "0"]
    assert list(sim.labelled(examples)) == []  # a similarity score, not a class: nothing to count


@pytest.mark.parametrize("task", ["seq2seq", "sim", "cls"])
def test_training_logs_labels_only_for_tasks_that_have_them(task, tmp_path, log_lines):
    from kerasbert.finetune.demo_data import write_demo_data, write_title_data
    from kerasbert.finetune.paraphrase_data import write_paraphrase_data
    from kerasbert.finetune.tasks import task_of
    from kerasbert.finetune.training import TrainArgs, _read_inputs

    if task == "cls":
        data = write_demo_data(str(tmp_path), n_train=40, n_dev=8, n_test=8)
        data = {"train": data["cls_train"], "vocab": data["vocab"]}
    else:
        data = (write_title_data if task == "seq2seq" else write_paraphrase_data)(str(tmp_path))
    args = TrainArgs(task=task, train=data["train"], out=str(tmp_path / "run"), vocab=data["vocab"])
    _read_inputs(args, task_of(args), None, verbose=1)
    said = [line.replace(str(tmp_path), "DATA") for line in log_lines()]
    assert [line for line in said if "label" in line] == (["2 labels in DATA/cls/train.tsv: neg 20, pos 20"]
                                                          if task == "cls" else []), said
