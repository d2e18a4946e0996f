"""Continued pretraining: `pretrain` trains a BERT on raw text with the ``mlm`` task (`kerasbert.finetune.mlm`:
whole-word masked LM, and next sentence prediction with ``nsp``).

`pretrain` trains with `kerasbert.finetune.training.train` (its run folder, resume, strategies, mixed precision and
gradient accumulation) and writes the best model as a Google checkpoint (``OUT/google``, which
``kerasbert train --checkpoint``, bert4keras and `kerasbert.build_transformer_model` load) and a Hugging Face folder
(``OUT/hf``, which keras-hub and transformers load).

Example:
>>> import tempfile, os
>>> from kerasbert.finetune.demo_data import write_demo_data
>>> data = write_demo_data(tempfile.mkdtemp(), n_train=48, n_dev=8, n_test=8)
>>> corpus = os.path.join(tempfile.mkdtemp(), "corpus.txt")
>>> texts = [line.split("\\t")[0] for line in open(data["cls_train"], encoding="utf-8").read().splitlines()[1:]]
>>> _ = open(corpus, "w", encoding="utf-8").write("\\n\\n".join(texts))
>>> result = pretrain(corpus, tempfile.mkdtemp(), vocab=data["vocab"], epochs=1, batch_size=8, verbose=0)
>>> sorted(os.listdir(result["google"]))[:2], "model.safetensors" in os.listdir(result["hf"])
(['bert_config.json', 'bert_model.ckpt.data-00000-of-00001'], True)
"""

from __future__ import annotations

import os

from kerasbert.files import copy_file
from kerasbert.finetune.args import check_corpus, pretrain_options
from kerasbert.finetune.runs import VOCAB_FILES, Run, vocab_name
from kerasbert.finetune.training import train
from kerasbert.modeling.models import build_transformer_model
from kerasbert.weights.google import save_google_checkpoint
from kerasbert.weights.hf import save_hf_checkpoint

__all__ = ["pretrain"]


def pretrain(data: str, out: str, *, checkpoint: str | None = None, dev: str | None = None, resume: bool = False,
             overwrite: bool = False, verbose: int = 1, **options) -> dict:
    """Continue pretraining a BERT with (whole-word) masked LM on raw text; the run folder ``out`` also holds the
    best model as a Google checkpoint (``out/google``) and a Hugging Face folder (``out/hf``).

    Args:
        data: str. the corpus: a plain-text file (a sentence a line, a blank line between documents), a JSONL
            file (``{"text": ...}`` a document), a glob of such files (streamed), or a ``kerasbert prepare`` folder.
        out: str. the run folder (new or empty unless ``resume`` or ``overwrite``).
        checkpoint: str or None. the Google checkpoint or Hugging Face folder to start from (None: random weights).
        dev: str or None. held-out documents: their masked-LM loss and accuracy pick the best epoch.
        resume, overwrite, verbose: as `kerasbert.finetune.training.train`.
        **options: the other `kerasbert.finetune.args.TrainArgs` fields; `PRETRAIN_DEFAULTS` where not given, and
            the masking options ``mask_rate``, ``mask_replace``, ``mask_random``, ``max_predictions``,
            ``whole_word``.

    Returns:
        dict. `train`'s result, with the paths ``google`` and ``hf``.
    """
    if not resume:
        check_corpus(data)
    given = pretrain_options(resume, {**options, "checkpoint": checkpoint, "dev": dev})
    result = train("mlm", data, out, resume=resume, overwrite=overwrite, verbose=verbose, **given)
    if result.get("chief") is False:
        return result
    return {**result, **_write_checkpoints(Run(out))}


def _write_checkpoints(run: Run) -> dict[str, str]:
    """The run's best model as a Google checkpoint (``google/``, where its family has that form) and a Hugging Face
    folder (``hf/``, with the run's ``vocab.txt`` or ``tokenizer.json``), with the pooler the run started from
    (masked-LM training leaves it as it was; BERT checkpoints and keras-hub have one)."""
    from kerasbert.modeling import families
    from kerasbert.modeling.config import resolve_config
    from kerasbert.modeling.final_layers import FLAGS

    args = run.read_json("args.json")
    family = families.resolve(args.get("model"), resolve_config(run.file("bert_config.json")))
    full = build_transformer_model(run.file("bert_config.json"), args.get("checkpoint"), model=args.get("model"),
                                   with_pool="with_pool" in FLAGS[family.heads], with_nsp=bool(args.get("nsp")),
                                   with_mlm=True, verbose=False)
    for layer in run.load_model().layers:
        if layer.weights:
            full.get_layer(layer.name).set_weights(layer.get_weights())
    vocab = vocab_name(args.get("vocab") or VOCAB_FILES[0])
    written = {}
    if families.of_model(full).checkpoint:  # the Hugging Face families have no Google TF1 form
        save_google_checkpoint(full, run.file("google"))
        for name in ("bert_config.json", vocab):
            copy_file(run.file(name), run.file(f"google/{name}"))
        written["google"] = run.file("google")
    if vocab == VOCAB_FILES[0]:
        return {**written, "hf": save_hf_checkpoint(full, run.file("hf"), vocab=run.file(vocab))}
    folder = save_hf_checkpoint(full, run.file("hf"))
    copy_file(run.file(vocab), os.path.join(folder, vocab))
    return {**written, "hf": folder}
