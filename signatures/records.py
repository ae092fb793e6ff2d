"""The nouns of clearmed: every record that crosses a module boundary.

Read this file first. One question flows through the program as a `Question`, becomes three `Candidate`s
(parametric, local, dynamic) with their `Passage`s, is judged by the aggregation verifier (`VerifierOutput`),
adjudicated by pure rules (`AdjudicationStep`s) and ends as a `Decision`, which carries everything needed to
replay the adjudication layer without re-running the pathways.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from clearmed.signatures.sanitize import clean_text, redact_secrets

AnswerMode = Literal["single", "multi", "free_text"]
PathwayName = Literal["parametric", "local", "dynamic"]
PATHWAYS: tuple[PathwayName, ...] = ("parametric", "local", "dynamic")
QualityLabel = Literal["high", "medium", "low"]
# Who labelled the dynamic evidence: the LLM, the domain/content priors standing in, or nobody (all low).
QualityOrigin = Literal["llm", "prior", "none"]
Route = Literal["consensus", "keep_parametric", "keep_local", "accept_dynamic", "needs_more_search"]
ROUTES: tuple[Route, ...] = (
    "consensus",
    "keep_parametric",
    "keep_local",
    "accept_dynamic",
    "needs_more_search",
)
Confidence = Literal["high", "medium", "low"]
Role = Literal["main", "assessor", "teacher", "prompt_model", "judge"]
MetadataValue = str | int | float | bool | None | list[str]

_LETTER = re.compile(r"^[A-Z]$")


class Record(BaseModel):
    """Base for records: immutable by convention, unknown fields rejected so typos surface."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------------- question


class ChatTurn(Record):
    """One turn of a conversation-style item (HealthBench)."""

    role: Literal["system", "user", "assistant"]
    content: str

    @field_validator("content")
    @classmethod
    def _clean(cls, value: str) -> str:
        return clean_text(value)


class RubricItem(Record):
    """One physician-written grading criterion (HealthBench); negative points penalise."""

    criterion: str
    points: float
    tags: list[str] = Field(default_factory=list)


