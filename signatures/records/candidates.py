"""Candidates, the evidence bundle they form, which of them agree, and the aggregation verifier's output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, FiniteFloat

from clearmed.signatures.records.base import Confidence, PathwayName, Record
from clearmed.signatures.records.evidence import Passage, SourceQuality
from clearmed.signatures.records.judgment import OptionJudgment
from clearmed.signatures.records.question import Answer, Question
from clearmed.signatures.records.routes import Route
from clearmed.signatures.records.search_plan import SearchPlan
from clearmed.signatures.records.usage import StepError


class OptionScores(Record):
    """How probable the backbone found each option, read from its next-token distribution (`scored`).

    Single answer: the letters' probabilities, summing to one, and `letter_mass`, the probability the model put
    on the letters at all before renormalising (low: it wanted to write prose). Several answers allowed
    (`per_option`): each option's own probability of being correct, not summing to one. Probabilities are finite:
    a NaN would be written as null and the record would not load again.
    """

    probs: dict[str, FiniteFloat]
    letters: tuple[str, ...]
    letter_mass: FiniteFloat | None = None
    per_option: bool = False


def top_options(probs: Mapping[str, float], n: int = 3) -> str:
    """The most probable options and their probabilities, e.g. "C 0.94, A 0.02, B 0.02" (a scored rationale)."""
    return ", ".join(f"{option} {p:.2f}" for option, p in sorted(probs.items(), key=lambda kv: -kv[1])[:n])


# Why an evidence pathway of a disputed question has no passage-only scores: its backbone returns no
# log-probabilities, its own answer was not scored (generated, or the option-wise judge), the question-removed
# scoring pass failed (the usage row says why), or it had no passages to bind to.
BindingFallback = Literal["no_logprobs", "not_scored", "scoring_failed", "no_passages"]


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
    # Set when the answer was scored rather than generated (`[program] mcq_decoding = "score"`).
    option_scores: OptionScores | None = None
    # Evidence binding (`[program] evidence_binding`, disputed single-answer MCQs, local and dynamic pathways only):
    # the same prompt scored again with the question removed, passages and options only: p(o | P). Recorded so that
    # the calibrated verifier's binding term and the learned verifier's binding features replay with no LM call.
    passage_only_scores: OptionScores | None = None
    # Why a pathway of a disputed question has no `passage_only_scores` when binding was asked for.
    binding_fallback: BindingFallback | None = None
    # How the web query was made when the question itself was too long or not wanted: "lm" (the query writer)
    # or "salient" (key terms), and the question's length when it was replaced or cut.
    query_source: Literal["question", "lm", "salient"] = "question"
    query_replaced_chars: int | None = None
    # A written query longer than the backend accepts (max_query_chars) is cut at a word boundary before it is
    # sent, never sent to fail: its length before the cut.
    query_cut_chars: int | None = None
    # The file an earlier run recorded this answer in, when the pathway was not run but read back
    # (`clearmed eval --pathway NAME=SOURCE`): its provenance in the trail.
    recorded_from: str | None = None


def page_key(passage: Passage) -> str:
    """What makes two web results the same page: its address (else its document id, else its id)."""
    return passage.provenance.url or passage.provenance.doc_id or passage.id


class FollowUpRound(Record):
    """One targeted follow-up search (CLEAR 2.3.3): why it ran, the query, what came back and its quality.

    `passages` are the results the bundle did not already hold; `excluded` the keys (`page_key`) of those it did,
    left out, so replay can tell whether the round would come back the same beside other rounds (None: recorded
    before rounds said)."""

    trigger: Literal["guard", "audit", "needs_more_search"]
    query: str = ""
    # The written query's length when it was over the backend's max_query_chars and cut at a word boundary.
    query_cut_chars: int | None = None
    passages: list[Passage] = Field(default_factory=list)
    source_quality: SourceQuality = Field(default_factory=SourceQuality)
    error: StepError | None = None
    excluded: list[str] | None = None


class EvidenceBundle(Record):
    """B in the paper: the question, the three candidates, the evidence, its quality and any follow-ups.

    `candidates` are as the pathways left them, and stay so: a follow-up round is added beside them, never merged
    into them.
    """

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

    def initial(self) -> EvidenceBundle:
        """The bundle as the pathways left it: no follow-up round."""
        return self.model_copy(update={"followups": []}) if self.followups else self

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


# Why the calibrated verifier could not decide a question, so the deterministic verifier did: several answers
# allowed or free text (it pools single-answer distributions only), or nothing to pool (no pathway scored its
# options: a backbone without log-probabilities, or scoring passes that failed).
CalibratedFallback = Literal["several_answers", "free_text", "nothing_to_pool"]

# Why the learned verifier left a question to the deterministic verifier: no fitted model loaded, not a single-answer
# MCQ, fewer than two competing answers, a question outside the fit's benchmarks/formats/backbones, or a choice too
# close to a coin flip (within the fit's margin).
# "withheld": tune's repeated cross-validation did not beat the deterministic verifier, so the fit never decides;
# "scores_absent": the fit read a pathway's scored probabilities and this question's holder has none (a replay of a
# record without `option_scores`).
LearnedFallback = Literal[
    "no_model",
    "not_single_choice",
    "fewer_than_two_answers",
    "out_of_domain",
    "within_margin",
    "withheld",
    "scores_absent",
]


class LearnedVerdict(Record):
    """What the learned verifier made of a bundle (`verifier_mode = "learned"`): each competing answer's features and
    probability of being the right one, its choice, or why it fell back (`fallback`, `note`)."""

    choice: str | None = None
    probabilities: dict[str, FiniteFloat] = Field(default_factory=dict)
    features: dict[str, dict[str, FiniteFloat]] = Field(default_factory=dict)
    fallback: LearnedFallback | None = None
    note: str = ""


# What the verifier's support is support for (the CLEAR code's `support_scope`): the exact option, only background
# facts about the topic, a related but different task (treatment for a diagnosis question), or unclear.
SupportScope = Literal["exact_option", "background_only", "related_task", "unclear"]


class VerifierVerdict(Record):
    """The structured verdict the CLEAR code's verifier returns beside its letter, route and confidence
    (`methods/clear/verifier.py`: `online_supported` ... `support_scope`; web = the code's "online"). None: not
    judged (the LM left the field out, or the deterministic verifier, which judges only the first three by letters
    as the code's `heuristic_verdict` does).

    The code's rules read none of these (its guard reads the letter and the decision; its override conditions are
    the second search's, `GuardAssessment` / `AuditAssessment` here): they are recorded, shown, and replayed as
    judged, so that a strong backbone's reasons for a route can be audited."""

    web_supported: bool | None = None
    local_supported: bool | None = None
    conflict_detected: bool | None = None
    option_level_support: bool | None = None
    consensus_refuted: bool | None = None
    question_aligned: bool | None = None
    support_scope: SupportScope | None = None

    def judged(self) -> dict[str, object]:
        """The fields judged, in their order (for the trail's outcome and the HTML page)."""
        return {name: value for name, value in self.model_dump().items() if value is not None}


class VerifierOutput(Record):
    """o = V(B): preliminary answer, route, rationale and a confidence signal (not a probability)."""

    answer: Answer | None = None
    route: Route
    rationale: str = ""
    confidence: Confidence = "low"
    mode: Literal["lm", "heuristic", "calibrated", "learned"] = "lm"
    raw_answer: str | None = None
    # calibrated mode: the pooled probability of each option (the route follows from it and the candidates)
    pooled: dict[str, FiniteFloat] | None = None
    error: StepError | None = None
    # calibrated mode, when the deterministic verifier decided instead (mode "heuristic"): why
    calibrated_fallback: CalibratedFallback | None = None
    # learned mode: the learned verifier's features, probabilities and choice; with mode "heuristic", why it fell back
    learned: LearnedVerdict | None = None
    # the structured verdict (the LM verifier's judgement, or the deterministic verifier's letter comparisons)
    verdict: VerifierVerdict | None = None
