"""`kerasbert.fill_mask` and ``kerasbert fill-mask``: the masked LM's probabilities and top-k against bert4keras's
``with_mlm`` model filling masks the way its example does (BERT, ALBERT, NEZHA, RoFormer, RoFormer-V2, random
checkpoints bert4keras writes in its own names); a Hugging Face folder and a checkpoint prefix giving the Google
folder's numbers; whole words against every pair; a pretraining run against its Google and Hugging Face
checkpoints; the CLI and the demo."""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest

import kerasbert
from kerasbert import build_transformer_model, save_hf_checkpoint
from kerasbert.cli import main
from kerasbert.errors import DataError
from kerasbert.serving.fill_mask import (
    FILL_MASK_FAMILIES,
    MASK_TOKEN,
    encode_masked,
    fill_mask,
    filled_row,
    open_filler,
    top_words,
)
from kerasbert.text.tokenizer import Tokenizer, pad_ids

import helpers

ATOL = 1e-5
TOP_K = 5
FAMILIES = ("bert", "albert", "nezha", "roformer", "roformer_v2")
CHARS = "北京是中国的首都。上海有很多人我们今天去大学"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *CHARS, "hello", "world", "##s"]
VOCAB += [f"w{i}" for i in range(helpers.TINY["vocab_size"] - len(VOCAB))]
# each text with the characters to mask (bert4keras's example sets their pieces to [MASK], one a character)
ORACLE_TEXTS = [{"text": "北京是中国的首都。", "masked": [6, 7]}, {"text": "上海有很多人", "masked": [0]},
                {"text": "我们今天去大学", "masked": [1, 3, 4]}]


def masked_text(item: dict) -> str:
    return "".join(MASK_TOKEN if i in item["masked"] else char for i, char in enumerate(item["text"]))


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> dict:
    """Per family a folder (config, vocab.txt, the checkpoint bert4keras writes), and bert4keras's fill-mask."""
    work = tmp_path_factory.mktemp("fill_mask")
    tasks, folders = [], {}
    for family in FAMILIES:
        folder = str(work / family)
        os.makedirs(folder)
        with open(os.path.join(folder, "bert_config.json"), "w") as f:
            json.dump({**helpers.TINY, **({"embedding_size": 16} if family == "albert" else {})}, f)
        helpers.write_vocab(folder, VOCAB)
        common = {"config": os.path.join(folder, "bert_config.json"), "model": family,
                  "checkpoint": os.path.join(folder, "bert_model.ckpt")}
        tasks += [{"kind": "family_checkpoint", **common, "kwargs": {"with_mlm": True}, "seed": len(tasks), "std": 0.2},
                  {"kind": "fill_mask", **common, "vocab": os.path.join(folder, "vocab.txt"), "texts": ORACLE_TEXTS,
                   "top_k": TOP_K}]
        folders[family] = folder
    found = helpers.run_bert4keras("oracle_fill_mask.py", {"tasks": tasks}, str(work))
    return {"folders": folders, "out": {family: {key.split("/", 1)[1]: value for key, value in found.items()
                                                 if key.startswith(f"{2 * i + 1}/")}
                                        for i, family in enumerate(FAMILIES)}}


@pytest.mark.parametrize("family", FAMILIES)
def test_probabilities_and_top_k_equal_bert4keras(oracle, family):
    expected = oracle["out"][family]
    filler = open_filler(oracle["folders"][family], family)
    texts = [masked_text(item) for item in ORACLE_TEXTS]
    rows = filler.encode(texts)
    answers = filler(texts, top_k=TOP_K)
    for i, (row, probs, answer) in enumerate(zip(rows, filler.probabilities(rows), answers, strict=True)):
        assert row.token_ids == expected[f"ids/{i}"].tolist()
        np.testing.assert_allclose(probs, expected[f"probs/{i}"], atol=ATOL, rtol=0)
        top = [[c["token_id"] for c in mask["candidates"]] for mask in answer["masks"]]
        assert top == expected[f"top/{i}"].tolist()
        for mask, row_probs in zip(answer["masks"], expected[f"probs/{i}"], strict=True):
            assert [c["score"] for c in mask["candidates"]] == pytest.approx(np.sort(row_probs)[::-1][:TOP_K], abs=ATOL)
            assert [c["token"] for c in mask["candidates"]] == [VOCAB[c["token_id"]] for c in mask["candidates"]]


