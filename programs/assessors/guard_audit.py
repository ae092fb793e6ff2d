"""The LM judgements the adjudication rules consume: targeted follow-up search, override guard and
challenge audit assessments (CLEAR 2.3.2-2.3.3). Each returns typed records or a recorded error."""

from __future__ import annotations

import re
from typing import Generic, TypeVar

import dspy

from clearmed.programs.adjudication.rules import competing_answers
from clearmed.programs.assessors.quality import SourceQualityAssessor, label_passages
from clearmed.programs.lm.adapter import normalise_bool
from clearmed.programs.lm.answers import format_options
from clearmed.programs.lm.evidence_view import render_dynamic_evidence, render_round_evidence
from clearmed.programs.lm.formatting import render_question
from clearmed.programs.lm.results import QualityResult, WebQueryResult
from clearmed.programs.lm.run_context import current
from clearmed.programs.lm.shared import Shared
from clearmed.programs.lm.stage import run_stage
from clearmed.programs.pathways.evidence_search import search_web
from clearmed.programs.pathways.web_query import WebQueryWriter, clean_written_query, fit_query
from clearmed.programs.settings import Stage
from clearmed.retrieval.base import WebSearch
from clearmed.signatures.clear import AssessChallenge, AssessOverride, GenerateFollowUpQuery
from clearmed.signatures.records import (
    Answer,
    AuditAssessment,
    EvidenceBundle,
    FollowUpRound,
    GuardAssessment,
    Question,
    StepError,
    page_key,
)


def describe_answer(answer: Answer, question: Question) -> str:
    """An answer as the assessors see it: letters with their option texts."""
    if answer.letters and question.options:
        return "; ".join(f"{letter}. {question.options.get(letter, '?')}" for letter in answer.letters)
    return answer.display()


def conflict_description(bundle: EvidenceBundle) -> tuple[str, str]:
    """(conflict, competing options) for the follow-up query: who said what, and the options in play."""
    question = bundle.question
    lines = [
        f"{c.pathway}: {describe_answer(c.answer, question) if c.answer else '(no answer)'}" for c in bundle.candidates
    ]
    competing = competing_answers(bundle)
    options = ""
    if question.options:
        letters = sorted({letter for _, answer in competing for letter in answer.letters})
        options = "\n".join(f"{letter}. {question.options[letter]}" for letter in letters)
    return "\n".join(lines), options


def competing_texts(bundle: EvidenceBundle) -> str:
    """The competing options' texts, without their letters: what a follow-up search must separate."""
    _, options = conflict_description(bundle)
    return " vs ".join(line.split(". ", 1)[-1] for line in options.splitlines())


def fallback_query(stem: str, texts: str) -> str:
    """When the query LM fails: the question's web query plus the competing options' texts (still targeted)."""
    return f"{stem} {texts}".strip()


def stem_budget(limit: int | None, texts: str) -> int | None:
    """Characters left for the question's part of a fallback query once the options' texts are in (at least
    half the limit: a long option list is cut instead)."""
    return None if limit is None else max(limit - len(texts) - 1, limit // 2)


class FollowUpSearch(dspy.Module):
    """q~ = Q_follow(q, B, o0); E, P = Search(q~); S = AssessQuality(...): one bounded follow-up round.

    The query is cleaned of option letters and cut to the backend's limit (the cut recorded on the round); when
    the query LM fails, the web-query step (`settings.web_query`) writes the stem of a fallback query.
    """

    def __init__(
        self, search: WebSearch | None, assessor: SourceQualityAssessor, writer: WebQueryWriter | None = None
    ) -> None:
        super().__init__()
        self.query = dspy.Predict(GenerateFollowUpQuery)
        self.search = Shared(search)
        self.assessor = assessor
        self.writer = writer or WebQueryWriter()

    def forward(self, bundle: EvidenceBundle, trigger: str) -> FollowUpRound:
        search: WebSearch | None = self.search.value
        round_number = len(bundle.followups) + 1
        if search is None:
            absent = StepError(stage="followup_search", kind="search_error", message="no web search configured")
            return FollowUpRound(trigger=trigger, error=absent)  # type: ignore[arg-type]
        conflict, options = conflict_description(bundle)
        result = run_stage(
            "followup_query",
            self.query,
            question=render_question(bundle.question),
            conflict=conflict,
            competing_options=options,
        )
        written = clean_written_query(result.prediction.query, bundle.question) if result.prediction is not None else ""
        limit = search.max_query_chars
        if not written:
            texts = competing_texts(bundle)
            stem: WebQueryResult = self.writer(
                question=bundle.question, limit=stem_budget(limit, texts), stage="followup_query"
            )
            written = fallback_query(stem.query, texts)
        query, cut = fit_query(written, limit)
        found, error = search_web(search, query, current().settings.dynamic_k, "followup_search", f"F{round_number}.")
        # A page already in the bundle is not new evidence: counting it twice would inflate quality counts. What is
        # left out is recorded, so replay serves this round only beside rounds that would leave out the same.
        seen = {page_key(p) for p in bundle.all_dynamic_passages()}
        passages = [p for p in found if page_key(p) not in seen]
        excluded = list(dict.fromkeys(page_key(p) for p in found if page_key(p) in seen))
        failure = error or result.error
        if not passages:
            return FollowUpRound(
                trigger=trigger,  # type: ignore[arg-type]
                query=query,
                query_cut_chars=cut,
                error=failure,
                excluded=excluded,
            )
        assessed: QualityResult = self.assessor(
            question_text=bundle.question.text, passages=passages, stage="followup_quality"
        )
        round_ = FollowUpRound(
            trigger=trigger,  # type: ignore[arg-type]
            query=query,
            query_cut_chars=cut,
            passages=label_passages(passages, assessed.quality),
            source_quality=assessed.quality,
            error=failure or assessed.error,
            excluded=excluded,
        )
        return round_


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


def salvage_conditions(record: type[AssessmentT], error: StepError) -> AssessmentT | None:
    """An assessment read field by field from a reply the typed parse rejected (a small model drops or garbles one
    of the booleans: on the embedded model the audit's parse failed in 6 of 16 hold-out MMLU-Med audits); a
    condition that cannot be read does not hold. None when no condition can be read: the assessment failed."""
    raw = error.raw_output or ""
    names = [name for name in record.model_fields if name != "rationale"]
    read = {name: normalise_bool(_written_value(raw, name)) for name in names}
    unread = [name for name, value in read.items() if value not in ("true", "false")]
    if len(unread) == len(names):
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
            salvaged = salvage_conditions(self.record, result.error) if result.error.kind == "parse_error" else None
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
