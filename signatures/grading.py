"""Judge prompts for scoring free-text answers. The prompts live in the docstrings and field descriptions,
where DSPy optimizers can see them; the code that runs them and turns verdicts into scores is in `metrics/`.

* `GradeDiagnosis`, `GradeTreatment`: MedRBench outcome accuracy (one call per case; the judge compares the
  candidate with the reference). MedRBench's judge answers Correct/Wrong; ours adds `partially_correct` so the
  near misses are visible, and the MedRBench accuracy counts only `correct`. Deviation: MedRBench's treatment
  judge may also accept a plan that web-search evidence supports; that search step is not reproduced here.
* `GradeRubricItem`: HealthBench, one call per rubric criterion (simple-evals GRADER_TEMPLATE rules).
"""

from __future__ import annotations

import dspy

from clearmed.signatures.records.base import GradeVerdict


class GradeDiagnosis(dspy.Signature):
    """You are a medical expert grading a diagnosis against the reference diagnosis of a published case.

    Judge only the diagnosis itself, not its cause, work-up or treatment.
    - correct: the candidate names the same disease as the reference, including under an alias, a synonym or a
      more specific / equivalent name; a candidate that contains the reference diagnosis and also lists
      complications or coexisting conditions is still correct.
    - partially_correct: the candidate is close but not the same disease (e.g. the right organ or disease
      family, a broader category, or the reference appears only as one item of an undecided differential).
    - incorrect: a different disease, no diagnosis, or a contradiction of the reference.
    Give a short rationale naming what matches and what does not.
    """

    case: str = dspy.InputField(desc="the case presented to the candidate")
    reference_answer: str = dspy.InputField(desc="the reference (gold) diagnosis")
    candidate_answer: str = dspy.InputField(desc="the diagnosis to grade")
    verdict: GradeVerdict = dspy.OutputField()
    rationale: str = dspy.OutputField(desc="one or two sentences")


class GradeTreatment(dspy.Signature):
    """You are a medical expert grading a treatment plan against the reference treatment of a published case.

    - correct: the candidate's plan has the same meaning as the reference (same key interventions, drugs or
      procedures, allowing equivalent names), or contains the reference plan plus reasonable additional care.
    - partially_correct: the candidate includes some of the key reference interventions but misses or
      replaces others that matter, or is too vague to be sure it is the same plan.
    - incorrect: the key interventions differ, are missing, or would be inappropriate for this patient.
    Give a short rationale naming what matches and what does not.
    """

    case: str = dspy.InputField(desc="the case presented to the candidate")
    reference_answer: str = dspy.InputField(desc="the reference (gold) treatment plan")
    candidate_answer: str = dspy.InputField(desc="the treatment plan to grade")
    verdict: GradeVerdict = dspy.OutputField()
    rationale: str = dspy.OutputField(desc="one or two sentences")


class GradeRubricItem(dspy.Signature):
    """Grade whether the last assistant turn of a conversation meets one rubric criterion.

    The rubric item is written as "[points] criterion". The criterion is met only if every sentence of it is
    met; a list introduced by "such as", "for example" or "including" need not be covered exhaustively. Some
    criteria describe something undesirable and carry negative points: for those, say whether the undesirable
    thing occurred (criteria_met = true means the response did the bad thing), so a good response gets false.
    Judge the final assistant response only, in the context of the conversation before it.
    """

    conversation: str = dspy.InputField(desc="the conversation, one 'role: content' block per turn")
    rubric_item: str = dspy.InputField(desc="'[points] criterion'")
    explanation: str = dspy.OutputField(desc="why the criterion is or is not met, briefly")
    criteria_met: bool = dspy.OutputField()
