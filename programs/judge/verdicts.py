"""The option-wise judge's rules (MedJudgeRAG 3.2-3.3) as pure functions: no LM, table-testable.

The model writes verdicts, a decision and an answer; here the verdicts are normalised and their citations
checked against the evidence, the decision is derived from the verdicts (grounded > elimination >
parametric), and the answer is taken only where the decision allows it. Anything the rules cannot reconcile
becomes no answer with a reason, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from clearmed.programs.lm.parsing import parse_letters
from clearmed.signatures.option_judge import VerdictDraft
from clearmed.signatures.records import (
    Answer,
    JudgeDecision,
    KnowledgeGraph,
    OptionJudgment,
    OptionVerdict,
    Question,
    Verdict,
)

# ------------------------------------------------------------------------------------------- verdict labels

_VERDICT_WORDS: dict[str, Verdict] = {
    "supported": "supported",
    "support": "supported",
    "supports": "supported",
    "correct": "supported",
    "contradicted": "contradicted",
    "contradict": "contradicted",
    "contradicts": "contradicted",
    "refuted": "contradicted",
    "incorrect": "contradicted",
    "insufficient": "insufficient",
    "unsupported": "insufficient",
    "unclear": "insufficient",
    "unknown": "insufficient",
    "neutral": "insufficient",
}


def normalise_verdict(text: str) -> Verdict | None:
    """'SUPPORTED', 'Supported.', '**contradicted**', 'not enough evidence' -> a verdict; None if unrecognised."""
    words = re.findall(r"[a-z]+", text.casefold())
    if not words:
        return None
    if words[0] in ("not", "no") and len(words) > 1:
        return "insufficient" if words[1] in ("enough", "sufficient", "evidence", "mentioned", "addressed") else None
    return _VERDICT_WORDS.get(words[0])


def normalise_letter(text: str, letters: Sequence[str]) -> str | None:
    """'A', 'a)', 'Option B', '(C) Aspirin' -> the letter when it is one of `letters`."""
    match = re.match(r"^\s*(?:option\s+)?\(?([A-Za-z])\)?(?:[\s.:)\-]|$)", text, re.IGNORECASE)
    if match is None:
        return None
    letter = match.group(1).upper()
    return letter if letter in letters else None


_DECISION_WORDS: dict[str, JudgeDecision] = {"grounded": "grounded", "elimination": "elimination"}


def normalise_decision(text: str | None) -> JudgeDecision | None:
    words = re.findall(r"[a-z]+", (text or "").casefold())
    if not words:
        return None
    if words[0] == "parametric":
        return "parametric"
    return _DECISION_WORDS.get(words[0])


# ------------------------------------------------------------------------------------------- citations

_ID = re.compile(r"[A-Z]\d+(?:\.\d+)?")


def cited_ids(raw: Iterable[str]) -> list[str]:
    """Ids named in a citation list, tolerant of '[L1]', 'L1, L2', 'W3 (cdc)'; order kept, duplicates dropped."""
    out: list[str] = []
    for item in raw:
        for found in _ID.findall(str(item).upper()):
            if found not in out:
                out.append(found)
    return out


def resolve_citations(
    ids: Sequence[str], evidence_ids: set[str], graph: KnowledgeGraph | None
) -> tuple[list[str], list[str]]:
    """(passage ids the citations rest on, ids that name nothing in the evidence).

    A graph element (E1, R2) stands for the passages it cites: citing it is citing them.
    """
    elements: dict[str, list[str]] = {}
    if graph is not None:
        elements = {e.id: e.evidence for e in graph.entities} | {r.id: r.evidence for r in graph.relations}
    passages: list[str] = []
    unknown: list[str] = []
    for cited in ids:
        resolved = [cited] if cited in evidence_ids else elements.get(cited)
        if not resolved:
            unknown.append(cited)
            continue
        passages.extend(p for p in resolved if p not in passages)
    return passages, unknown


# ------------------------------------------------------------------------------------------- verdicts


def validate_verdicts(
    drafts: Sequence[VerdictDraft],
    question: Question,
    evidence_ids: set[str],
    graph: KnowledgeGraph | None = None,
) -> tuple[list[OptionVerdict], int, list[str]]:
    """One validated verdict per option, the number of invalid citations, and the options left unjudged.

    Rules: an unrecognised label, a supported/contradicted verdict citing nothing, or citing any id that is
    not in the evidence is invalid and counts as insufficient. A second verdict for the same option is
    ignored (the first one stands). An option with no verdict is insufficient and listed as missing.
    """
    letters = question.letters
    by_letter: dict[str, OptionVerdict] = {}
    invalid_citations = 0
    for draft in drafts:
        letter = normalise_letter(draft.option, letters)
        if letter is None or letter in by_letter:
            continue
        stated = normalise_verdict(draft.verdict)
        ids = cited_ids(draft.evidence)
        passages, unknown = resolve_citations(ids, evidence_ids, graph)
        invalid_citations += len(unknown)
        reason: str | None = None
        if stated is None:
            reason = f"unrecognised verdict {draft.verdict!r}"
        elif stated != "insufficient" and unknown:
            reason = f"cites {', '.join(unknown)}, not in the evidence"
        elif stated != "insufficient" and not passages:
            reason = "cites no evidence"
        by_letter[letter] = OptionVerdict(
            letter=letter,
            verdict="insufficient" if reason else stated,  # type: ignore[arg-type]
            stated=draft.verdict.strip(),
            cited_ids=passages,
            reason=draft.note.strip(),
            invalid_reason=reason,
        )
    missing = [letter for letter in letters if letter not in by_letter]
    for letter in missing:
        by_letter[letter] = OptionVerdict(letter=letter, verdict="insufficient", invalid_reason="no verdict given")
    return [by_letter[letter] for letter in letters], invalid_citations, missing


def decide(verdicts: Sequence[OptionVerdict]) -> JudgeDecision:
    """grounded if any option is supported; elimination if none is but some are contradicted; else parametric."""
    labels = {v.verdict for v in verdicts}
    if "supported" in labels:
        return "grounded"
    if "contradicted" in labels:
        return "elimination"
    return "parametric"


def answer_from_verdicts(
    question: Question, verdicts: Sequence[OptionVerdict], decision: JudgeDecision, model_answer: str | None
) -> tuple[Answer | None, str]:
    """The answer the decision allows, and the rule that produced it (or why there is none).

    grounded: the supported options. Multi-answer: all of them. Single: the model's answer if it is supported,
    else the only supported option; several supported and the model named none of them -> no answer.
    elimination: the model's answer among the options not contradicted, or the only one left.
    parametric: the model's own answer.
    """
    options = question.options or {}
    parsed = parse_letters(model_answer, options, question.answer_mode) if model_answer else None
    chosen = set(parsed or ())
    supported = [v.letter for v in verdicts if v.verdict == "supported"]
    contradicted = {v.letter for v in verdicts if v.verdict == "contradicted"}
    if decision == "grounded":
        if question.answer_mode == "multi":
            return Answer(letters=tuple(supported)), "grounded: every supported option"
        if chosen and chosen <= set(supported):
            return Answer(letters=tuple(chosen)), "grounded: the model's answer is supported"
        if len(supported) == 1:
            return Answer.of_letters(supported[0]), "grounded: the only supported option"
        return None, f"grounded: options {', '.join(supported)} are all supported and the answer names none of them"
    if decision == "elimination":
        remaining = [letter for letter in question.letters if letter not in contradicted]
        if not remaining:
            return None, "elimination: every option is contradicted"
        if chosen and chosen <= set(remaining):
            return Answer(letters=tuple(chosen)), "elimination: the model's answer among the remaining options"
        if len(remaining) == 1:
            return Answer.of_letters(remaining[0]), "elimination: the only option not contradicted"
        if chosen:
            return None, "elimination: the model's answer is an option it judged contradicted"
        return None, "elimination: no parseable answer among the remaining options"
    if parsed:
        return Answer(letters=parsed), "parametric: the model's own answer"
    return None, "parametric: no parseable answer"


# ------------------------------------------------------------------------------------------- the whole judgement


def judge(
    question: Question,
    drafts: Sequence[VerdictDraft],
    evidence_ids: set[str],
    *,
    stated_decision: str | None,
    model_answer: str | None,
    graph: KnowledgeGraph | None = None,
) -> OptionJudgment:
    verdicts, invalid, missing = validate_verdicts(drafts, question, evidence_ids, graph)
    decision = decide(verdicts)
    answer, rule = answer_from_verdicts(question, verdicts, decision, model_answer)
    return OptionJudgment(
        mode="explicit" if graph is not None else "implicit",
        graph=graph,
        verdicts=verdicts,
        decision=decision,
        stated_decision=stated_decision,
        model_answer=model_answer,
        answer=answer,
        answer_rule=rule,
        eliminated=[v.letter for v in verdicts if v.verdict == "contradicted"] if decision == "elimination" else [],
        invalid_citations=invalid,
        missing_verdicts=missing,
    )
