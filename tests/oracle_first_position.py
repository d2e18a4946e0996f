"""bert4keras's side of tests/modeling/test_first_position.py: tests/oracle_bert4keras.py's ``"bert"`` tasks and
tests/oracle_gpt.py's ``"gpt_checkpoint"`` and ``"gpt_predict"`` (its ``checkpoint`` and ``predict``), in one
subprocess. Never imported by the tests.

Usage: python oracle_first_position.py JOB.json (run by `helpers.run_bert4keras`, with TF_KERAS=1 and
TF_USE_LEGACY_KERAS=1).
"""

import sys

if __name__ == "__main__":
    import oracle_bert4keras
    import oracle_gpt

    oracle_bert4keras.main(sys.argv[1], {"bert": oracle_bert4keras.bert_outputs,
                                         "gpt_checkpoint": oracle_gpt.checkpoint, "gpt_predict": oracle_gpt.predict})
