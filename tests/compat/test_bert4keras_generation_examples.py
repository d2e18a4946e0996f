"""bert4keras 0.11.5's generation examples, ported by renaming imports, give bert4keras's losses and texts.

The scripts are run by tests/oracle_examples.py under both packages, from the same random Google checkpoint
(dropout 0) and the same files written here (GBK novels, news files with a title line, a JSON-lines corpus of
synonyms), with NumPy's global generator seeded the same way before each script: the scripts'
``np.random.shuffle`` and samplers then draw the same numbers in both. Beam search is compared as text; sampling
after the same seed too.
"""

from __future__ import annotations

import json
import os

import numpy as np
import oracle_examples
import pytest
from oracle_examples import CFG, CHARS, close, same

pytestmark = pytest.mark.slow

MT5 = {"vocab_size": 200, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
       "attention_head_size": 16, "intermediate_size": 64, "hidden_act": ["gelu", "linear"], "hidden_dropout_prob": 0.0,
       "attention_probs_dropout_prob": 0.0, "initializer_range": 0.02, "relative_attention_num_buckets": 32}
# train_on_batch steps before fit: one traces the step once (a second batch length would trace it again);
# the updates' parity shows in what follows it (fit's losses, the outputs after training)
STEPS = 1


def write_data(folder: str, seed: int = 0) -> dict:
    """The files each script reads, written under ``folder``, and each script's ``data`` argument."""
    rng = np.random.default_rng(seed)

    def text(low, high):
        return "".join(CHARS[i] for i in rng.integers(0, len(CHARS), int(rng.integers(low, high))))

    def write(path, content, encoding="utf-8"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding=encoding) as f:
            f.write(content)

    for book in range(2):  # the example's /root/金庸/*/*.txt: sentences ending in 。, lines and full-width spaces
        # 28 samples, 7 full batches: `fit`'s epoch loss without labels is the mean of the batches' losses in
        # tf-keras and weighted by batch size in Keras 3, the same only when no batch is partial
        lines = ["\u3000\u3000" + "".join(text(3, 9) + "。" for _ in range(5)) for _ in range(3)]
        write(os.path.join(folder, "novels", f"book{book}", "text.txt"), "\r\n".join(lines), encoding="gbk")
    for i in range(12):  # the example's THUCNews files: the title, then the content
        write(os.path.join(folder, "news", f"{i}.txt"), text(3, 6) + "\n" + text(10, 20) + "，" + text(5, 12) + "。")
    with open(os.path.join(folder, "synonyms.json"), "w", encoding="utf-8") as f:  # the example's data_sample.json
        for _ in range(6):
            f.write(json.dumps({"text": text(4, 10), "synonyms": [text(4, 10) for _ in range(3)]},
                               ensure_ascii=False) + "\n")
    return {
        "task_language_model": {"novels": os.path.join(folder, "novels", "*", "*.txt"),
                                # one text sampled n times; a second is drawn so that the texts after stay
                                "show": [text(4, 8), text(4, 8)][:1], "seed": 1, "n": 2},
        "task_seq2seq_autotitle": {"txts": os.path.join(folder, "news", "*.txt"),
                              "show": [text(10, 20), text(10, 20) + "，" + text(4, 8)]},
        "basic_language_model_nezha_gen_gpt": {"show": [text(2, 5), text(2, 5)], "end": "。", "maxlen": 12,
                                               "minlen": 4, "seed": 3},
        "simbert": {"corpus_path": os.path.join(folder, "synonyms.json"), "seed": 2, "query": text(4, 8),
                    "bank": [text(4, 10) for _ in range(6)]},
    }


def write_random(folder: str, family: str, cfg: dict, seed: int) -> tuple[str, str]:
    """A random checkpoint of a GPT or T5 family in bert4keras's names (kerasbert's `save_google_checkpoint`, which
    bert4keras reads back: tests/modeling/test_gpt.py, test_t5.py) and its config: their paths."""
    from kerasbert import build_transformer_model, save_google_checkpoint

    model = build_transformer_model(config=cfg, model=family, verbose=False)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0.0, 0.3, w.shape).astype("float32") + ("gamma" in w.path) for w in model.weights])
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return os.path.join(folder, "config.json"), save_google_checkpoint(model, os.path.join(folder, "model.ckpt"))


