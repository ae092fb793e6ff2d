"""The bundle's evidence as the verifier and the assessors read it: passages cited by a pathway first, within
the configured budget, web results with their quality labels and the quality counts over all of them."""

from __future__ import annotations

from clearmed.programs.lm.formatting import format_passages, format_quality_counts
from clearmed.programs.lm.run_context import current
from clearmed.signatures.records import EvidenceBundle, Passage, QualityLabel


def select_passages(passages: list[Passage], cited: set[str], limit: int | None) -> list[Passage]:
    """At most `limit` passages, the ones a pathway cited first, then by retrieval order."""
    if limit is None or len(passages) <= limit:
        return passages
    ranked = sorted(passages, key=lambda p: (p.id not in cited, passages.index(p)))
    return sorted(ranked[:limit], key=passages.index)


def _cited(bundle: EvidenceBundle) -> set[str]:
    return {pid for candidate in bundle.candidates for pid in candidate.cited_passage_ids}


def render_local_evidence(bundle: EvidenceBundle) -> str:
    settings = current().settings
    passages = select_passages(bundle.local_passages, _cited(bundle), settings.verifier_passages)
    return format_passages(passages, settings.passage_words)


def render_dynamic_evidence(bundle: EvidenceBundle, min_quality: QualityLabel | None = None) -> str:
    """Initial and follow-up web evidence with quality labels, and the quality counts over all of it.

    `min_quality` shows the text of only those passages labelled at least that good (see `format_passages`).
    """
    settings = current().settings
    cited = _cited(bundle)
    passages = select_passages(bundle.dynamic_passages, cited, settings.verifier_passages)
    for round_ in bundle.followups:
        passages += select_passages(round_.passages, cited, settings.verifier_passages)
    shown = format_passages(passages, settings.passage_words, min_quality=min_quality)
    return f"{shown}\n{format_quality_counts(bundle.dynamic_quality())}"
