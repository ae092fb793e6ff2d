"""What the HTML report shows of one evaluated question: the derived facts its list row and its page need.

The templates read the Decision itself for everything it states plainly (steps, verifier outputs, guard and
audit assessments, thresholds). This module computes what a reader should not have to work out: whether the
answer was right, which pathways agreed, which passages were cited or quarantined, where a passage came from
(a link only for http(s) addresses: a `javascript:` URL planted in a search result must never become a link),
and the cost per stage.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from clearmed.evaluation.store import EvalRecord
from clearmed.metrics import LeakageReport, score_mcq
from clearmed.report.terminal import origin_of
from clearmed.retrieval.screening import screen
from clearmed.signatures.records import PATHWAYS, ROUTE_TABLE, Candidate, Decision, Passage, Route

# The Candidate fields known when this view was written. Fields added later (per-option probabilities from
# option scoring, for example) are shown generically instead of being dropped.
_KNOWN_CANDIDATE_FIELDS = frozenset(
    {
        "pathway",
        "answer",
        "rationale",
        "raw_answer",
        "passage_ids",
        "cited_passage_ids",
        "model",
        "retriever",
        "search_backend",
        "query",
        "error",
        "judgment",
        "search_plan",
    }
)
_INITIAL = {"parametric": "P", "local": "L", "dynamic": "D"}
# Rich styles of the route table, as CSS colours for the route badges.
_STYLE_COLOURS = {"green": "#2e7d32", "cyan": "#00838f", "magenta": "#8e24aa", "yellow": "#b28704", "red": "#c62828"}
Correctness = Literal["correct", "wrong", "unscored"]


def page_name(index: int, question_id: str) -> str:
    """A file name for a question page: unique by the run index, readable by the id."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", question_id).strip("-.")[:60] or "question"
    return f"{index:04d}-{slug}.html"


def route_colour(route: Route | None) -> str:
    spec = ROUTE_TABLE.get(route) if route is not None else None
    return _STYLE_COLOURS.get(spec.style, "#555") if spec is not None else "#555"


def route_meaning(route: Route | None) -> str:
    spec = ROUTE_TABLE.get(route) if route is not None else None
    return spec.meaning if spec is not None else ""


def agreement_pattern(decision: Decision) -> str:
    """Which pathways gave the same answer, e.g. "P=L≠D"; "-" for programs without three pathways."""
    agreement = decision.agreement
    if agreement is None:
        return "-"
    silent = [_INITIAL[p] for p in PATHWAYS if decision.bundle.candidate(p).answer is None]
    if agreement.parametric_local and agreement.local_dynamic:
        pattern = "P=L=D"
    elif agreement.parametric_local:
        pattern = "P=L≠D"
    elif agreement.parametric_dynamic:
        pattern = "P=D≠L"
    elif agreement.local_dynamic:
        pattern = "L=D≠P"
    else:
        answered = [_INITIAL[p] for p in PATHWAYS if _INITIAL[p] not in silent]
        pattern = "≠".join(answered) if len(answered) > 1 else ""
    if silent:
        pattern = (pattern + " " if pattern else "") + f"({','.join(silent)} no answer)"
    return pattern


def pathway_answers(decision: Decision) -> str:
    """Each pathway's answer in pathway order, e.g. "A A B" ("-": no answer); "" for one-pathway programs."""
    by_pathway = {c.pathway: c for c in decision.bundle.candidates}
    if len(by_pathway) < 2:
        return ""
    shown = [by_pathway[p].answer for p in PATHWAYS if p in by_pathway]
    return " ".join(answer.display()[:12] if answer is not None else "-" for answer in shown)


def has_error(decision: Decision) -> bool:
    """A failure anywhere in the trail: the decision, a pathway, a step, a follow-up search."""
    return bool(
        decision.error
        or decision.status != "answered"
        or any(c.error for c in decision.bundle.candidates)
        or any(step.error for step in decision.steps)
        or any(round_.error for round_ in decision.bundle.followups)
    )


class QuestionRow(BaseModel):
    """One line of the question list, and the filter values it carries."""

    model_config = ConfigDict(extra="forbid")

    index: int
    question_id: str
    page: str
    text: str
    answer: str
    gold: str
    correct: Correctness
    status: str
    route: str
    rule: str
    pattern: str
    pathway_answers: str  # e.g. "A A B": parametric, local, dynamic ("-" for no answer); "" for one-pathway programs
    error: bool
    leak: bool
    lm_calls: int
    tokens: int
    seconds: float


