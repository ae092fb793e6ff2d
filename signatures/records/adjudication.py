"""Adjudication: the guard and audit assessments, the trail of steps, the thresholds, and the Decision."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from clearmed.signatures.records.base import Confidence, DomainTier, PathwayName, Record
from clearmed.signatures.records.candidates import Agreement, EvidenceBundle, VerifierOutput
from clearmed.signatures.records.question import Answer
from clearmed.signatures.records.routes import Route, RuleId
from clearmed.signatures.records.usage import CallUsage, StepError
from clearmed.signatures.sanitize import redact_secrets


class GuardAssessment(Record):
    """The override guard's five conditions (CLEAR A.2), each judged on the follow-up evidence."""

    supports_challenger: bool
    default_not_better_supported: bool
    aligned_with_question: bool
    supports_exact_option: bool
    no_unresolved_conflict: bool
    rationale: str = ""

    def all_hold(self) -> bool:
        return (
            self.supports_challenger
            and self.default_not_better_supported
            and self.aligned_with_question
            and self.supports_exact_option
            and self.no_unresolved_conflict
        )


class AuditAssessment(Record):
    """The challenge audit's judgement: does the follow-up evidence clearly support the challenger?"""

    clearly_supports_challenger: bool
    aligned_with_question: bool
    supports_exact_option: bool
    rationale: str = ""

    def accepts(self) -> bool:
        return self.clearly_supports_challenger and self.aligned_with_question and self.supports_exact_option


Mechanism = Literal[
    "pathways",
    "calibration",
    "agreement",
    "verifier",
    "guard",
    "audit",
    "followup",
    "format_gate",
    "response",
    "fallback",
]


class AdjudicationStep(Record):
    """One entry of the trail: which mechanism ran, why, what the LM said, which rule decided, the outcome."""

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
    # Confidence gates on the verifier's own signal (low < medium < high). An accept_dynamic route against the
    # other pathways with a confidence below this keeps the default answer, before any follow-up ("low": never).
    accept_dynamic_min_confidence: Confidence = "low"
    # A verifier that keeps the parametric-local consensus with at least this confidence skips the challenge
    # audit (and its follow-up search). None: the audit always runs, as in the paper.
    audit_skip_confidence: Confidence | None = None
    # Quality prior gate: an LLM `high` (`medium`) label counts as such only when the page's domain/content
    # prior score (retrieval.quality) reaches this value; otherwise it counts one level lower, repeatedly.
    # None: LLM labels count as given.
    high_requires_prior: float | None = None
    medium_requires_prior: float | None = None
    # Domain-tier weights of that prior score, overriding the config's `[quality_priors] tier_weights` for the
    # gate only.
    prior_tier_weights: dict[DomainTier, float] = Field(default_factory=dict)
    # The calibrated verifier (`verifier_mode = "calibrated"`): log-linear weights of each pathway's option
    # distribution, plus `calibrated_high_weight` times the share of high-quality web results for the dynamic one.
    calibrated_parametric_weight: float = Field(default=1.0, ge=0.0)
    calibrated_local_weight: float = Field(default=1.0, ge=0.0)
    calibrated_dynamic_weight: float = Field(default=1.0, ge=0.0)
    calibrated_high_weight: float = Field(default=0.0, ge=0.0)
    # The pooled probability of the calibrated verifier's choice below which it asks for one targeted follow-up
    # search and re-scores the dynamic pathway on it (0: it never asks). Replay serves the recorded round with its
    # re-scored distribution, so the verifier replays with no LM call at any threshold up to the one a run was
    # recorded with (same weights): record with a high threshold, tune below it. Above it, asking where the run
    # did not is a miss; and, as for any threshold, a guard or audit the recorded run never reached is one too.
    calibrated_more_search_below: float = Field(default=0.0, ge=0.0, le=1.0)
    # A pathway that generated its letter instead of scoring options (a hosted model without log-probabilities,
    # or a scoring pass that failed) enters the pool with this probability on its letter and the rest spread
    # evenly over the other options; 0 leaves such a pathway out of the pool, as before.
    calibrated_generated_probability: float = Field(default=0.0, ge=0.0, lt=1.0)
    # A generated letter with a stated confidence c (`[program] stated_confidence`) enters the pool at
    # chance + weight * (c - chance), at least chance: 1 takes the model at its word, 0 ignores what it stated.
    calibrated_stated_weight: float = Field(default=1.0, ge=0.0, le=1.0)
    # The backbone's letter prior per pathway (its mean scored distribution over train questions, by option letter;
    # `clearmed tune --params letter_prior` fits it from the train run) and how strongly adjudication divides it out
    # of each scored distribution, p'(o) ~ p(o) / prior(o)^strength, before any rule reads the candidates
    # (programs._letter_prior). 0: the distributions as scored, as before.
    letter_prior_strength: float = Field(default=0.0, ge=0.0, le=3.0)
    letter_priors: dict[PathwayName, dict[str, float]] = Field(default_factory=dict)

    @field_validator("letter_priors")
    @classmethod
    def _positive_priors(cls, value: dict[PathwayName, dict[str, float]]) -> dict[PathwayName, dict[str, float]]:
        for pathway, prior in value.items():
            bad = [letter for letter, p in prior.items() if not (p > 0.0 and p < float("inf"))]
            if bad:
                raise ValueError(f"letter_priors.{pathway}.{bad[0]} must be a positive probability")
        return value

    @property
    def quality_gate_on(self) -> bool:
        return self.high_requires_prior is not None or self.medium_requires_prior is not None


DecisionStatus = Literal["answered", "unparsed", "failed"]


class Decision(Record):
    """d = (a*, z*, j*, gamma*, B*) plus the trail, usage and everything needed for replay.

    `status` is `answered` when the task adapter produced a valid answer, `unparsed` when the adjudicated
    conclusion could not be turned into a valid answer (never silently mapped to an option), and `failed`
    when no pathway could answer at all (`error` says why).
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