def test_the_with_mlm_model_equals_bert4keras_at_every_position(oracle):
    folder, expected = oracle["folders"]["bert"], oracle["out"]["bert"]["all"]
    bert = build_transformer_model(folder, os.path.join(folder, "bert_model.ckpt"), with_mlm=True, verbose=False)
    ids = pad_ids([oracle["out"]["bert"][f"ids/{i}"].tolist() for i in range(len(ORACLE_TEXTS))])
    probs = bert.predict([ids, np.zeros_like(ids)], verbose=0)
    real = ids != 0
    np.testing.assert_allclose(probs[real], expected[real], atol=ATOL, rtol=0)


@pytest.mark.parametrize("family", ["bert", "albert"])
def test_a_hugging_face_folder_and_a_prefix_give_the_google_numbers(oracle, family, tmp_path):
    folder = oracle["folders"][family]
    texts = [masked_text(item) for item in ORACLE_TEXTS]
    bert = build_transformer_model(folder, os.path.join(folder, "bert_model.ckpt"), model=family, with_mlm=True,
                                   verbose=False)
    hf = save_hf_checkpoint(bert, str(tmp_path / "hf"), vocab=os.path.join(folder, "vocab.txt"))
    google = fill_mask(folder, texts, family=family)
    assert fill_mask(hf, texts) == google  # config.json's model_type names the family
    assert fill_mask(os.path.join(folder, "bert_model.ckpt"), texts, family=family) == google
    assert kerasbert.fill_mask is fill_mask


def test_whole_words_are_the_best_products_of_every_pair(oracle):
    filler = open_filler(oracle["folders"]["bert"])
    text = "北京是中国的[MASK][MASK]。我们[MASK]"
    [row] = filler.encode([text])
    [probs] = filler.probabilities([row])
    [answer] = filler(text, top_k=7)
    pairs = sorted(((probs[0, a] * probs[1, b], a, b) for a, b in itertools.product(range(len(VOCAB)), repeat=2)),
                   key=lambda x: -x[0])[:7]
    [word] = answer["words"]  # the run of two, not the lone mask
    assert (word["position"], word["masks"]) == (6, 2)
    assert [c["token_ids"] for c in word["candidates"]] == [[a, b] for _, a, b in pairs]
    assert [c["score"] for c in word["candidates"]] == pytest.approx([p for p, _, _ in pairs], rel=1e-5)
    assert word["candidates"][0]["word"] == "".join(VOCAB[i].removeprefix("##") for i in pairs[0][1:])
    best = [mask["candidates"][0]["token"] for mask in answer["masks"]]
    assert answer["filled"] == f"北京是中国的{best[0]}{best[1]}。我们{best[2]}"
    assert [mask["position"] for mask in answer["masks"]] == [6, 12, 21]
    assert filler(text, top_k=7, whole_word=False)[0]["words"] == []


def test_top_words_is_exact():
    rng = np.random.default_rng(0)
    log_probs = np.log(rng.dirichlet(np.ones(6), size=3))
    every = sorted(((float(sum(log_probs[i, j] for i, j in enumerate(ids))), ids)
                    for ids in itertools.product(range(6), repeat=3)), key=lambda x: -x[0])
    for k in (1, 5, 216):
        found = top_words(log_probs, k)
        assert [ids for ids, _ in found] == [ids for _, ids in every[:k]]
        assert [score for _, score in found] == pytest.approx([score for score, _ in every[:k]])


def test_masks_stay_one_piece_and_long_texts_keep_them():
    tokenizer = Tokenizer({token: i for i, token in enumerate(VOCAB)})
    masked = encode_masked(tokenizer, "Hello [MASK] worlds[MASK]", 16, "t")  # the text between masks cut alone
    assert tokenizer.ids_to_tokens(masked.token_ids) == ["[CLS]", "hello", "[MASK]", "world", "##s", "[MASK]",
                                                         "[SEP]"]
    assert (masked.positions, masked.offsets) == ([2, 5], [6, 19])
    probs = np.zeros((2, len(VOCAB)))
    probs[:, VOCAB.index("##s")] = 1.0
    assert filled_row(masked, probs, tokenizer)["filled"] == "Hello s worldss"  # ## dropped where it is filled in
    cut = encode_masked(tokenizer, "[MASK]北京北京北京北京", 6, "t")
    assert (cut.token_ids, cut.cut) == ([2, 4, 5, 6, 5, 3], 5)
    with pytest.raises(DataError, match=r"t: expected every \[MASK\] within the first 4 word pieces"):
        encode_masked(tokenizer, "北京北京北京[MASK]", 6, "t")


