"""Teacher traces -> an SFT dataset in chat JSONL (MedJudgeRAG's training recipe, section 3.4).

Run the judge with a strong teacher backbone (`clearmed eval --program clear-judge-explicit -c <teacher config>`),
then export its judgements from the run folders. Each kept trace becomes one chat example: the judge's
instructions, the question with options and the same evidence the judge saw, and a target `[g; r]`: the
knowledge graph between <KG> tags (empty in implicit mode), then the <ANALYSIS> delimiter and the option-wise
verdicts, decision and answer. `segments` marks the character spans of the two parts with their loss weights
(lambda_g for the graph, 1 for the reasoning) so a trainer can weight tokens by segment.

Only traces passing the paper's validation are kept, and every rejection is counted by reason:
format (typed parse failed, verdict missing, decision or answer unparseable, no graph in explicit mode),
decision_inconsistent (the stated decision is not the one the verdicts imply), answer_inconsistent (the stated
answer is not the one the decision allows), invalid_citation (a verdict or graph element cited evidence that
does not exist), wrong_answer (disagrees with gold) and leakage (answer-revealing phrases).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import Field

from clearmed.programs.judge.verdicts import normalise_decision
from clearmed.programs.lm.parsing import answer_format, format_options, parse_letters
from clearmed.programs.lm.prompting import format_passages, render_question
from clearmed.signatures.option_judge import JudgeOptions, JudgeOptionsWithGraph
from clearmed.signatures.records import Decision, KnowledgeGraph, OptionJudgment, Passage, PathwayName, Record

RejectReason = Literal[
    "format", "decision_inconsistent", "answer_inconsistent", "invalid_citation", "wrong_answer", "leakage"
]
ANALYSIS = "<ANALYSIS>"
# Phrases that give the answer away instead of reasoning to it (MedJudgeRAG: "the correct answer is",
# "obviously option A").
LEAKAGE = re.compile(
    r"\b(the\s+(correct|right|best)\s+answer\s+is|answer\s+is\s+(option\s+)?[A-J]\b|obviously\s+(option\s+)?[A-J]\b"
    r"|clearly\s+option\s+[A-J]\b|as\s+the\s+answer\s+key)",
    re.IGNORECASE,
)


class ChatMessage(Record):
    role: Literal["system", "user", "assistant"]
    content: str


class Segment(Record):
    """A character span of the assistant target and the loss weight of its tokens."""

    name: Literal["kg", "reasoning"]
    start: int
    end: int
    weight: float


class SftExample(Record):
    id: str
    messages: list[ChatMessage]
    segments: list[Segment]
    lambda_g: float
    question_id: str
    pathway: PathwayName
    mode: Literal["implicit", "explicit"]
    decision: str
    source: str = ""


class ExportReport(Record):
    considered: int = 0
    kept: int = 0
    rejected: dict[str, int] = Field(default_factory=dict)
    out: str = ""

    @property
    def pass_rate(self) -> float:
        return self.kept / self.considered if self.considered else 0.0


def render_graph(graph: KnowledgeGraph | None) -> str:
    lines = ["<KG>"]
    for entity in graph.entities if graph else []:
        lines.append(f"ENTITY {entity.id} | {entity.name} | {entity.type} | [{', '.join(entity.evidence)}]")
    for rel in graph.relations if graph else []:
        lines.append(f"RELATION {rel.id} | {rel.source} {rel.relation} {rel.target} | [{', '.join(rel.evidence)}]")
    lines.append("</KG>")
    return "\n".join(lines)


def render_analysis(judgment: OptionJudgment) -> str:
    lines = [ANALYSIS]
    for verdict in judgment.verdicts:
        cited = ", ".join(verdict.cited_ids) or "none"
        note = f" | {verdict.reason}" if verdict.reason else ""
        lines.append(f"[{verdict.letter}] evidence: {cited}{note} | verdict: {verdict.verdict.upper()}")
    lines.append(f"DECISION: {judgment.decision}")
    lines.append(f"ANSWER: {judgment.answer.display() if judgment.answer else ''}")
    return "\n".join(lines)


def render_target(judgment: OptionJudgment) -> tuple[str, int]:
    """The assistant target and where the reasoning segment starts (the <ANALYSIS> delimiter belongs to it)."""
    graph = render_graph(judgment.graph) + "\n" if judgment.mode == "explicit" else ""
    return graph + render_analysis(judgment), len(graph)


def rejection(decision: Decision, judgment: OptionJudgment) -> RejectReason | None:
    """The first validation the trace fails, in the paper's order (format, then semantic checks), or None."""
    question = decision.bundle.question
    if (
        judgment.salvaged
        or judgment.missing_verdicts
        or judgment.answer is None
        or normalise_decision(judgment.stated_decision) is None
        or (judgment.mode == "explicit" and judgment.graph is None)
    ):
        return "format"
    if normalise_decision(judgment.stated_decision) != judgment.decision:
        return "decision_inconsistent"
    stated = parse_letters(judgment.model_answer, question.options or {}, question.answer_mode)
    if stated is None or tuple(stated) != judgment.answer.letters:
        return "answer_inconsistent"
    cleanup = judgment.graph.cleanup if judgment.graph else None
    if (
        judgment.invalid_citations
        or any(not v.valid for v in judgment.verdicts)
        or (cleanup and cleanup.citations_removed)
    ):
        return "invalid_citation"
    if not question.gold_letters or list(judgment.answer.letters) != question.gold_letters:
        return "wrong_answer"
    text = render_target(judgment)[0]
    if LEAKAGE.search(text) or LEAKAGE.search(judgment.model_answer or ""):
        return "leakage"
    return None


