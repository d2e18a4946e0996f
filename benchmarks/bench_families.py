"""The Hugging Face encoder families of ``bench.py --families``: kerasbert's ``roberta_en``, ``xlm_roberta``,
``distilbert`` and ``deberta_v3`` against keras-hub's ``RobertaBackbone``, ``XLMRobertaBackbone``,
``DistilBertBackbone`` and ``DebertaV3Backbone``, inference.

Each family is a pair of workers, one per library, built from one config (the published base sizes; `--quick`: a
tiny one) with random weights of the same shapes (a step's time does not depend on their values), run on the same
random ids, batch and length, and stepped in interleaved rounds as ``bench.py`` steps BERT's workers. kerasbert's
model is what ``build_transformer_model(config=..., model=FAMILY)`` gives (segment ids of 0 where it takes them);
keras-hub's backbone gets ``token_ids`` and an all-true ``padding_mask`` (the ids hold no padding). The target:
kerasbert at least as fast as keras-hub, family by family.
"""

from __future__ import annotations

import time

from benchmarks.bench_workers import _inputs, _set_policy, _timer

# kerasbert family -> keras-hub backbone class
BACKBONES = {"roberta_en": "RobertaBackbone", "xlm_roberta": "XLMRobertaBackbone",
             "distilbert": "DistilBertBackbone", "deberta_v3": "DebertaV3Backbone"}
FAMILIES = tuple(BACKBONES)
# the published base sizes: roberta-base, xlm-roberta-base, distilbert-base-uncased, deberta-v3-base (positions:
# RoBERTa's and XLM-R's 514 hold 512 tokens after the padding id's offset)
_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
         "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
_SIZES = {"roberta_en": {"vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1},
          "xlm_roberta": {"vocab_size": 250002, "max_position_embeddings": 514, "type_vocab_size": 1,
                          "pad_token_id": 1},
          "distilbert": {"vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 0,
                         "num_hidden_layers": 6},
          "deberta_v3": {"vocab_size": 128100, "max_position_embeddings": 512, "type_vocab_size": 0}}
_TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
         "vocab_size": 128}
_OFFSET = {"roberta_en": 2, "xlm_roberta": 2}  # positions before the first token's: the padding id + 1


def variant_names(family: str) -> tuple[str, str]:
    """The two workers of a family: kerasbert's and keras-hub's.

    Example:
    >>> variant_names("distilbert")
    ('kerasbert-distilbert', 'keras-hub-distilbert')
    """
    return f"kerasbert-{family}", f"keras-hub-{family}"


# bench.py's VARIANTS rows: name -> (worker, options)
VARIANTS = {name: (worker, {"model": family}) for family in FAMILIES
            for name, worker in zip(variant_names(family), ("kerasbert_family", "keras_hub_family"), strict=True)}


def family_config(family: str, quick: bool) -> dict:
    """The config both libraries build ``family`` from: its base sizes, or tiny ones with ``quick``.

    Example:
    >>> family_config("xlm_roberta", quick=True)["max_position_embeddings"], family_config("distilbert", False)[
    ...     "num_hidden_layers"]
    (66, 6)
    """
    sizes = {**_BASE, **_SIZES[family]}
    if quick:
        sizes.update(_TINY, num_hidden_layers=2, max_position_embeddings=64 + _OFFSET.get(family, 0))
    return sizes


def parse_families(text: str | None) -> list[str]:
    """``--families``: a comma-separated list of `FAMILIES`, or ``all``; an empty list without the option.

    Example:
    >>> parse_families("all") == list(FAMILIES), parse_families(None)
    (True, [])
    """
    if not text:
        return []
    names = list(FAMILIES) if text == "all" else text.split(",")
    unknown = [name for name in names if name not in FAMILIES]
    if unknown:
        raise ValueError(f"--families: expected all or some of {', '.join(FAMILIES)}, found {', '.join(unknown)}")
    return names


def work_kerasbert_family(cfg, opts, mode, batch, seq, steps, warmup):
    """kerasbert's ``predict`` on ``build_transformer_model(config=cfg, model=FAMILY)``."""
    from kerasbert import build_transformer_model  # before Keras: it turns oneDNN on (kerasbert.perf.onednn)

    _set_policy(opts.get("policy"))
    import keras
    import numpy as np

    ids, _, _ = _inputs(cfg, steps + warmup, batch, seq)
    start = time.perf_counter()
    model = build_transformer_model(config=cfg, model=opts["model"], verbose=False)
    build = time.perf_counter() - start
    inputs = [ids, np.zeros_like(ids)][:len(model.inputs)]  # one segment: RoBERTa's single type, none elsewhere
    timer = _timer(keras.callbacks.Callback, mode)
    model.predict(inputs, batch_size=batch, callbacks=[timer], verbose=0)
    return build, timer.times[warmup:]


def work_keras_hub_family(cfg, opts, mode, batch, seq, steps, warmup):
    """keras-hub's backbone of the family (`BACKBONES`), ``predict`` on the same ids."""
    _set_policy(opts.get("policy"))
    import keras
    import keras_hub
    import numpy as np

    ids, _, _ = _inputs(cfg, steps + warmup, batch, seq)
    family = opts["model"]
    start = time.perf_counter()
    backbone = getattr(keras_hub.models, BACKBONES[family])(
        vocabulary_size=cfg["vocab_size"], num_layers=cfg["num_hidden_layers"], num_heads=cfg["num_attention_heads"],
        hidden_dim=cfg["hidden_size"], intermediate_dim=cfg["intermediate_size"], dropout=cfg["hidden_dropout_prob"],
        max_sequence_length=cfg["max_position_embeddings"] - _OFFSET.get(family, 0))
    build = time.perf_counter() - start
    timer = _timer(keras.callbacks.Callback, mode)
    backbone.predict({"token_ids": ids, "padding_mask": np.ones_like(ids, dtype=bool)}, batch_size=batch,
                     callbacks=[timer], verbose=0)
    return build, timer.times[warmup:]


WORKERS = {"kerasbert_family": work_kerasbert_family, "keras_hub_family": work_keras_hub_family}


def report(results: dict, families: list[str], paired, target_line, paired_ratios) -> tuple[str, list[str]]:
    """The families' table (median step times, builds, × keras-hub) and their target lines; ``paired``,
    ``target_line`` and ``paired_ratios`` are ``bench.py``'s."""
    import statistics

    lines = ["| family | keras-hub backbone | kerasbert step s | keras-hub step s | × keras-hub | kerasbert build s "
             "| keras-hub build s |", "|---|---|---|---|---|---|---|"]
    checks = []
    for family in families:
        mine, hub = variant_names(family)
        if (mine, "infer") not in results or (hub, "infer") not in results:
            continue
        runs = {name: results[(name, "infer")] for name in (mine, hub)}
        step = {name: statistics.median(t for r in rs for t in r["times"]) for name, rs in runs.items()}
        build = {name: statistics.median(r["build_s"] for r in rs) for name, rs in runs.items()}
        ratio = paired(results, "infer", hub, mine)
        lines.append(f"| {family} | {BACKBONES[family]} | {step[mine]:.3f} | {step[hub]:.3f} | "
                     f"{ratio:.2f} | {build[mine]:.1f} | {build[hub]:.1f} |")
        checks.append(target_line(f"infer, {family}: kerasbert vs keras-hub's {BACKBONES[family]}", ratio, 1.0,
                                  rounds=paired_ratios(results, "infer", hub, mine)))
    return "\n".join(lines), [line for line in checks if line]
