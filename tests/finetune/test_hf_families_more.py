"""More of the Hugging Face encoder families on the user's paths: a sentence-transformers folder of XLM-R as
multilingual-e5 and bge-m3 ship it (prompts, mean or first-token pooling, padding id 1) against NumPy's pooling of
the encoder's sequence output; ``--stride`` windows on a RoBERTa tagger with a byte-level BPE ``tokenizer.json``, and
text pairs refused with a stride where every segment id is 0; a bf16 OpenVINO export of a RoBERTa classifier
answering as its run within bfloat16's rounding."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from test_hf_families_tasks import MAXLEN, SIZES, _keep_first, _predict, hf_folder
from tokenizers import Tokenizer

from kerasbert import build_transformer_model, cli, embed
from kerasbert.finetune.demo import DEMO_TEXTS, demo_files
from kerasbert.serving import precision as precisions

import hf_encoder_folders as encoders
import hf_tokenizer_files as tokenizer_files

E5_PROMPTS = {"query": "query: ", "passage": "passage: "}
TEXTS = tokenizer_files.mixed_sentences(5, seed=7) + [""]
ST_MAXLEN = 16
LONG = ["张伟去年加入了华为公司，李娜和王芳昨天去了北京，听说赵敏在腾讯公司上班，" * 2]


def _write(path: str, value) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def xlmr_st_folder(folder: str, pooling: str) -> str:
    """A sentence-transformers folder of XLM-R: a bare ``XLMRobertaModel`` (names without ``roberta.``), a Unigram
    ``tokenizer.json`` with XLM-R's layout, mean (multilingual-e5) or first-token (bge-m3) pooling, normalized."""
    rust = Tokenizer.from_file(os.path.join(tokenizer_files.write_unigram(folder), "tokenizer.json"))
    cfg = {**encoders.config("xlm_roberta"), "vocab_size": rust.get_vocab_size(),
           "max_position_embeddings": ST_MAXLEN + 2, "architectures": ["XLMRobertaModel"]}
    values = {name[len("roberta."):]: value for name, value in encoders.roberta_tensors(cfg, seed=3).items()
              if name.startswith("roberta.")}
    encoders.write(folder, cfg, values)
    mode = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token"}[pooling]
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    _write(os.path.join(folder, "modules.json"), modules)
    os.makedirs(os.path.join(folder, "2_Normalize"), exist_ok=True)
    _write(os.path.join(folder, "sentence_bert_config.json"), {"max_seq_length": ST_MAXLEN, "do_lower_case": False})
    _write(os.path.join(folder, "1_Pooling", "config.json"),
           {"word_embedding_dimension": cfg["hidden_size"], "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False, mode: True, "include_prompt": True})
    _write(os.path.join(folder, "config_sentence_transformers.json"),
           {"prompts": E5_PROMPTS, "default_prompt_name": None, "similarity_fn_name": "cosine"})
    return folder


def numpy_vectors(folder: str, texts: list[str], pooling: str) -> np.ndarray:
    """The ids ``tokenizers`` gives (cut at ``max_seq_length``, padded with id 1), the encoder's sequence output on
    them, pooled over the real tokens (mean) or taken at the first, unit length."""
    rust = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    rust.enable_truncation(ST_MAXLEN)
    rust.enable_padding(pad_id=1, pad_token="<pad>")
    ids = np.array([row.ids for row in rust.encode_batch(texts)], np.int32)
    model = build_transformer_model(folder, folder, verbose=False)
    sequence = np.asarray(model.predict(encoders.inputs(model, {"token_ids": ids, "segment_ids": 0 * ids}),
                                        verbose=0), np.float64)
    real = (ids != 1)[..., None]
    vectors = sequence[:, 0] if pooling == "cls" else (sequence * real).sum(1) / real.sum(1)
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_an_xlm_r_sentence_transformers_folder_embeds_prompted_texts_as_numpy_pools(tmp_path, pooling):
    folder = xlmr_st_folder(str(tmp_path / "st"), pooling)
    want = numpy_vectors(folder, ["query: " + text for text in TEXTS], pooling)
    np.testing.assert_allclose(embed(folder, TEXTS, prompt_name="query"), want, atol=1e-5)


# ------------------------------------------------------------------------------------------- RoBERTa runs
def _train(root: str, task: str, extra: list[str]) -> dict[str, str]:
    files = demo_files(task, os.path.join(root, task), seed=0)
    for split in ("train", "dev", "test"):
        _keep_first(files[split], SIZES[f"n_{split}"], task)
    folder = hf_folder("roberta_en", files, os.path.join(root, task, "hf"))
    out = os.path.join(root, task, "run")
    assert cli.main(["train", "--task", task, "--train", files["train"], "--dev", files["dev"], "--config", folder,
                     "--checkpoint", folder, "--vocab", folder, "--out", out, "--epochs", "1", "--batch-size", "8",
                     "--maxlen", str(MAXLEN // 2), "--quiet", *extra]) == 0, task
    return {**files, "run": out}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    root = str(tmp_path_factory.mktemp("roberta"))
    return {"ner": _train(root, "ner", ["--stride", "8"]), "cls": _train(root, "cls", [])}


@pytest.mark.slow
def test_a_roberta_tagger_with_a_stride_windows_long_texts_its_offsets_in_the_text(runs, tmp_path, caplog):
    run = runs["ner"]["run"]
    assert json.load(open(os.path.join(run, "args.json"), encoding="utf-8"))["stride"] == 8
    texts = LONG + DEMO_TEXTS["ner"][:2]
    for extra in ([], ["--stride", "4"]):
        rows = _predict(run, texts, str(tmp_path)) if not extra else _predict_with(run, texts, tmp_path, extra)
        assert [row["text"] for row in rows] == texts
        for row in rows:
            for entity in row["entities"]:
                assert row["text"][entity["start"]:entity["end"]] == entity["text"], row


def _predict_with(run: str, texts: list, tmp_path, extra: list[str]) -> list[dict]:
    source, output = str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl")
    with open(source, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(item if isinstance(item, dict) else {"text": item}, ensure_ascii=False) + "\n"
                     for item in texts)
    assert cli.main(["predict", run, "--input", source, "--output", output, *extra]) == 0
    return [json.loads(line) for line in open(output, encoding="utf-8")]


@pytest.mark.slow
def test_text_pairs_with_a_stride_are_refused_where_every_segment_id_is_0(runs, tmp_path, capsys):
    run, source = runs["cls"]["run"], tmp_path / "pairs.jsonl"
    source.write_text(json.dumps({"text": LONG[0], "text_b": "北京"}, ensure_ascii=False) + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    assert cli.main(["predict", run, "--input", str(source), "--output", str(output), "--stride", "4"]) == 2
    err = capsys.readouterr().err
    assert "--stride" in err and "text pairs" in err and err.count("\n") == 1, err
    assert not output.exists()


@pytest.mark.slow
def test_a_bf16_openvino_export_of_a_roberta_classifier_answers_as_its_run(runs, tmp_path):
    from kerasbert.serving.exported import predict_export

    run, out = runs["cls"]["run"], str(tmp_path / "bf16")
    argv = ["export", run, out, "--format", "openvino", "--precision", "bf16", "--accept-loss"]
    if not precisions.cpu_has_bf16():  # bf16 needs the CPU's bfloat16 units: refused, naming them
        assert cli.main(argv) == 2
        return
    assert cli.main(argv) == 0
    info = json.load(open(os.path.join(out, "kerasbert-export.json"), encoding="utf-8"))
    assert (info["format"], info["precision"], info["vocab_file"]) == ("openvino", "bf16", "tokenizer.json")
    texts = DEMO_TEXTS["cls"][:3]
    got, want = predict_export(out, texts), _predict(run, texts, str(tmp_path))
    for mine, theirs in zip(got, want, strict=True):
        assert set(mine["probabilities"]) == set(theirs["probabilities"])
        for label, p in theirs["probabilities"].items():
            assert abs(mine["probabilities"][label] - p) < 0.1, (mine, theirs)  # bfloat16's rounding
