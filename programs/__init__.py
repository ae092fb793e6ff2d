"""clearmed.programs: the DSPy programs and the adjudication procedure.

Public face: `CLEAR` (the composed program) and `LiveActions`, the single-pathway baselines (`SinglePathway`),
`adjudicate` with `AdjudicationActions`, `Adjudicated`, `Mechanisms`, the decision rules (`rules`) and
`ProgramSettings`. Modules whose names start with an underscore are the plumbing behind them (LM steps,
evidence gathering, parsing, rendering for prompts) and may change without notice.
"""

# What the command line and the optimizers use beyond the programs: the input budget, the run context a stage
# needs outside CLEAR (live replay), the option-set check, the prompt text of a question (teacher traces), and
# the calibrated verifier (replay recomputes it under the thresholds being tuned) with what it pools (the pooling
# weights' fit), and the letter-prior fit (tuning).
from clearmed.programs._answers import answer_format, format_options, parse_letters
from clearmed.programs._calibrated import POOL_FLOOR, calibrated_verify, high_quality_share, pool_inputs
from clearmed.programs._formatting import format_passages, render_question
from clearmed.programs._input_budget import over_budget
from clearmed.programs._letter_prior import fit_letter_priors
from clearmed.programs._run_context import Ledger, RunContext, activate
from clearmed.programs._task_adapters import gate_accepts
from clearmed.programs._verdict_rules import normalise_decision
from clearmed.programs.adjudication import ALL_MECHANISMS, Adjudicated, AdjudicationActions, Mechanisms, adjudicate
from clearmed.programs.baselines import SinglePathway
from clearmed.programs.clear import CLEAR, LiveActions
from clearmed.programs.settings import ProgramSettings