def answer_display(decision: Decision) -> str:
    return decision.answer.display() if decision.answer is not None else f"({decision.status})"


def gold_display(record: EvalRecord) -> str:
    question = record.decision.bundle.question
    if question.gold_letters:
        return ",".join(question.gold_letters)
    return question.gold_text or ""


def correctness(record: EvalRecord) -> Correctness:
    if record.score is None or record.score.rubric_grade is not None:
        return "unscored"
    return "correct" if record.score.correct else "wrong"


def question_row(record: EvalRecord, leak: LeakageReport | None) -> QuestionRow:
    decision = record.decision
    total = decision.total_usage()
    return QuestionRow(
        index=record.index,
        question_id=record.question_id,
        page=page_name(record.index, record.question_id),
        text=decision.bundle.question.text,
        answer=answer_display(decision),
        gold=gold_display(record),
        correct=correctness(record),
        status="degraded" if record.degraded else decision.status,  # apart from clean answers, as in the summary
        route=decision.route or "-",
        rule=decision.deciding_rule or "-",
        pattern=agreement_pattern(decision),
        pathway_answers=pathway_answers(decision),
        error=has_error(decision),
        leak=leak is not None and leak.flagged,
        lm_calls=decision.lm_calls(),
        tokens=total.prompt_tokens + total.completion_tokens,
        seconds=record.seconds,
    )


class OptionLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    letter: str
    text: str
    gold: bool
    predicted: bool
    pathways: list[str]  # the pathways whose answer includes this option
    probabilities: dict[str, float] = {}  # pathway -> this option's probability, where the pathway scored options


class PassageView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passage: Passage
    section: str  # "local", "web", or "follow-up 1 (guard)"
    origin: str
    href: str | None
    cited_by: list[str]
    quarantine: str | None  # why the evidence screen withheld the page from every prompt
    query: str | None  # the search that found it, when it is not the pathway's own query (a follow-up's)
    head: str  # the text, or its first few sentences when it is long; the rest is folded away
    tail: str


# Long passages (a textbook section, a whole web page) are folded after about this many characters.
_FOLD_AT = 600


def fold_text(text: str, at: int = _FOLD_AT) -> tuple[str, str]:
    """The text split at a word boundary near `at` characters: (head, tail); tail is "" when it is short.
    Runs of blank lines (web pages converted from layout tables) are shown as one."""
    text = re.sub(r"\n[ \t]*(?:\n[ \t]*)+\n", "\n\n", text)
    if len(text) <= at + at // 2:
        return text, ""
    cut = text.rfind(" ", 0, at)
    cut = cut if cut > at // 2 else at
    return text[:cut], text[cut:]


class CandidateView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidate: Candidate
    source: str
    correct: bool | None
    distribution: list[tuple[str, float]]  # per-option probabilities where the candidate records them
    extras: dict[str, str]  # fields newer than this view, as compact JSON


class StageCost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stage: str
    role: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cache_hits: int
    failed: int


class QuestionPage(BaseModel):
    """Everything a question page derives from its record (the template also reads the record itself)."""

    model_config = ConfigDict(extra="forbid")

    record: EvalRecord
    row: QuestionRow
    options: list[OptionLine]
    candidates: list[CandidateView]
    passages: list[PassageView]
    costs: list[StageCost]
    leak: LeakageReport | None


def safe_href(url: str | None) -> str | None:
    """Only web addresses become links; anything else (javascript:, data:, file:) is shown as text."""
    if url and re.match(r"^https?://[^\s\"'<>]+$", url, flags=re.IGNORECASE):
        return url
    return None


