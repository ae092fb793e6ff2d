"""Salvage for the judge: verdicts and answer recovered from a completion the typed parser rejected.

Whatever is recovered still goes through the verdict rules; a graph whose JSON is broken is judged without.
"""

from __future__ import annotations

import json
import re
from typing import TypeVar

from clearmed.programs.judge.graph import clean_graph
from clearmed.programs.judge.verdicts import cited_ids, judge
from clearmed.signatures.option_judge import EntityDraft, RelationDraft, VerdictDraft
from clearmed.signatures.records import JudgeMode, OptionJudgment, Question, StepError

_Draft = TypeVar("_Draft", EntityDraft, RelationDraft)

_SECTION = re.compile(r"\[\[ ## (\w+) ## \]\]\s*(.*?)(?=\[\[ ## \w+ ## \]\]|\Z)", re.DOTALL)
_VERDICT_LINE = re.compile(
    r"^\W*(?:option\s+)?\(?([A-Z])\)?\b(.*?)\b(supported|contradicted|insufficient)\b(.*)$", re.IGNORECASE
)


def raw_sections(raw: str) -> dict[str, str]:
    """ChatAdapter-style '[[ ## field ## ]]' sections of a raw completion."""
    return {name: body.strip() for name, body in _SECTION.findall(raw)}


def parse_verdict_lines(text: str) -> list[VerdictDraft]:
    """Salvage verdicts from text the typed parse rejected: JSON-ish lists, or one 'A: supported [L1]' per line.

    Used only after the adapter failed; whatever it recovers still goes through `validate_verdicts`.
    """
    drafts: list[VerdictDraft] = []
    for line in text.splitlines():
        match = _VERDICT_LINE.match(line.strip())
        if match is None:
            continue
        letter, before, label, after = match.groups()
        ids = cited_ids([before + " " + after])
        drafts.append(VerdictDraft(option=letter.upper(), evidence=ids, verdict=label.casefold()))
    if drafts:
        return drafts
    # A single-line JSON list cut or malformed: take each {...} object that names an option and a verdict.
    for obj in re.findall(r"\{[^{}]*\}", text):
        option = re.search(r'"option"\s*:\s*"([^"]*)"', obj)
        verdict = re.search(r'"verdict"\s*:\s*"([^"]*)"', obj)
        if option and verdict:
            evidence = re.search(r'"evidence"\s*:\s*\[([^\]]*)\]', obj)
            drafts.append(
                VerdictDraft(
                    option=option.group(1),
                    evidence=cited_ids([evidence.group(1)]) if evidence else [],
                    verdict=verdict.group(1),
                )
            )
    return drafts


def salvage(
    question: Question, error: StepError | None, evidence_ids: set[str], mode: JudgeMode
) -> OptionJudgment | None:
    """Recover verdicts and answer from the raw completion of a failed parse; None if there is nothing to use."""
    if error is None or error.kind != "parse_error" or not error.raw_output:
        return None
    sections = raw_sections(error.raw_output)
    drafts: list[VerdictDraft] = parse_verdict_lines(sections.get("verdicts", ""))
    answer = sections.get("answer")
    if not drafts and not answer:
        return None
    graph = None
    if mode == "explicit":
        # The graph is an intermediate: when its JSON is broken, judge without it (an empty graph is allowed).
        graph = clean_graph(
            _drafts(sections.get("entities"), EntityDraft),
            _drafts(sections.get("relations"), RelationDraft),
            evidence_ids,
        )
    judgment = judge(
        question, drafts, evidence_ids, stated_decision=sections.get("decision"), model_answer=answer, graph=graph
    )
    return judgment.model_copy(update={"salvaged": True})


def _drafts(text: str | None, model: type[_Draft]) -> list[_Draft]:
    if not text:
        return []
    try:
        items = json.loads(text)
    except json.JSONDecodeError:
        return []
    out: list[_Draft] = []
    for item in items if isinstance(items, list) else []:
        try:
            out.append(model.model_validate(item))
        except ValueError:
            continue
    return out