def write_generative(work: str, vocab: str) -> dict:
    """The GPT2-ML example's checkpoint (over the test's vocabulary) and CPM's (GPT-2 over a SentencePiece model
    whose id 3 is ``<cls>``, the newline), with each script's ``data``."""
    import sentencepiece

    import helpers

    spm = helpers.write_sentencepiece(work, vocab_size=160, user_defined_symbols=["<cls>"])
    size = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    lines = ["我们今天去北京", "天气很好", "自然语言处理是人工智能的一个方向", "中华人民共和国"]
    gpt2_ml = write_random(os.path.join(work, "gpt2_ml"), "gpt2_ml", CFG, 7)
    cpm = write_random(os.path.join(work, "cpm"), "gpt2", {**CFG, "vocab_size": size}, 8)
    return {
        "basic_language_model_gpt2_ml": {"paths": [*gpt2_ml, vocab], "show": ["".join(CHARS[:3]),
                                         "".join(CHARS[5:9])], "end": "。", "maxlen": 10, "minlen": 3, "seed": 4},
        "basic_language_model_cpm_lm": {"paths": [*cpm, spm], "queries": ["\n".join(lines[:3]) + "\n",
                                        lines[3] + " 北京\n天气"], "maxlen": 8, "seed": 5},
    }


def write_mt5(work: str, seed: int = 0) -> dict:
    """The mT5 example's files: a random ``mt5.1.1`` checkpoint over a larger vocabulary, the SentencePiece model
    of the ids kept (``keep_tokens``: T5's ``<pad>``, ``</s>``, ``<unk>`` then others, as the example's reduced
    Chinese model), its keep_tokens JSON and (title, content) TSV rows; the script's ``data``."""
    import sentencepiece

    import helpers

    folder, rng = os.path.join(work, "mt5"), np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    spm = helpers.write_sentencepiece(folder, vocab_size=120)
    size = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    keep_tokens = [0, 1, 2, *sorted(int(i) for i in rng.choice(np.arange(3, MT5["vocab_size"]), size - 3, False))]
    paths = [*write_random(folder, "mt5.1.1", MT5, 9), spm]

    def text(low, high):
        chinese = "".join(rng.choice(list(helpers.SP_CHINESE), int(rng.integers(low, high))))
        return chinese + " " + " ".join(rng.choice(helpers.SP_ENGLISH, int(rng.integers(1, 4))))

    files = {"keep_tokens": json.dumps(keep_tokens)}
    for name, rows in (("train", 12), ("valid", 1)):  # 12 rows, 3 full batches: no partial batch
        files[name] = "".join(f"{text(2, 6)}\t{text(8, 20)}\n" for _ in range(rows))
    data = {"paths": paths}
    for name, content in files.items():
        data[name] = os.path.join(folder, f"{name}.{'json' if name == 'keep_tokens' else 'tsv'}")
        with open(data[name], "w", encoding="utf-8") as f:
            f.write(content)
    return {"task_seq2seq_autotitle_csl_mt5": data}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(kerasbert's results, bert4keras's results) per script; bert4keras runs alongside in a subprocess."""
    work = str(tmp_path_factory.mktemp("bert4keras_generation_examples"))
    paths = oracle_examples.write_bert(work)
    data = {**write_data(work), **write_generative(work, paths[2]), **write_mt5(work)}
    return oracle_examples.run_examples(data, paths, work, STEPS)


def test_language_model(results):
    """application='lm': the same shuffled samples and batches, losses, and continuations sampled after one seed."""
    ours, theirs = results[0]["task_language_model"], results[1]["task_language_model"]
    for key in ("samples", "keep_tokens", "token_ids", "shown"):
        same(ours[key], theirs[key])
    assert len(ours["keep_tokens"]) == CFG["vocab_size"] - 1  # [MASK] dropped by simplified=True
    assert len(ours["step_losses"]) == STEPS
    for key in ("step_losses", "epoch_loss", "lowest"):
        close(ours[key], theirs[key])


def test_seq2seq_autotitle(results):
    """application='unilm': the same losses, next-token probabilities, the Evaluator's titles and beam search's."""
    ours, theirs = results[0]["task_seq2seq_autotitle"], results[1]["task_seq2seq_autotitle"]
    for key in ("keep_tokens", "token_ids", "segment_ids", "shown", "beams"):
        same(ours[key], theirs[key])
    assert ours["segment_ids"].any()  # the titles: the part the loss reads
    assert len(ours["step_losses"]) == STEPS
    for key in ("step_losses", "epoch_loss", "lowest", "probas"):
        close(ours[key], theirs[key])


def test_basic_language_model_nezha_gen_gpt(results):
    """A language model with no segment input continues texts by top-p sampling: the same next-token
    probabilities, and the same continuations after one seed, each at least ``minlen`` tokens long."""
    ours, theirs = results[0]["basic_language_model_nezha_gen_gpt"], results[1]["basic_language_model_nezha_gen_gpt"]
    same(ours["shown"], theirs["shown"])
    close(ours["probas"], theirs["probas"])
    assert ours["shown"].shape == (2, 2) and all(len(text) >= 2 + 4 for text in ours["shown"].ravel())


@pytest.mark.parametrize("name", ["basic_language_model_gpt2_ml", "basic_language_model_cpm_lm"])
def test_gpt_language_models(results, name):
    """GPT2-ML over WordPiece, and CPM (GPT-2 over a SentencePiece model with jieba's words): the same next-token
    probabilities and token ids, and the same texts sampled after one seed."""
    ours, theirs = results[0][name], results[1][name]
    same(ours["shown"], theirs["shown"])
    close(ours["probas"], theirs["probas"])
    if "token_ids" in ours:
        same(ours["token_ids"], theirs["token_ids"])
    assert all(len(text) > 0 for text in ours["shown"].ravel())


def test_task_seq2seq_autotitle_csl_mt5(results):
    """mT5 built with return_keras_model=False: its model trains with a loss masked by the decoder's own Keras mask,
    its encoder and decoder (the same weights) title by beam search. The same losses, encoder outputs, decoder
    probabilities, and titles (the Evaluator's, beam topk 1 and 2) as bert4keras."""
    ours, theirs = results[0]["task_seq2seq_autotitle_csl_mt5"], results[1]["task_seq2seq_autotitle_csl_mt5"]
    for key in ("keep_tokens", "c_token_ids", "t_token_ids", "parts", "shown", "greedy", "beams"):
        same(ours[key], theirs[key])
    titles = ours["t_token_ids"]
    assert (titles[:, 0] == 0).all() and (titles[:, 1:] == 0).any()  # T5's start id 0, then padding the mask drops
    assert list(ours["parts"]) == ["T5_Encoder", "T5_Decoder"]
    assert len(ours["step_losses"]) == STEPS
    for key in ("step_losses", "epoch_loss", "probas"):
        close(ours[key], theirs[key])
    # after four Adam steps: a weight whose gradient is near 0 moves by lr * g / (|g| + eps) on either side, where a
    # rounding in g shows, so the encoder's output is compared more loosely
    close(ours["encoded"], theirs["encoded"], atol=2e-3)


def test_simbert(results):
    """SimBERT: the same two loss terms (add_metric), the same sampled synonyms ranked by the encoder, the same
    vectors and retrieval. The total is their sum over the batch: Keras 3 sums a per-example loss that a loss
    layer adds and reports that, tf-keras reports its mean (both step on the sum)."""
    ours, theirs = results[0]["simbert"], results[1]["simbert"]
    for key in ("token_ids", "segment_ids", "some_samples", "synonyms", "retrieved"):
        same(ours[key], theirs[key])
    batch = len(ours["token_ids"])
    close(ours["step_losses"][:, 1:], theirs["step_losses"][:, 1:])  # seq2seq_loss, similarity_loss
    close(ours["step_losses"][:, 0], batch * theirs["step_losses"][:, 0])
    close(ours["epoch_loss"][1:], theirs["epoch_loss"][1:])
    close(ours["epoch_loss"][0], batch * theirs["epoch_loss"][0])
    close(ours["vecs"], theirs["vecs"])
    close(ours["similarities"], theirs["similarities"])
    assert len(ours["synonyms"]) == 5 and len(ours["retrieved"]) == 3

