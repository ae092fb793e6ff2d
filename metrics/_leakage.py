"""Leakage audit (CLEAR Table 6): retrieved passages that reproduce the benchmark item they serve.

A passage is flagged when it repeats much of the question stem (shared word 8-grams), or contains the gold
option's text verbatim together with another option's text (an item with its answer key, not a textbook
sentence that happens to name the answer), or two or more option texts verbatim.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from clearmed.signatures.records import Decision, Passage, Question

_WORD = re.compile(r"[a-z0-9]+")
SHINGLE = 8


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _shingles(words: list[str], size: int = SHINGLE) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + size]) for i in range(max(0, len(words) - size + 1))}


def _contains(haystack: str, needle: str) -> bool:
    """Verbatim up to case and punctuation; options of one or two short words are too common to count."""
    words = _words(needle)
    if len(words) < 2 or len(" ".join(words)) < 8:
        return False
    return f" {' '.join(words)} " in f" {' '.join(_words(haystack))} "


class PassageLeak(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passage_id: str
    source: str
    stem_overlap: float = Field(description="share of the stem's 8-word shingles found in the passage")
    options_verbatim: int
    gold_verbatim: bool
    reasons: list[str]


class LeakageReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question_id: str
    leaks: list[PassageLeak] = Field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return bool(self.leaks)


def passage_leak(question: Question, passage: Passage, *, stem_threshold: float = 0.5) -> PassageLeak | None:
    stem = _shingles(_words(question.text))
    overlap = len(stem & _shingles(_words(passage.text))) / len(stem) if stem else 0.0
    options = question.options or {}
    verbatim = [letter for letter, text in options.items() if _contains(passage.text, text)]
    gold = set(question.gold_letters or [])
    gold_verbatim = bool(gold & set(verbatim))
    reasons = []
    if overlap >= stem_threshold:
        reasons.append(f"repeats {overlap:.0%} of the question stem")
    if len(verbatim) >= 2:
        reasons.append(f"contains options {', '.join(verbatim)} verbatim")
    if not reasons:
        return None
    prov = passage.provenance
    source = prov.url or f"{prov.corpus or 'corpus'}:{prov.doc_id or passage.id}"
    return PassageLeak(
        passage_id=passage.id,
        source=source,
        stem_overlap=round(overlap, 3),
        options_verbatim=len(verbatim),
        gold_verbatim=gold_verbatim,
        reasons=reasons,
    )


def audit_leakage(question: Question, decision: Decision, *, stem_threshold: float = 0.5) -> LeakageReport:
    """Every local, web and follow-up passage of a decision, checked against its own question."""
    bundle = decision.bundle
    passages = [*bundle.local_passages, *bundle.all_dynamic_passages()]
    leaks = [leak for p in passages if (leak := passage_leak(question, p, stem_threshold=stem_threshold))]
    return LeakageReport(question_id=question.id, leaks=leaks)
