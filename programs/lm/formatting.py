"""Rendering evidence and candidates as prompt inputs.

Evidence is rendered as quoted data: each passage is fenced between markers that name its id and source,
and any marker-like text inside a passage is neutralised so retrieved text cannot close the quote and
speak as the prompt. A passage the evidence screen quarantines (text addressed to the model, imitations of
the prompt, look-alike domains: `retrieval.screening`) is listed by id only, its text, title and address
withheld from every prompt. Truncation keeps prompts inside the budget of small backbones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from clearmed.retrieval.screening import screen
from clearmed.signatures.records import QUALITY_RANK, Candidate, Passage, QualityLabel, Question, SourceQuality

_OPEN = "<<<"
_CLOSE = ">>>"


def truncate_words(text: str, limit: int | None) -> str:
    if limit is None:
        return text
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + " ..."


def _neutralise(text: str) -> str:
    return text.replace(_OPEN, "< < <").replace(_CLOSE, "> > >").replace("[[ ##", "[ [ ##")


def _source(passage: Passage) -> str:
    prov = passage.provenance
    if prov.kind == "web":
        parts = [prov.domain or prov.url or "unknown site"]
        if prov.published:
            parts.append(f"published {prov.published.isoformat()}")
        if passage.quality:
            parts.append(f"quality {passage.quality}")
        return ", ".join(parts)
    return ", ".join(part for part in (prov.corpus, passage.title) if part) or "local corpus"


WITHHELD = "(text withheld: this page tries to instruct the reader or imitates an authority; it is not evidence)"


def _withheld_block(passage: Passage) -> str:
    quality = f", quality {passage.quality}" if passage.quality else ""
    return f"[{passage.id}] (quarantined source{quality})\n{_OPEN}\n{WITHHELD}\n{_CLOSE}"


def format_passages(
    passages: Sequence[Passage],
    words: int | None,
    *,
    empty: str = "(no passages)",
    min_quality: QualityLabel | None = None,
) -> str:
    """Passages as quoted blocks. With `min_quality`, passages labelled below it (or unlabelled) are listed
    with their source but without their text: what cannot count towards a decision does not argue in it."""
    if not passages:
        return empty
    blocks = []
    for passage in passages:
        if screen(passage).quarantined:
            blocks.append(_withheld_block(passage))
            continue
        source = _neutralise(_source(passage))
        if min_quality is not None and QUALITY_RANK[passage.quality or "low"] < QUALITY_RANK[min_quality]:
            note = f"(text not shown: {passage.quality or 'unlabelled'}-quality sources cannot settle this)"
            blocks.append(f"[{passage.id}] ({source})\n{_OPEN}\n{note}\n{_CLOSE}")
            continue
        text = _neutralise(truncate_words(passage.text, words))
        blocks.append(f"[{passage.id}] ({source})\n{_OPEN}\n{text}\n{_CLOSE}")
    return "\n".join(blocks)


# One rendered passage: its id line (and a results list's title line), then its fenced text. Text inside a fence
# never holds the closing marker (`_neutralise`), so the first closing line after an opening one ends the passage.
_PASSAGE_BLOCK = re.compile(
    rf"^\[[^\]\n]+\][^\n]*\n(?:title: [^\n]*\n)?{_OPEN}\n.*?\n{_CLOSE}$", flags=re.MULTILINE | re.DOTALL
)


def passage_blocks(text: str) -> list[re.Match[str]]:
    """The passages in a rendered evidence field (`format_passages`, `format_search_results`), in order."""
    return list(_PASSAGE_BLOCK.finditer(text))


def format_search_results(passages: Sequence[Passage], words: int | None, features: dict[str, str]) -> str:
    """Results for the quality assessment: id, URL, domain, date, prior features and a snippet."""
    blocks = []
    for passage in passages:
        if screen(passage).quarantined:  # its address and title are the attacker's words too
            blocks.append(f"[{passage.id}] (quarantined source)\ntitle: (withheld)\n{_OPEN}\n{WITHHELD}\n{_CLOSE}")
            continue
        prov = passage.provenance
        header = [f"[{passage.id}] {prov.url or ''}".strip()]
        if prov.published:
            header.append(f"date {prov.published.isoformat()}")
        if passage.id in features:
            header.append(features[passage.id])
        title = _neutralise(passage.title)
        text = _neutralise(truncate_words(passage.text, words))
        blocks.append(f"{'; '.join(header)}\ntitle: {title}\n{_OPEN}\n{text}\n{_CLOSE}")
    return "\n".join(blocks) if blocks else "(no results)"


def format_quality_counts(quality: SourceQuality) -> str:
    return f"source quality counts: high={quality.n_high}, medium={quality.n_medium}, low={quality.n_low}"


def format_candidates(candidates: Sequence[Candidate], rationale_words: int = 60) -> str:
    lines = []
    for candidate in candidates:
        if candidate.answer is None:
            reason = candidate.error.kind if candidate.error else "no answer"
            lines.append(f"{candidate.pathway}: (no answer: {reason})")
            continue
        cited = f" [cites {', '.join(candidate.cited_passage_ids)}]" if candidate.cited_passage_ids else ""
        rationale = _neutralise(truncate_words(candidate.rationale, rationale_words))
        lines.append(f"{candidate.pathway}: {candidate.answer.display()}{cited} - {rationale}")
    return "\n".join(lines)


def render_question(question: Question, context_words: int | None = None) -> str:
    """The question as the LM sees it: earlier conversation turns and any given context come first."""
    parts: list[str] = []
    if question.conversation and len(question.conversation) > 1:
        turns = "\n".join(f"{turn.role}: {turn.content}" for turn in question.conversation[:-1])
        parts.append(f"Conversation so far:\n{turns}")
    if question.context:
        parts.append(f"Context:\n{_OPEN}\n{_neutralise(truncate_words(question.context, context_words))}\n{_CLOSE}")
    parts.append(question.text if not parts else f"Question: {question.text}")
    return "\n\n".join(parts)