def _passages(decision: Decision) -> list[PassageView]:
    bundle = decision.bundle
    cited: dict[str, list[str]] = {}
    for candidate in bundle.candidates:
        for pid in candidate.cited_passage_ids:
            cited.setdefault(pid, []).append(candidate.pathway)
    followup_ids = {p.id for round_ in bundle.followups for p in round_.passages}
    sections: list[tuple[str, Passage]] = [("local", p) for p in bundle.local_passages]
    # The bundle lists follow-up results among the dynamic passages too: they are shown once, under their round.
    sections += [("web", p) for p in bundle.dynamic_passages if p.id not in followup_ids]
    for number, round_ in enumerate(bundle.followups, start=1):
        sections += [(f"follow-up {number} ({round_.trigger})", p) for p in round_.passages]
    own_query = {c.pathway: c.query for c in bundle.candidates}
    views, seen = [], set()
    for section, passage in sections:
        if passage.id in seen:
            continue
        seen.add(passage.id)
        screening = screen(passage)
        head, tail = fold_text(passage.text)
        query = passage.provenance.query
        views.append(
            PassageView(
                passage=passage,
                section=section,
                origin=origin_of(passage, full_url=True),
                href=safe_href(passage.provenance.url) if passage.provenance.kind == "web" else None,
                cited_by=cited.get(passage.id, []),
                quarantine=screening.reason() if screening.quarantined else None,
                query=query if query and query != own_query.get(passage.pathway) else None,
                head=head,
                tail=tail,
            )
        )
    return views


def _distribution(value: object, letters: Sequence[str]) -> list[tuple[str, float]] | None:
    """The first mapping of option letters to numbers found in `value` (searched depth-first)."""
    if isinstance(value, Mapping):
        keys = [str(k) for k in value]
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in value.values())
        if keys and numbers and all(k in letters for k in keys):
            return [(str(k), float(v)) for k, v in sorted(value.items())]
        for item in value.values():
            found = _distribution(item, letters)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for item in value:
            found = _distribution(item, letters)
            if found is not None:
                return found
    return None


def candidate_view(candidate: Candidate, decision: Decision) -> CandidateView:
    question = decision.bundle.question
    # Fields at their defaults say nothing about this candidate (a new field's default is how old records read).
    dumped = candidate.model_dump(mode="json", exclude_defaults=True)
    extras_raw = {k: v for k, v in dumped.items() if k not in _KNOWN_CANDIDATE_FIELDS}
    extras = {k: json.dumps(v, ensure_ascii=False)[:2000] for k, v in extras_raw.items() if v not in (None, [], {})}
    correct = None
    if question.is_mcq and question.gold_letters and candidate.answer is not None:
        correct = score_mcq(question, candidate.answer).correct
    return CandidateView(
        candidate=candidate,
        # A recorded pathway (`eval --pathway`) ran elsewhere: its model answered, and `recorded_from` names the file.
        source=f"recorded: {candidate.model}"
        if candidate.recorded_from
        else candidate.retriever or candidate.search_backend or candidate.model or "",
        correct=correct,
        distribution=_distribution(extras_raw, question.letters) or [],
        extras=extras,
    )


def _costs(decision: Decision) -> list[StageCost]:
    stages: dict[tuple[str, str], StageCost] = {}
    for row in decision.usage:
        key = (row.stage, row.role)
        cost = stages.setdefault(
            key,
            StageCost(
                stage=row.stage,
                role=row.role,
                calls=0,
                prompt_tokens=0,
                completion_tokens=0,
                seconds=0.0,
                cache_hits=0,
                failed=0,
            ),
        )
        cost.calls += 0 if row.cached else row.calls
        cost.prompt_tokens += row.prompt_tokens
        cost.completion_tokens += row.completion_tokens
        cost.seconds = round(cost.seconds + row.seconds, 3)
        cost.cache_hits += int(row.cached)
        cost.failed += int(row.failed)
    return list(stages.values())


def question_page(record: EvalRecord, leak: LeakageReport | None) -> QuestionPage:
    decision = record.decision
    question = decision.bundle.question
    predicted = set(decision.letters)
    gold = set(question.gold_letters or [])
    candidates = [candidate_view(c, decision) for c in decision.bundle.candidates]
    options = [
        OptionLine(
            letter=letter,
            text=text,
            gold=letter in gold,
            predicted=letter in predicted,
            pathways=[
                c.pathway for c in decision.bundle.candidates if c.answer is not None and letter in c.answer.letters
            ],
            probabilities={
                view.candidate.pathway: dict(view.distribution)[letter]
                for view in candidates
                if letter in dict(view.distribution)
            },
        )
        for letter, text in (question.options or {}).items()
    ]
    return QuestionPage(
        record=record,
        row=question_row(record, leak),
        options=options,
        candidates=candidates,
        passages=_passages(decision),
        costs=_costs(decision),
        leak=leak if leak is not None and leak.flagged else None,
    )
