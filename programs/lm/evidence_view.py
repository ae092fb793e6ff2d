"""The bundle's evidence as the verifier and the assessors read it: passages cited by a pathway first, within
the configured budget, web results with their quality labels and the quality counts over all of them."""

from __future__ import annotations

from collections.abc import Set

from clearmed.programs.lm.formatting import format_passages, format_quality_counts
from clearmed.programs.lm.prompt_fit import RankedEvidence
from clearmed.programs.lm.run_context import current
from clearmed.signatures.records import EvidenceBundle, FollowUpRound, Passage, QualityLabel


def select_passages(passages: list[Passage], cited: set[str], limit: int | None) -> list[Passage]:
    """At most `limit` passages, the ones a pathway cited first, then by retrieval order: a new list, never the
    record's own (a caller that extended the record's list would add follow-up pages to the bundle's initial ones)."""
    if limit is None or len(passages) <= limit:
        return list(passages)
    ranked = sorted(passages, key=lambda p: (p.id not in cited, passages.index(p)))
    return sorted(ranked[:limit], key=passages.index)


def _cited(bundle: EvidenceBundle) -> set[str]:
    return {pid for candidate in bundle.candidates for pid in candidate.cited_passage_ids}


def drop_order(passages: list[Passage], cited: Set[str], followup: Set[str] = frozenset()) -> list[str]:
    """The order a prompt that must shrink leaves the shown passages out in (`prompt_fit`): uncited first-search
    passages, then cited ones, then follow-up pages, each lowest-ranked first. The renderers list passages in
    retrieval order, so the last blocks are often the cited ones (kept by `select_passages` from low ranks) or a
    follow-up round: what the verifier, guard and audit most need."""
    ranked = sorted(enumerate(passages), key=lambda item: (item[1].id in followup, item[1].id in cited, -item[0]))
    return [passage.id for _, passage in ranked]


def render_local_evidence(bundle: EvidenceBundle) -> str:
    settings = current().settings
    cited = _cited(bundle)
    passages = select_passages(bundle.local_passages, cited, settings.verifier_passages)
    return RankedEvidence(format_passages(passages, settings.passage_words), drop_order(passages, cited))


def render_dynamic_evidence(bundle: EvidenceBundle, min_quality: QualityLabel | None = None) -> str:
    """Initial and follow-up web evidence with quality labels, and the quality counts over all of it.

    `min_quality` shows the text of only those passages labelled at least that good (see `format_passages`).
    """
    settings = current().settings
    cited = _cited(bundle)
    passages = select_passages(bundle.dynamic_passages, cited, settings.verifier_passages)
    followup: set[str] = set()
    for round_ in bundle.followups:
        shown_round = select_passages(round_.passages, cited, settings.verifier_passages)
        followup.update(p.id for p in shown_round)
        passages += shown_round
    shown = format_passages(passages, settings.passage_words, min_quality=min_quality)
    text = f"{shown}\n{format_quality_counts(bundle.dynamic_quality())}"
    return RankedEvidence(text, drop_order(passages, cited, followup))


def render_round_evidence(round_: FollowUpRound, min_quality: QualityLabel | None = None) -> str:
    """One follow-up round's web results with their quality labels, and its own quality counts: what the guard and
    the audit rule on (the CLEAR code's adjudicator reads "only the supplied second-search evidence")."""
    settings = current().settings
    passages = select_passages(round_.passages, set(), settings.verifier_passages)
    shown = format_passages(passages, settings.passage_words, min_quality=min_quality)
    return f"{shown}\n{format_quality_counts(round_.source_quality)}"
