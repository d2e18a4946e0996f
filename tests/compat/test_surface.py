"""bert4keras 0.11.5's whole public surface ports: each public class and function of its six modules (listed by
bert4keras itself in the oracle's environment: tests/oracle_surface.py) is in the same ``kerasbert.compat`` module,
or docs/from-bert4keras.md names it in a row with the Keras 3 lines that replace it and a test proves them."""

from __future__ import annotations

import importlib
import os
import re

import pytest

import helpers

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, "docs", "from-bert4keras.md")

# bert4keras's public values that are neither classes nor functions, which scripts import all the same
VALUES = {"backend": ["keras", "K", "is_tf_keras", "do_recompute", "custom_objects"], "layers": ["custom_objects"],
          "optimizers": ["custom_objects"], "snippets": ["is_py2", "uniout", "Hook"]}

# "module.name" -> the test (file::function, under tests/) proving the guide's Keras 3 replacement; only for names
# Keras 3 itself rules out
REPLACED = {"models.data_parallel": "compat/test_examples_optimizers.py::test_iflytek_under_a_mirrored_strategy"}


@pytest.fixture(scope="module")
def surface(tmp_path_factory) -> dict[str, list[str]]:
    names = helpers.run_bert4keras("oracle_surface.py", {}, str(tmp_path_factory.mktemp("surface")))
    return {module: sorted({*map(str, found), *VALUES.get(module, [])}) for module, found in names.items()}


def _guide_rows() -> list[str]:
    with open(GUIDE, encoding="utf-8") as f:
        return [line for line in f if line.startswith("| `")]


def _test_exists(where: str) -> bool:
    path, function = where.split("::")
    with open(os.path.join(ROOT, "tests", path), encoding="utf-8") as f:
        return re.search(rf"^def {re.escape(function)}\(", f.read(), re.M) is not None


def test_the_oracle_lists_the_six_modules(surface):
    assert set(surface) == {"models", "layers", "backend", "snippets", "tokenizers", "optimizers"}
    assert {"build_transformer_model", "BERT", "Transformer"} <= set(surface["models"])
    assert {"WebServing", "AutoRegressiveDecoder", "uniout"} <= set(surface["snippets"])
    assert sum(map(len, surface.values())) > 120


def test_every_public_name_ports(surface):
    missing = []
    for module, names in surface.items():
        compat = importlib.import_module(f"kerasbert.compat.{module}")
        missing += [f"{module}.{name}" for name in names if not hasattr(compat, name)
                    and f"{module}.{name}" not in REPLACED]
    assert missing == [], f"{len(missing)} bert4keras names kerasbert.compat lacks: {missing}"


def test_each_replacement_is_documented_and_tested():
    rows = _guide_rows()
    for name, where in REPLACED.items():
        row = [r for r in rows if f"`{name}`" in r or f"`{name}(" in r]
        assert row and "not supported" not in row[0], f"{name}: no row in docs/from-bert4keras.md with a replacement"
        assert _test_exists(where), f"{name}: {where} does not exist"


def test_the_guide_marks_nothing_unsupported(surface):
    """A row saying "not supported" for a name bert4keras has is a name a porting user can hit."""
    unsupported = [row.split("|")[1].strip() for row in _guide_rows() if "not supported" in row]
    assert unsupported == []


# bert4keras 0.11.5's examples/ folder (its pip package ships none of them)
EXAMPLES = """basic_extract_features basic_gibbs_sampling_via_mlm basic_language_model_cpm_lm
basic_language_model_gpt2_ml
basic_language_model_nezha_gen_gpt basic_make_uncased_model_cased basic_masked_language_model
basic_simple_web_serving_simbert task_conditional_language_model task_iflytek_adversarial_training
task_iflytek_bert_of_theseus task_iflytek_gradient_penalty task_iflytek_multigpu task_image_caption task_language_model
task_language_model_chinese_chess task_question_answer_generation_by_seq2seq task_reading_comprehension_by_mlm
task_reading_comprehension_by_seq2seq task_relation_extraction task_relation_extraction_gplinker
task_sentence_similarity_lcqmc task_sentiment_albert task_sentiment_integrated_gradients
task_sentiment_virtual_adversarial_training task_seq2seq_ape210k_math_word_problem task_seq2seq_autotitle
task_seq2seq_autotitle_csl task_seq2seq_autotitle_csl_mt5 task_seq2seq_autotitle_multigpu
task_sequence_labeling_cws_crf task_sequence_labeling_ner_crf""".split()


@pytest.mark.parametrize("example", EXAMPLES)
def test_each_example_is_ported_run_and_listed(example):
    """Its fixture under bert4keras's file name, the guide's row naming the test module, which runs it."""
    assert len(EXAMPLES) == 32
    assert os.path.exists(os.path.join(ROOT, "tests", "fixtures", "bert4keras_examples", example + ".py"))
    row = [r for r in _guide_rows() if r.startswith(f"| `{example}.py`")]
    assert len(row) == 1, f"{example}: one row in the guide's examples table"
    module = re.search(r"`(test_\w+\.py)`", row[0]).group(1)
    with open(os.path.join(ROOT, "tests", "compat", module), encoding="utf-8") as f:
        assert f'"{example}"' in f.read(), f"{module} does not run {example}"