def test_the_families_with_a_masked_lm():
    from kerasbert.modeling import families
    from kerasbert.modeling.final_layers import MLM_HEADS

    with_mlm = {name for name in families.FAMILY_NAMES if families.get(name).heads in MLM_HEADS}
    assert set(FILL_MASK_FAMILIES) == with_mlm | {"roberta"}


def test_cli_prints_or_writes_one_answer_a_text(oracle, tmp_path, capsys):
    folder = oracle["folders"]["bert"]
    text = masked_text(ORACLE_TEXTS[0])
    assert main(["fill-mask", folder, "--text", text, "--text", "上海[MASK]很多人", "--top-k", "3"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == fill_mask(folder, [text, "上海[MASK]很多人"], top_k=3)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": 7, "text": text}, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "out" / "answers.jsonl"
    assert main(["fill-mask", folder, "--input", str(source), "--output", str(out), "--no-whole-word"]) == 0
    [row] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert row == {"id": 7, **fill_mask(folder, text, whole_word=False)[0]}


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> dict:
    """A tiny pretraining run of one short epoch, with its Google and Hugging Face checkpoints."""
    from kerasbert.finetune.pretrain import pretrain
    from kerasbert.serving.fill_mask_cli import demo_corpus

    work = tmp_path_factory.mktemp("pretrained")
    data = demo_corpus(str(work / "data"), seed=0, count=64, documents_of=4)
    result = pretrain(data["train"], str(work / "run"), vocab=data["vocab"], epochs=1, batch_size=8, maxlen=32,
                      verbose=0)
    return {"run": str(work / "run"), **result}


@pytest.mark.slow  # trains
def test_a_pretraining_run_fills_as_its_checkpoints(pretrained):
    texts = ["张伟在[MASK][MASK]工作", "这家餐厅的菜非常好[MASK]"]
    filler = open_filler(pretrained["run"])
    assert (filler.kind, filler.family, filler.maxlen) == ("run", "bert", 32)
    from_run = filler(texts)
    assert fill_mask(pretrained["google"], texts) == from_run
    assert fill_mask(pretrained["hf"], texts) == from_run


@pytest.mark.slow  # trains
def test_demo_pretrains_then_fills(tmp_path, capsys, monkeypatch):
    from kerasbert.serving import fill_mask_cli

    monkeypatch.setitem(fill_mask_cli.DEMO_FILL_MASK, "sentences", 96)
    for _ in range(2):  # again into the same folder
        assert main(["demo", "--task", "fill-mask", "--out", str(tmp_path), "--epochs", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    rows = [json.loads(line) for line in printed.splitlines() if line.startswith("{")]
    assert [row["text"] for row in rows] == fill_mask_cli.DEMO_FILL_MASK["texts"] * 2
    assert all(MASK_TOKEN not in row["filled"] and len(row["pieces"][0]) == 3 for row in rows)
    assert os.path.isfile(tmp_path / "fill-mask" / "hf" / "model.safetensors")


def test_cli_errors_answer_without_tensorflow(oracle, tmp_path):
    import subprocess
    import sys

    folder = oracle["folders"]["bert"]
    (tmp_path / "texts.txt").write_text("很好\n", encoding="utf-8")
    cases = {"--text 1: expected a text with [MASK]": ["--text", "很好"],
             "texts.txt: row 1: expected a text with [MASK]": ["--input", str(tmp_path / "texts.txt")],
             "top_k: expected an integer >= 1, found 0": ["--text", "很[MASK]", "--top-k", "0"],
             "model: expected a family with a masked-LM head": ["--text", "很[MASK]", "--model", "gpt2"]}
    code = ("import json, sys; from kerasbert.cli import main; "
            f"codes = [main(['fill-mask', {folder!r}, *argv]) for argv in {list(cases.values())!r}]; "
            "print(json.dumps([codes, 'tensorflow' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert json.loads(done.stdout.splitlines()[-1]) == [[2] * len(cases), False], done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("kerasbert fill-mask: error: ")]
    assert len(lines) == len(cases)
    for message, line in zip(cases, lines, strict=True):
        assert message in line, (message, line)
    assert "a GPT predicts the next token" in lines[-1]
