"""Source-quality priors: a rule-based label for a web passage from its domain, date and content type.

Two uses: `prior_features` is the one-line description the LLM source-quality assessment sees next to each
result, and `assess_with_priors` stands in for that assessment when it fails
(`SourceQuality(origin="prior")`).

A domain's authority tier (and the suffix matching that keeps look-alikes out) is `domain_tiers`'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clearmed.retrieval.domain_tiers import domain_tier, host_of
from clearmed.signatures.records import DomainTier, Passage, QualityAssessment, QualityLabel, SourceQuality

ContentType = Literal[
    "guideline",
    "systematic_review",
    "rct",
    "case_report",
    "patient_education",
    "reference",
    "news",
    "forum",
    "other",
]

TIER_DESCRIPTIONS: dict[DomainTier, str] = {
    "government": "government health agency or guideline body",
    "literature": "peer-reviewed literature or bibliographic database",
    "academic": "academic medical centre or clinical reference",
    "media": "health media site",
    "low": "blog, forum, social or commercial site",
    "unknown": "unrecognised site",
}

CONTENT_DESCRIPTIONS: dict[ContentType, str] = {
    "guideline": "clinical guideline or recommendation",
    "systematic_review": "systematic review or meta-analysis",
    "rct": "randomised controlled trial",
    "case_report": "case report",
    "patient_education": "patient education page",
    "reference": "reference or textbook entry",
    "news": "news article",
    "forum": "forum or user discussion",
    "other": "unclassified",
}

# Content-type cues, checked in order; the first that matches decides. URL cues come before text cues.
_URL_CUES: tuple[tuple[ContentType, re.Pattern[str]], ...] = (
    ("forum", re.compile(r"(^|[/.])(forums?|community|discussions?|threads?|answers)([/.]|$)|/r/|/t/")),
    ("guideline", re.compile(r"guideline|/recommendation|/consensus|/position-statement|/clinical-practice")),
    ("systematic_review", re.compile(r"[/.]cd\d{6}|/cdsr/|systematic-review|meta-analysis")),
    ("news", re.compile(r"/news/|/press-release|/newsroom|/blogs?/")),
    (
        "patient_education",
        re.compile(r"/patient|/health-?topics?/|/healthtopics|medlineplus|/conditions/|/symptoms"),
    ),
)
_TEXT_CUES: tuple[tuple[ContentType, re.Pattern[str]], ...] = (
    (
        "guideline",
        re.compile(
            r"\b(clinical practice guidelines?|guidelines?|recommendation statement|consensus statement"
            r"|practice parameter)\b"
        ),
    ),
    (
        "systematic_review",
        re.compile(r"\b(systematic review|meta-analys[ie]s|cochrane review|pooled analysis)\b"),
    ),
    (
        "rct",
        re.compile(r"\b(randomi[sz]ed (controlled|clinical|double-blind)|double-blind|placebo-controlled)\b"),
    ),
    ("case_report", re.compile(r"\b(case report|we report a case|we present a case|a case of)\b")),
    ("news", re.compile(r"\b(press release|news release|reported today|said in a statement)\b")),
    ("forum", re.compile(r"\b(posted by|reply #?\d|my (doctor|husband|wife|mom) (said|told)|anyone else)\b")),
    (
        "patient_education",
        re.compile(
            r"\b(what is \(are\)|what are the symptoms|talk (to|with) your doctor|patient information"
            r"|how is .{1,40} treated)\b"
        ),
    ),
)


DEFAULT_LABEL_CEILINGS: dict[DomainTier, QualityLabel] = {
    "government": "high",
    "literature": "high",
    "academic": "high",
    "media": "medium",
    "unknown": "low",
    "low": "low",
}


DEFAULT_TIER_WEIGHTS: dict[DomainTier, float] = {
    "government": 0.85,
    "literature": 0.8,
    "academic": 0.75,
    "media": 0.45,
    "low": 0.1,
    "unknown": 0.3,
}
DEFAULT_CONTENT_BONUS: dict[ContentType, float] = {
    "guideline": 0.1,
    "systematic_review": 0.1,
    "rct": 0.05,
    "case_report": -0.05,
    "patient_education": 0.0,
    "reference": 0.0,
    "news": -0.1,
    "forum": -0.3,
    "other": 0.0,
}


class QualityPriors(BaseModel):
    """Every number the prior uses, so it can be tuned (and is recorded) like the adjudication thresholds."""

    model_config = ConfigDict(extra="forbid")

    tier_weights: dict[DomainTier, float] = Field(default_factory=lambda: dict(DEFAULT_TIER_WEIGHTS))
    content_bonus: dict[ContentType, float] = Field(default_factory=lambda: dict(DEFAULT_CONTENT_BONUS))
    # Up to `recency_weight` for brand-new pages, halving every `half_life_years`; an undated page gets half.
    recency_weight: float = Field(default=0.1, ge=0)
    half_life_years: float = Field(default=5.0, gt=0)
    # Medical advice ages: past this, a page is penalised regardless of source.
    max_age_years: float = Field(default=15.0, gt=0)
    too_old_penalty: float = Field(default=0.2, ge=0)
    high_at: float = 0.8
    medium_at: float = 0.45
    # The best label a page may carry, whatever the LLM assessment says, by its domain's tier: an LLM may lower
    # a recognised source's label but not raise a blog, a forum or an unrecognised site to a quality that
    # counts towards overturning a consensus (the guard's n_high, the audit's n_high and n_medium). Only the
    # domain decides, never the page's own text, which is the attacker's to write ("official guideline").
    label_ceilings: dict[DomainTier, QualityLabel] = Field(default_factory=lambda: dict(DEFAULT_LABEL_CEILINGS))

    @field_validator("label_ceilings")
    @classmethod
    def _every_tier(cls, value: dict[DomainTier, QualityLabel]) -> dict[DomainTier, QualityLabel]:
        # A config that relaxes one tier (`label_ceilings = { unknown = "medium" }`) keeps the others.
        return {**DEFAULT_LABEL_CEILINGS, **value}

    @model_validator(mode="after")
    def _ordered_cuts(self) -> QualityPriors:
        if self.medium_at > self.high_at:
            raise ValueError(f"medium_at ({self.medium_at}) must not exceed high_at ({self.high_at})")
        return self


# --------------------------------------------------------------------------------------------- features


def content_type(passage: Passage) -> ContentType:
    url = (passage.provenance.url or "").lower()
    for kind, pattern in _URL_CUES:
        if pattern.search(url):
            return kind
    text = f"{passage.title}\n{passage.text[:1500]}".lower()
    for kind, pattern in _TEXT_CUES:
        if pattern.search(text):
            return kind
    if passage.provenance.kind == "corpus":
        return "reference"
    return "other"


def _display_domain(host: str | None, matched: str | None) -> str:
    if not host:
        return "unknown"
    if matched and "." in matched:
        return matched
    # Generic suffix matches (".gov", ".edu") and unknowns: show the last two labels, which is what a reader
    # recognises ("cdc.gov", "harvard.edu"), without a public-suffix list.
    labels = host.split(".")
    return (
        ".".join(labels[-3:])
        if len(labels) >= 3 and len(labels[-1]) == 2 and len(labels[-2]) <= 3
        else ".".join(labels[-2:])
    )


def prior_features(passage: Passage) -> str:
    """One line for the LLM assessor, e.g.
    "domain cancer.gov (government health agency or guideline body); published 2024-03; content type: patient
    education page"."""
    host = host_of(passage)
    tier, matched = domain_tier(host, passage.provenance.url)
    if host is None and passage.provenance.kind == "corpus":
        source = f"corpus {passage.provenance.corpus or 'unknown'} (curated local corpus)"
    else:
        source = f"domain {_display_domain(host, matched)} ({TIER_DESCRIPTIONS[tier]})"
    published = passage.provenance.published
    when = f"published {published:%Y-%m}" if published else "publication date unknown"
    return f"{source}; {when}; content type: {CONTENT_DESCRIPTIONS[content_type(passage)]}"