class Question(Record):
    """One benchmark item or user question.

    `options` maps capital letters to option texts; it is None exactly when `answer_mode` is `free_text`.
    `gold_letters` holds the reference option set for MCQ, `gold_text` the reference answer for free text.
    """

    id: str = Field(min_length=1)
    text: str
    answer_mode: AnswerMode = "single"
    options: dict[str, str] | None = None
    context: str | None = None
    gold_letters: list[str] | None = None
    gold_text: str | None = None
    conversation: list[ChatTurn] | None = None
    rubric: list[RubricItem] | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, value: str) -> str:
        # Control characters go first: a "question" of escape sequences alone is empty, and none may reach a
        # prompt or a terminal.
        value = clean_text(value).strip()
        if not value:
            raise ValueError("question text is empty")
        return value

    @field_validator("context")
    @classmethod
    def _clean_context(cls, value: str | None) -> str | None:
        return clean_text(value) if value is not None else None

    @field_validator("options")
    @classmethod
    def _options_well_formed(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        value = {key: clean_text(text) for key, text in value.items()}
        bad = [key for key in value if not _LETTER.match(key)]
        if bad:
            raise ValueError(f"option keys must be single capital letters A-Z, got {bad}")
        blank = [key for key, text in value.items() if not text or not text.strip()]
        if blank:
            raise ValueError(f"options {blank} have empty text")
        texts = [text.strip().casefold() for text in value.values()]
        if len(set(texts)) != len(texts):
            raise ValueError("two options have the same text")
        return {key: value[key].strip() for key in sorted(value)}

    @model_validator(mode="after")
    def _mode_matches_options(self) -> Question:
        if self.answer_mode == "free_text":
            if self.options:
                raise ValueError("a free_text question cannot have options")
            if self.gold_letters:
                raise ValueError("a free_text question cannot have gold_letters")
            return self
        if not self.options or len(self.options) < 2:
            raise ValueError(f"a {self.answer_mode} question needs at least two options")
        if self.gold_letters is not None:
            gold = sorted(set(self.gold_letters))
            missing = [letter for letter in gold if letter not in self.options]
            if missing:
                raise ValueError(f"gold letters {missing} are not among the options {sorted(self.options)}")
            if not gold:
                raise ValueError("gold_letters is empty")
            if self.answer_mode == "single" and len(gold) != 1:
                raise ValueError(f"a single-answer question needs exactly one gold letter, got {gold}")
            self.gold_letters = gold
        return self

    @property
    def is_mcq(self) -> bool:
        return self.answer_mode != "free_text"

    @property
    def letters(self) -> list[str]:
        return sorted(self.options) if self.options else []


class Answer(Record):
    """A normalised answer: a sorted set of option letters for MCQ, or a text for free-text questions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    letters: tuple[str, ...] = ()
    text: str | None = None

    @field_validator("letters")
    @classmethod
    def _sorted_unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for letter in value:
            if not _LETTER.match(letter):
                raise ValueError(f"not an option letter: {letter!r}")
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Answer:
        if bool(self.letters) == bool(self.text and self.text.strip()):
            raise ValueError("an Answer holds either option letters or a text, not both and not neither")
        return self

    @classmethod
    def of_letters(cls, *letters: str) -> Answer:
        return cls(letters=tuple(letters))

    @classmethod
    def of_text(cls, text: str) -> Answer:
        return cls(text=text.strip())

    def display(self) -> str:
        return ",".join(self.letters) if self.letters else (self.text or "")


# --------------------------------------------------------------------------------------------- evidence


class Provenance(Record):
    """Where a passage came from: a corpus document, or a web page found by a search backend."""

    kind: Literal["corpus", "web"]
    corpus: str | None = None
    doc_id: str | None = None
    url: str | None = None
    domain: str | None = None
    published: date | None = None
    backend: str | None = None
    query: str | None = None
    rank: int | None = None
    score: float | None = None


class Passage(Record):
    """One piece of evidence. `id` is unique within a question's bundle (it is what verdicts cite)."""

    id: str = Field(min_length=1)
    title: str = ""
    text: str
    pathway: Literal["local", "dynamic"]
    provenance: Provenance
    quality: QualityLabel | None = None
    quality_reason: str | None = None

    @field_validator("title", "text")
    @classmethod
    def _clean(cls, value: str) -> str:
        return clean_text(value)


class QualityAssessment(Record):
    passage_id: str
    label: QualityLabel
    reason: str = ""


class SourceQuality(Record):
    """Categorical quality labels for dynamic evidence (CLEAR A.2: counts, not continuous scores).

    `origin` says who labelled: the LLM assessment, the domain/content priors standing in for a failed
    assessment, or nobody (everything counted as low, the conservative choice).
    """

    assessments: list[QualityAssessment] = Field(default_factory=list)
    origin: QualityOrigin = "llm"

    def _count(self, label: QualityLabel) -> int:
        return sum(1 for item in self.assessments if item.label == label)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_high(self) -> int:
        return self._count("high")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_medium(self) -> int:
        return self._count("medium")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_low(self) -> int:
        return self._count("low")

    def label_of(self, passage_id: str) -> QualityLabel | None:
        for item in self.assessments:
            if item.passage_id == passage_id:
                return item.label
        return None

    @classmethod
    def merge(cls, *parts: SourceQuality) -> SourceQuality:
        seen: dict[str, QualityAssessment] = {}
        for part in parts:
            for item in part.assessments:
                seen.setdefault(item.passage_id, item)
        origins = {part.origin for part in parts if part.assessments}
        origin: QualityOrigin = "llm"
        if "none" in origins:
            origin = "none"
        elif "prior" in origins:
            origin = "prior"
        return cls(assessments=list(seen.values()), origin=origin)

    # The counts are serialised for readers of the JSON; on reload they come back as keys to drop.
    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: object) -> object:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if key not in {"n_high", "n_medium", "n_low"}}
        return data


# --------------------------------------------------------------------------------------------- failures and usage


ErrorKind = Literal[
    "lm_error",
    "parse_error",
    "invalid_answer",
    "retrieval_error",
    "search_error",
    "timeout",
    "internal_error",
]


class StepError(Record):
    """A failure recorded in the trail instead of raised: which stage, what kind, and the message."""

    stage: str
    kind: ErrorKind
    message: str
    raw_output: str | None = None

    # Provider errors sometimes quote the credentials they were sent; recorded errors end up in run folders.
    @field_validator("message", "raw_output")
    @classmethod
    def _redact(cls, value: str | None) -> str | None:
        return redact_secrets(value) if value is not None else None


