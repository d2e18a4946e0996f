"""The values kerasbert's options may take and their defaults, each named once, without TensorFlow.

The CLI reads them to answer ``--help`` and to reject a bad argument before TensorFlow starts; the modules that
act on them (`kerasbert.modeling.optimizers.WarmupSchedule`, `kerasbert.modeling.crf.ConditionalRandomField`,
`kerasbert.finetune.tasks`) import them from here.

Example:
>>> SCHEDULES[0], CRF_LR_MULTIPLIER
('cosine', 1000.0)
"""

from __future__ import annotations

TASK_NAMES = ("cls", "ner")  # the tasks of ``kerasbert train --task``
SCHEDULES = ("cosine", "linear", "constant")  # the decays after warmup of ``--schedule``; the first is the default
# the CRF's transitions learn this many times faster than the encoder in kerasbert's tagging head (as in bert4keras's
# NER example): at the encoder's rate they barely move, and the CRF decodes almost as argmax would
CRF_LR_MULTIPLIER = 1000.0