# --------------------------------------------------------------------------------------------- scoring


def prior_score(passage: Passage, priors: QualityPriors, today: date) -> float:
    tier, _ = domain_tier(host_of(passage), passage.provenance.url)
    score = priors.tier_weights.get(tier, 0.0) + priors.content_bonus.get(content_type(passage), 0.0)
    published = passage.provenance.published
    if published is None:
        score += priors.recency_weight * 0.5
    else:
        age_years = max((today - published).days, 0) / 365.25
        score += priors.recency_weight * 0.5 ** (age_years / priors.half_life_years)
        if age_years > priors.max_age_years:
            score -= priors.too_old_penalty
    return round(score, 4)


def prior_label(score: float, priors: QualityPriors) -> QualityLabel:
    if score >= priors.high_at:
        return "high"
    if score >= priors.medium_at:
        return "medium"
    return "low"


def label_ceiling(passage: Passage, priors: QualityPriors | None = None) -> QualityLabel:
    """The best quality label `passage` may carry under `priors.label_ceilings` (web pages; corpus: high)."""
    if passage.provenance.kind != "web":
        return "high"
    priors = priors or QualityPriors()
    tier, _ = domain_tier(host_of(passage), passage.provenance.url)
    return priors.label_ceilings.get(tier, "low")


def prior_assessment(
    passage: Passage, priors: QualityPriors | None = None, today: date | None = None
) -> QualityAssessment:
    priors = priors or QualityPriors()
    score = prior_score(passage, priors, today or date.today())
    return QualityAssessment(
        passage_id=passage.id,
        label=prior_label(score, priors),
        reason=f"prior {score:.2f}: {prior_features(passage)}",
    )


def assess_with_priors(
    passages: Iterable[Passage], priors: QualityPriors | None = None, today: date | None = None
) -> SourceQuality:
    """Label every passage from priors alone: the fallback when the LLM source-quality assessment fails."""
    priors = priors or QualityPriors()
    today = today or date.today()
    return SourceQuality(assessments=[prior_assessment(passage, priors, today) for passage in passages], origin="prior")