class CallUsage(Record):
    """One LM or search call: what it cost. Cache hits cost no tokens but are still listed."""

    stage: str
    role: str = "main"
    model: str = ""
    calls: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    failed: bool = False


# --------------------------------------------------------------------------------------------- option-wise judgement
# MedJudgeRAG: a verdict per option that cites its evidence, a decision that follows from the verdicts by rule,
# and optionally a small question-specific knowledge graph extracted first (explicit mode).

Verdict = Literal["supported", "contradicted", "insufficient"]
VERDICTS: tuple[Verdict, ...] = ("supported", "contradicted", "insufficient")
JudgeDecision = Literal["grounded", "elimination", "parametric"]
JudgeMode = Literal["implicit", "explicit"]
# The 15 UMLS semantic groups (https://lhncbc.nlm.nih.gov/semanticnetwork/), by their official abbreviations.
SemanticGroup = Literal[
    "ACTI",
    "ANAT",
    "CHEM",
    "CONC",
    "DEVI",
    "DISO",
    "GENE",
    "GEOG",
    "LIVB",
    "OBJC",
    "OCCU",
    "ORGA",
    "PHEN",
    "PHYS",
    "PROC",
]


class GraphEntity(Record):
    """An entity of the question-specific graph, typed by UMLS semantic group, citing its source passages."""

    id: str
    name: str
    type: SemanticGroup
    description: str = ""
    evidence: list[str] = Field(default_factory=list)


class GraphRelation(Record):
    id: str
    source: str
    relation: str
    target: str
    evidence: list[str] = Field(default_factory=list)


class GraphCleanup(Record):
    """What schema-aware post-processing removed or changed (MedJudgeRAG 3.2), so KG quality can be reported."""

    types_normalised: int = 0
    entities_dropped_type: int = 0
    entities_dropped_ungrounded: int = 0
    relations_dropped_type: int = 0
    relations_dropped_orphan: int = 0
    relations_dropped_ungrounded: int = 0
    citations_removed: int = 0


class KnowledgeGraph(Record):
    """Empty is allowed: irrelevant evidence should yield no graph rather than noise."""

    entities: list[GraphEntity] = Field(default_factory=list)
    relations: list[GraphRelation] = Field(default_factory=list)
    cleanup: GraphCleanup = Field(default_factory=GraphCleanup)

    @property
    def is_empty(self) -> bool:
        return not self.entities and not self.relations


class OptionVerdict(Record):
    """The verdict on one option. `stated` is what the model wrote; `verdict` is what the rules use.

    A supported or contradicted verdict that cites nothing, or cites an id outside the evidence, is invalid
    and counts as insufficient (`invalid_reason` says why); citations of graph elements resolve to the
    passages those elements cite.
    """

    letter: str
    verdict: Verdict
    stated: str = ""
    cited_ids: list[str] = Field(default_factory=list)
    reason: str = ""
    invalid_reason: str | None = None

    @property
    def valid(self) -> bool:
        return self.invalid_reason is None


class OptionJudgment(Record):
    """A judge's full output for one pathway: graph, verdicts, decision by rule, answer and its checks."""

    mode: JudgeMode
    graph: KnowledgeGraph | None = None
    verdicts: list[OptionVerdict] = Field(default_factory=list)
    decision: JudgeDecision
    stated_decision: str | None = None
    model_answer: str | None = None
    answer: Answer | None = None
    answer_rule: str = ""
    eliminated: list[str] = Field(default_factory=list)
    invalid_citations: int = 0
    missing_verdicts: list[str] = Field(default_factory=list)
    # True when the typed parse failed and verdicts were recovered from the raw text by the fallback parser.
    salvaged: bool = False

    def letters_with(self, verdict: Verdict) -> list[str]:
        return [v.letter for v in self.verdicts if v.verdict == verdict]

    def verdict_for(self, letter: str) -> OptionVerdict | None:
        return next((v for v in self.verdicts if v.letter == letter), None)


# --------------------------------------------------------------------------------------------- query planning


class SearchRound(Record):
    """One round of query-planned iterative search: the queries issued and what the check concluded."""

    queries: list[str] = Field(default_factory=list)
    new_passage_ids: list[str] = Field(default_factory=list)
    sufficient: bool | None = None
    missing: str = ""
    error: StepError | None = None


