"""Adjudication: the guard and audit assessments, the trail of steps, the thresholds, and the Decision."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from clearmed.core.sanitize import redact_secrets
from clearmed.signatures.records.base import Confidence, PathwayName, Record
from clearmed.signatures.records.candidates import Agreement, EvidenceBundle, VerifierOutput
from clearmed.signatures.records.question import Answer
from clearmed.signatures.records.routes import Mechanism, Route, RuleId
from clearmed.signatures.records.usage import CallUsage, StepError


class GuardAssessment(Record):
    """The override guard's conditions, each judged on the follow-up evidence: the paper's five (CLEAR A.2) and the
    CLEAR code's sixth, `recommend_override` (`targeted_search.allow_second_search_override` grants only when its
    adjudicator also recommends the override). A guard recorded before the sixth was asked has it None: it grants
    nothing, and replay misses it (`needs_reassessment`)."""

    supports_challenger: bool
    default_not_better_supported: bool
    aligned_with_question: bool
    supports_exact_option: bool
    no_unresolved_conflict: bool
    recommend_override: bool | None = None
    rationale: str = ""

    def all_hold(self) -> bool:
        return bool(
            self.supports_challenger
            and self.default_not_better_supported
            and self.aligned_with_question
            and self.supports_exact_option
            and self.no_unresolved_conflict
            and self.recommend_override
        )

    def needs_reassessment(self) -> bool:
        """Recorded before the guard asked every condition it rules on."""
        return self.recommend_override is None


class AuditAssessment(Record):
    """The challenge audit's judgement: does the follow-up evidence clearly support the challenger? With the CLEAR
    code's conditions (`_allow_online_challenge_override`): aligned, exact option, the default not the best
    supported, no unresolved conflict, and its adjudicator recommends the override. An audit recorded before the
    last three were asked has them None: it is no acceptance, and replay misses it (`needs_reassessment`)."""

    clearly_supports_challenger: bool
    aligned_with_question: bool
    supports_exact_option: bool
    default_not_better_supported: bool | None = None
    no_unresolved_conflict: bool | None = None
    recommend_override: bool | None = None
    rationale: str = ""

    def accepts(self) -> bool:
        return bool(
            self.clearly_supports_challenger
            and self.aligned_with_question
            and self.supports_exact_option
            and self.default_not_better_supported
            and self.no_unresolved_conflict
            and self.recommend_override
        )

    def needs_reassessment(self) -> bool:
        """Recorded before the audit asked every condition it rules on."""
        return (
            self.default_not_better_supported is None
            or self.no_unresolved_conflict is None
            or (self.recommend_override is None)
        )


class Contest(Record):
    """What a guard or audit step judged: the default answer, the dynamic challenger, and how many follow-up rounds
    the bundle held when it was judged. Replay reuses a recorded assessment only for the same contest."""

    default: Answer
    challenger: Answer
    followup_rounds: int = Field(default=0, ge=0)


class VerifierInputs(Record):
    """What a verifier step read: each pathway's answer as it stood, the agreement, and how many follow-up rounds
    the bundle held. Replay reuses a recorded verifier output only for the same inputs."""

    answers: dict[PathwayName, Answer | None]
    agreement: Agreement
    followup_rounds: int = Field(default=0, ge=0)


class AdjudicationStep(Record):
    """One entry of the trail: which mechanism ran, why, what the LM said, which rule decided, the outcome; for a
    verifier, guard or audit step also what it judged (`inputs`, `contest`)."""

    mechanism: Mechanism
    trigger: str = ""
    rule: RuleId | Literal[""] = ""  # "": the step decided nothing
    outcome: str = ""
    answer: Answer | None = None
    route: Route | None = None
    guard: GuardAssessment | None = None
    audit: AuditAssessment | None = None
    verifier: VerifierOutput | None = None
    error: StepError | None = None
    inputs: VerifierInputs | None = None
    contest: Contest | None = None


class Thresholds(Record):
    """Every number the adjudication rules use. Defaults are the paper's (CLEAR appendix A.2).

    The fields after `max_followup_rounds` are tuning extensions (`clearmed tune`); each is off by default,
    so a default Thresholds runs exactly the paper's procedure.
    """

    guard_min_high: int = Field(default=1, ge=0)
    audit_min_high: int = Field(default=1, ge=0)
    audit_min_medium: int = Field(default=2, ge=0)
    max_followup_rounds: int = Field(default=1, ge=0)
    # Off by default: the paper always runs the verifier. When on, unanimous pathways skip it.
    unanimity_fast_path: bool = False
    # The calibrated verifier (`verifier_mode = "calibrated"`): log-linear weights of each pathway's option
    # distribution, plus `calibrated_high_weight` times the share of high-quality web results for the dynamic one.
    calibrated_parametric_weight: float = Field(default=1.0, ge=0.0)
    calibrated_local_weight: float = Field(default=1.0, ge=0.0)
    calibrated_dynamic_weight: float = Field(default=1.0, ge=0.0)
    calibrated_high_weight: float = Field(default=0.0, ge=0.0)
    # Evidence binding (TrustMargin, arXiv 2606.08397): the pool adds beta_k * [log p_k(o | q, P) - log p_k(o | P)] for
    # the local and dynamic pathways, p(o | P) being the pathway's prompt scored with the question removed (recorded
    # on disputed questions under `[program] evidence_binding`). 0: no binding term, the pool as before.
    calibrated_local_binding: float = Field(default=0.0, ge=0.0)
    calibrated_dynamic_binding: float = Field(default=0.0, ge=0.0)


DecisionStatus = Literal["answered", "unparsed", "failed"]


class Decision(Record):
    """d = (a*, z*, j*, gamma*, B*) plus the trail, usage and everything needed for replay.

    `status` is `answered` when the task adapter produced a valid answer, `unparsed` when the adjudicated
    conclusion could not be turned into a valid answer (never silently mapped to an option), and `failed`
    when no pathway could answer at all (`error` says why). The bundle is as the pathways left it with each
    follow-up round beside it, and `agreement` is the one adjudication started from: replay starts from the record
    as written.
    """

    question_id: str
    status: DecisionStatus
    answer: Answer | None = None
    route: Route | None = None
    rationale: str = ""
    confidence: Confidence = "low"
    deciding_rule: RuleId | Literal[""] = ""
    response: str | None = None
    bundle: EvidenceBundle
    agreement: Agreement | None = None
    verifier_outputs: list[VerifierOutput] = Field(default_factory=list)
    steps: list[AdjudicationStep] = Field(default_factory=list)
    usage: list[CallUsage] = Field(default_factory=list)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    error: str | None = None
    program: str = "clear"

    @field_validator("error")
    @classmethod
    def _redact(cls, value: str | None) -> str | None:
        return redact_secrets(value) if value is not None else None

    @property
    def letters(self) -> tuple[str, ...]:
        return self.answer.letters if self.answer else ()

    def lm_calls(self) -> int:
        """LM calls that reached a model (cache hits and retrieval/search rows excluded)."""
        return sum(u.calls for u in self.usage if u.role != "tool" and not u.cached)

    def total_usage(self) -> CallUsage:
        return CallUsage(
            stage="total",
            role="all",
            calls=self.lm_calls(),
            prompt_tokens=sum(u.prompt_tokens for u in self.usage),
            completion_tokens=sum(u.completion_tokens for u in self.usage),
            seconds=round(sum(u.seconds for u in self.usage), 3),
            cached=False,
        )