def _evidence(decision: Decision, pathway: PathwayName) -> list[Passage]:
    return decision.bundle.local_passages if pathway == "local" else decision.bundle.dynamic_passages


def build_example(
    decision: Decision, pathway: PathwayName, judgment: OptionJudgment, *, lambda_g: float, passage_words: int | None
) -> SftExample:
    question = decision.bundle.question
    signature = JudgeOptionsWithGraph if judgment.mode == "explicit" else JudgeOptions
    user = "\n\n".join(
        [
            f"Question:\n{render_question(question)}",
            f"Options:\n{format_options(question)}",
            f"Answer format: {answer_format(question)}",
            f"Evidence:\n{format_passages(_evidence(decision, pathway), passage_words)}",
        ]
    )
    target, boundary = render_target(judgment)
    return SftExample(
        id=f"{question.id}:{pathway}",
        messages=[
            ChatMessage(role="system", content=signature.instructions),
            ChatMessage(role="user", content=user),
            ChatMessage(role="assistant", content=target),
        ],
        segments=[
            Segment(name="kg", start=0, end=boundary, weight=lambda_g),
            Segment(name="reasoning", start=boundary, end=len(target), weight=1.0),
        ],
        lambda_g=lambda_g,
        question_id=question.id,
        pathway=pathway,
        mode=judgment.mode,
        decision=judgment.decision,
    )


def export_sft(
    decisions: Iterable[tuple[Decision, str]],
    out: Path,
    *,
    lambda_g: float = 0.0,
    pathways: tuple[PathwayName, ...] = ("local", "dynamic"),
    passage_words: int | None = None,
    exclude_ids: frozenset[str] = frozenset(),
) -> ExportReport:
    """Write the validated traces of `decisions` (each with a source label) to `out` as chat JSONL."""
    if not 0.0 <= lambda_g <= 1.0:
        raise ValueError(f"lambda_g must be in [0, 1], got {lambda_g}")
    reasons: Counter[str] = Counter()
    considered = kept = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for decision, source in decisions:
            if decision.bundle.question.id in exclude_ids:
                continue  # held-out (test) questions never become training data
            for pathway in pathways:
                judgment = decision.bundle.candidate(pathway).judgment
                if judgment is None:
                    continue
                considered += 1
                reason = rejection(decision, judgment)
                if reason is not None:
                    reasons[reason] += 1
                    continue
                example = build_example(decision, pathway, judgment, lambda_g=lambda_g, passage_words=passage_words)
                handle.write(example.model_copy(update={"source": source}).model_dump_json() + "\n")
                kept += 1
    return ExportReport(considered=considered, kept=kept, rejected=dict(reasons), out=str(out))
