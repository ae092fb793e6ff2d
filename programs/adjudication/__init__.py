"""The adjudication kernel: CLEAR's procedure over typed records, with no LM, DSPy, retrieval or backbone in reach.

Read it in this order: `procedure.py` (`adjudicate`: verifier, bounded follow-up, then the guard or the audit),
`actions.py` (the actions interface the LM's judgements come through, the mechanisms, the result, the state
of one adjudication), `rules.py` (every decision rule as a pure function, quoting the paper), `contest.py` (the
override guard and the challenge audit: one contest, two policies), `calibrated.py` (the verifier that reads the
route off the pathways' pooled option probabilities), `learned.py` (the learned verifier), and `text_agreement.py`
(free-text agreement by concepts).
tests/test_layers.py keeps the heavy packages out, and tests/programs/test_kernel.py that importing it loads no
DSPy.
"""

from clearmed.programs.adjudication.actions import (
    ALL_MECHANISMS,
    Adjudicated,
    AdjudicationActions,
    Mechanisms,
)
from clearmed.programs.adjudication.procedure import adjudicate

__all__ = ["ALL_MECHANISMS", "Adjudicated", "AdjudicationActions", "Mechanisms", "adjudicate"]
