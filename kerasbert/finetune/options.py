"""The options of a task (`TaskOptions`): how its files are read and its head is built.

`kerasbert.finetune.args.TrainArgs` holds them among the arguments of ``kerasbert train`` and each
`kerasbert.finetune.task_base.Task` is made of them, so both stand on this module, which imports neither
TensorFlow nor the tasks.

Example:
>>> TaskOptions(crf=True).task_options()["crf"]
True
"""

from __future__ import annotations

import dataclasses

from kerasbert.choices import CRF_LR_MULTIPLIER, TARGET_MAXLEN

__all__ = ["TASK_OPTIONS", "TaskOptions"]


@dataclasses.dataclass(kw_only=True)
class TaskOptions:
    """The options of a task: how its files are read and its head is built. `kerasbert.finetune.args.TrainArgs`
    holds them among the arguments of ``kerasbert train`` (flat in ``args.json``, one flag each); each
    `kerasbert.finetune.task_base.Task` is made of them.

    Args:
        text: str or int or None. the text field (classification files).
        text_b: str or int or None. the second text field, for pairs.
        label: str or int or None. the label field.
        scheme: str or None. NER files' tag scheme (detected when None).
        strict: bool. NER: an ``I-`` tag with no entity before it is an error instead of being repaired; qa: an
            answer not at its ``answer_start`` is an error instead of being moved to where its text is.
        crf: bool. NER: a CRF on the tagging head.
        bilstm_units: int or None. NER: a BiLSTM before the tagging head.
        dropout: float or None. dropout before the head's Dense.
        crf_lr_multiplier: float. NER: the CRF transitions' learning rate over the optimizer's.
        target_maxlen: int. seq2seq: the most word pieces generated (bert4keras's decoder ``maxlen``).
        beams: int. seq2seq: the beams of the beam search that generates (1: greedy).
        stride: int or None. the tasks of `kerasbert.choices.STRIDE_TASKS`: split a text longer than ``maxlen`` into
            windows sharing this many word pieces and merge their predictions (`kerasbert.text.windows`); None cuts it
            at ``maxlen``.
        pooling: str or None. sim: how a text becomes its vector, one of `kerasbert.choices.SIM_POOLINGS` (None:
            the first, ``first_last_avg``).
        sim_loss: str or None. sim: ``cosent`` or ``in_batch`` (None: settled by the training labels,
            `kerasbert.finetune.sim.SimilarityTask.label_set`).
        mask_rate, mask_replace, mask_random: float. mlm: the share of word pieces predicted, and of those the
            share replaced by ``[MASK]`` and by a random piece (the rest kept), `kerasbert.text.masking.MaskingRule`.
        max_predictions: int or None. mlm: the most pieces predicted in a row (None: as many as the rate gives).
        whole_word: bool. mlm: mask whole Chinese words (cut by jieba) rather than single characters.
        nsp: bool. mlm: rows are sentence pairs and the model also predicts whether the second follows the first
            (next sentence prediction, `kerasbert.text.pairs`).
        pre_tokenize: str or None. cls and seq2seq: ``"jieba"`` cuts each text into words before its word pieces, so
            a vocabulary of whole words (RoFormer's, T5 PEGASUS's) reads them (`kerasbert.text.pre_tokenize`); None:
            word pieces alone.
        max_query_length: int. qa: the most word pieces of a question (a longer one is cut).
        max_answer_length: int. qa: the most word pieces of a predicted answer.
        null_answers: bool or None. qa: a question may have no answer in its context (SQuAD 2.0), predicted where
            the null score beats the best span's (None: settled by the training data, true where a question has no
            answer, `kerasbert.finetune.qa.QaTask.label_set`).
        label_separator: str. multilabel: what separates the labels of a TSV or CSV label column.
        label_scale: float or None. rerank: what the labels are divided by to lie in [0, 1], the targets of its
            binary cross-entropy (None: settled by the training data, its largest label,
            `kerasbert.finetune.rerank.RerankTask.label_set`).

    Example:
    >>> import argparse
    >>> TaskOptions.of(argparse.Namespace(task="ner", crf=True, out="run")).crf
    True
    """

    text: str | int | None = None
    text_b: str | int | None = None
    label: str | int | None = None
    scheme: str | None = None
    strict: bool = False
    crf: bool = False
    bilstm_units: int | None = None
    dropout: float | None = None
    crf_lr_multiplier: float = CRF_LR_MULTIPLIER
    target_maxlen: int = TARGET_MAXLEN
    beams: int = 1
    stride: int | None = None
    pooling: str | None = None
    sim_loss: str | None = None
    mask_rate: float = 0.15
    mask_replace: float = 0.8
    mask_random: float = 0.1
    max_predictions: int | None = None
    whole_word: bool = True
    nsp: bool = False
    pre_tokenize: str | None = None
    max_query_length: int = 64
    max_answer_length: int = 30
    null_answers: bool | None = None
    label_separator: str = ","
    label_scale: float | None = None

    @classmethod
    def of(cls, source) -> TaskOptions:
        """The task options ``source`` (`kerasbert.finetune.args.TrainArgs`, a task, or a namespace holding some of
        them) holds; the defaults for those it lacks."""
        return cls(**{name: getattr(source, name) for name in TASK_OPTIONS if hasattr(source, name)})

    def task_options(self) -> dict:
        """These options by name, as `kerasbert.finetune.tasks.get_task` takes them."""
        return {name: getattr(self, name) for name in TASK_OPTIONS}


TASK_OPTIONS = tuple(field.name for field in dataclasses.fields(TaskOptions))