class SearchPlan(Record):
    """CLEAR (QPIS): sub-queries, the rounds run within the budget, and why the search stopped."""

    subqueries: list[str] = Field(default_factory=list)
    plan_error: StepError | None = None
    rounds: list[SearchRound] = Field(default_factory=list)
    stop_reason: Literal["sufficient", "budget", "no_new_results", "search_failed", "check_failed"] = "budget"


# --------------------------------------------------------------------------------------------- candidates and verifier


class Candidate(Record):
    """A pathway's answer, with the evidence it saw and the provenance of both.

    `answer` is None when the pathway failed or its output could not be parsed; `error` then says why.
    """

    pathway: PathwayName
    answer: Answer | None = None
    rationale: str = ""
    raw_answer: str | None = None
    passage_ids: list[str] = Field(default_factory=list)
    cited_passage_ids: list[str] = Field(default_factory=list)
    model: str = ""
    retriever: str | None = None
    search_backend: str | None = None
    query: str | None = None
    error: StepError | None = None
    judgment: OptionJudgment | None = None
    search_plan: SearchPlan | None = None

    @property
    def answered(self) -> bool:
        return self.answer is not None


class FollowUpRound(Record):
    """One targeted follow-up search (CLEAR 2.3.3): why it ran, the query, what came back and its quality."""

    trigger: Literal["guard", "audit", "needs_more_search"]
    query: str = ""
    passages: list[Passage] = Field(default_factory=list)
    source_quality: SourceQuality = Field(default_factory=SourceQuality)
    error: StepError | None = None


class EvidenceBundle(Record):
    """B in the paper: the question, the three candidates, the evidence, its quality and any follow-ups."""

    question: Question
    candidates: list[Candidate]
    local_passages: list[Passage] = Field(default_factory=list)
    dynamic_passages: list[Passage] = Field(default_factory=list)
    source_quality: SourceQuality = Field(default_factory=SourceQuality)
    followups: list[FollowUpRound] = Field(default_factory=list)

    def candidate(self, pathway: PathwayName) -> Candidate:
        for candidate in self.candidates:
            if candidate.pathway == pathway:
                return candidate
        return Candidate(pathway=pathway, error=StepError(stage=pathway, kind="internal_error", message="absent"))

    def all_dynamic_passages(self) -> list[Passage]:
        merged = list(self.dynamic_passages)
        for round_ in self.followups:
            merged.extend(round_.passages)
        return merged

    def dynamic_quality(self) -> SourceQuality:
        """Quality over the initial dynamic results and every follow-up round."""
        return SourceQuality.merge(self.source_quality, *(r.source_quality for r in self.followups))

    def passage_ids(self) -> set[str]:
        return {p.id for p in self.local_passages} | {p.id for p in self.all_dynamic_passages()}


class Agreement(Record):
    """Which pathways reached the same answer (None where either side gave no answer).

    MCQ answers agree when their letter sets are equal; free-text answers by the normaliser or an LM
    judgement (`method`). Stored on the Decision so that replaying the rules needs no new LM call.
    """

    parametric_local: bool | None = None
    parametric_dynamic: bool | None = None
    local_dynamic: bool | None = None
    method: Literal["letters", "normaliser", "lm"] = "letters"


class VerifierOutput(Record):
    """o = V(B): preliminary answer, route, rationale and a confidence signal (not a probability)."""

    answer: Answer | None = None
    route: Route
    rationale: str = ""
    confidence: Confidence = "low"
    mode: Literal["lm", "heuristic"] = "lm"
    raw_answer: str | None = None
    error: StepError | None = None


# --------------------------------------------------------------------------------------------- adjudication


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
    "pathways", "agreement", "verifier", "guard", "audit", "followup", "format_gate", "response", "fallback"
]


class AdjudicationStep(Record):
    """One entry of the trail: which mechanism ran, why, what the LM said, which rule decided, the outcome."""

    mechanism: Mechanism
    trigger: str = ""
    rule: str = ""
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
    # gate only (the tiers of retrieval.quality.Tier; kept as plain names so records import nothing).
    prior_tier_weights: dict[Literal["government", "literature", "academic", "media", "low", "unknown"], float] = Field(
        default_factory=dict
    )

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
    deciding_rule: str = ""
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
