"""The override guard's and the challenge audit's assessments (CLEAR 2.3.3): LM judgements of a default answer
against the dynamic challenger on the contest's own follow-up evidence, each a typed record or a recorded error.
The follow-up search they judge is `pathways.followup_search`."""

from __future__ import annotations

import re
from typing import Generic, TypeVar

import dspy

from clearmed.programs.lm.parsing import format_options, normalise_bool
from clearmed.programs.lm.prompting import (
    describe_answer,
    render_dynamic_evidence,
    render_question,
    render_round_evidence,
)
from clearmed.programs.lm.stage import run_stage
from clearmed.signatures.clear import AssessChallenge, AssessOverride
from clearmed.signatures.records import (
    Answer,
    AuditAssessment,
    EvidenceBundle,
    FollowUpRound,
    GuardAssessment,
    StepError,
)
from clearmed.signatures.records.settings import Stage

AssessmentT = TypeVar("AssessmentT", GuardAssessment, AuditAssessment)


def contest_round(bundle: EvidenceBundle, mechanism: str) -> FollowUpRound | None:
    """The follow-up round the guard's or audit's contest searched, the last of the bundle's (None with follow-up
    switched off)."""
    last = bundle.followups[-1] if bundle.followups else None
    return last if last is not None and last.trigger == mechanism else None


def _written_value(raw: str, name: str) -> str:
    """The value written for output field `name` in a raw reply, as chat sections or as JSON ("" if absent)."""
    found = re.search(rf"\[\[ ## {name} ## \]\]\s*([^\n]*)", raw) or re.search(rf'"{name}"\s*:\s*"?([^",}}\n]*)', raw)
    return found.group(1).strip() if found else ""


def salvage_conditions(record: type[AssessmentT], error: StepError, *, truncated: bool = False) -> AssessmentT | None:
    """An assessment read field by field from a reply the typed parse rejected (a small model drops or garbles one
    of the booleans: on the embedded model the audit's parse failed in 6 of 16 hold-out MMLU-Med audits); a
    condition that cannot be read does not hold. None when no condition can be read: the assessment failed. A reply
    cut at its token budget (`truncated`) never got to the conditions it lacks: it is salvaged only when every one
    was read, else the assessment failed, and says why, rather than stand as a judgement the model never made."""
    raw = error.raw_output or ""
    names = [name for name in record.model_fields if name != "rationale"]
    read = {name: normalise_bool(_written_value(raw, name)) for name in names}
    unread = [name for name, value in read.items() if value not in ("true", "false")]
    if len(unread) == len(names) or (truncated and unread):
        return None
    note = f" (read field by field; not readable, so taken as not holding: {', '.join(unread)})" if unread else ""
    conditions = {name: value == "true" for name, value in read.items()}
    return record(**conditions, rationale=_written_value(raw, "rationale") + note)


class _ConflictAssessor(dspy.Module, Generic[AssessmentT]):
    """One LM judgement of a default answer against the dynamic challenger, parsed into a typed record.

    The record's boolean fields are the signature's output fields of the same name. The assessor reads the contest's
    own follow-up round (the bundle's web evidence only with follow-up switched off): the round is what its gate
    counted, and the initial results already decided the route that asked for the contest.
    """

    stage: Stage
    record: type[AssessmentT]

    def __init__(self, signature: type[dspy.Signature]) -> None:
        super().__init__()
        self.assess = dspy.Predict(signature)

    def forward(self, bundle: EvidenceBundle, default: Answer, challenger: Answer) -> AssessmentT | StepError:
        question = bundle.question
        result = run_stage(
            self.stage,
            self.assess,
            question=render_question(question),
            options=format_options(question),
            default_answer=describe_answer(default, question),
            challenger_answer=describe_answer(challenger, question),
            # Only evidence that can count towards the guard's and audit's gates argues in them: a low-quality
            # page (a blog, a forum, an unrecognised or look-alike site) is listed without its text, so no page
            # that could not open the gate can talk the assessor into an override.
            evidence=(
                render_round_evidence(round_, min_quality="medium")
                if (round_ := contest_round(bundle, self.stage)) is not None
                else render_dynamic_evidence(bundle, min_quality="medium")
            ),
        )
        if result.prediction is None:
            assert result.error is not None
            truncated = result.truncated_at is not None
            salvaged = (
                salvage_conditions(self.record, result.error, truncated=truncated)
                if result.error.kind == "parse_error"
                else None
            )
            return salvaged if salvaged is not None else result.error
        fields = result.prediction.toDict()
        conditions = {name: bool(fields[name]) for name in self.record.model_fields if name != "rationale"}
        return self.record(**conditions, rationale=str(fields["rationale"] or ""))


class OverrideGuard(_ConflictAssessor[GuardAssessment]):
    """Assesses the guard's five conditions on the follow-up evidence."""

    stage = "guard"
    record = GuardAssessment

    def __init__(self) -> None:
        super().__init__(AssessOverride)


class ChallengeAudit(_ConflictAssessor[AuditAssessment]):
    """Assesses whether the follow-up evidence clearly supports the dynamic challenger."""

    stage = "audit"
    record = AuditAssessment

    def __init__(self) -> None:
        super().__init__(AssessChallenge)
