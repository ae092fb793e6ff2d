from __future__ import annotations

from collections.abc import Callable
from datetime import date

import pytest

from clearmed.retrieval.domain_tiers import domain_tier, matches_suffix
from clearmed.retrieval.priors import (
    QualityPriors,
    assess_with_priors,
    content_type,
    prior_assessment,
    prior_features,
)
from clearmed.signatures.records import Passage, Provenance

TODAY = date(2026, 1, 15)
MakePage = Callable[..., Passage]


@pytest.mark.parametrize(
    ("host", "tier"),
    [
        ("www.nih.gov", "government"),
        ("www.ncbi.nlm.nih.gov", "literature"),
        ("pubmed.ncbi.nlm.nih.gov", "literature"),
        ("medlineplus.gov", "government"),
        ("www.cdc.gov", "government"),
        ("www.who.int", "government"),
        ("www.nice.org.uk", "government"),
        ("health.ny.gov", "government"),
        ("www.cochranelibrary.com", "literature"),
        ("www.nejm.org", "literature"),
        ("www.mayoclinic.org", "academic"),
        ("med.stanford.edu", "academic"),
        ("www.webmd.com", "media"),
        ("www.reddit.com", "low"),
        ("someblog.wordpress.com", "low"),
        ("example.com", "unknown"),
        # look-alikes: the authority's name appears, but not as the registered suffix
        ("nih.gov.example.com", "unknown"),
        ("cdc-gov.info", "unknown"),
        ("evilnih.gov.co", "unknown"),
        ("who.int.health-news.biz", "unknown"),
        ("mayoclinic.org.fakepharmacy.ru", "unknown"),
        ("notcdc.gov", "government"),  # still under .gov: a real US government domain
        (None, "unknown"),
    ],
)
def test_domain_tiers(host: str | None, tier: str) -> None:
    assert domain_tier(host)[0] == tier


def test_suffix_matching_is_on_label_boundaries() -> None:
    assert matches_suffix("nih.gov", "nih.gov")
    assert matches_suffix("a.b.nih.gov", "nih.gov")
    assert not matches_suffix("evilnih.gov", "nih.gov")
    assert not matches_suffix("nih.gov.evil.com", "nih.gov")


def test_path_scoped_entries() -> None:
    assert domain_tier("patient.info", "https://patient.info/forums/discuss/x")[0] == "low"
    assert domain_tier("patient.info", "https://patient.info/health/asthma")[0] == "unknown"


@pytest.mark.parametrize(
    ("url", "title", "text", "kind"),
    [
        (
            "https://www.nice.org.uk/guidance/ng136",
            "Hypertension in adults: diagnosis and management",
            "This guideline covers identifying and treating high blood pressure.",
            "guideline",
        ),
        (
            "https://www.cochranelibrary.com/cdsr/doi/10.1002/14651858.CD001234/full",
            "Statins",
            "x",
            "systematic_review",
        ),
        (
            "https://pubmed.ncbi.nlm.nih.gov/1/",
            "Vitamin D: a meta-analysis",
            "We pooled 20 trials.",
            "systematic_review",
        ),
        (
            "https://www.nejm.org/doi/x",
            "Drug X in heart failure",
            "In this randomized, double-blind, placebo-controlled trial we assigned 4000 patients.",
            "rct",
        ),
        ("https://journal.org/a", "Unusual presentation", "We report a case of a 34-year-old woman.", "case_report"),
        (
            "https://www.cancer.gov/types/leukemia/patient/adult-all-treatment-pdq",
            "Adult ALL",
            "x",
            "patient_education",
        ),
        ("https://medlineplus.gov/asthma.html", "Asthma", "x", "patient_education"),
        ("https://www.statnews.com/news/2024/01/02/x", "FDA approves", "x", "news"),
        ("https://www.reddit.com/r/AskDocs/comments/1", "rash?", "anyone else?", "forum"),
        ("https://example.com/page", "Something", "Plain text.", "other"),
    ],
)
def test_content_type(web_page: MakePage, url: str, title: str, text: str, kind: str) -> None:
    assert content_type(web_page(url, title, text)) == kind


def test_features_line(web_page: MakePage) -> None:
    page = web_page("https://www.nih.gov/health/b12", "Vitamin B12", "Patient information on B12.", "2024-03-05")
    assert prior_features(page) == (
        "domain nih.gov (government health agency or guideline body); published 2024-03; "
        "content type: patient education page"
    )
    undated = web_page("https://nih.gov.example.com/cure", "Cure", "Buy now.")
    assert prior_features(undated).startswith("domain example.com (unrecognised site); publication date unknown")
    bbc = web_page("https://www.bbc.co.uk/news/health-1", "Health news", "x")
    assert prior_features(bbc).startswith("domain bbc.co.uk (health media site)")


def test_features_for_corpus_passage() -> None:
    passage = Passage(id="d", text="t", pathway="local", provenance=Provenance(kind="corpus", corpus="openstax"))
    assert prior_features(passage).startswith("corpus openstax (curated local corpus)")


@pytest.mark.parametrize(
    ("url", "published", "label"),
    [
        ("https://www.cdc.gov/measles/index.html", "2025-06-01", "high"),
        ("https://pubmed.ncbi.nlm.nih.gov/123/", None, "high"),
        ("https://www.mayoclinic.org/diseases/x", "2025-01-01", "high"),
        ("https://www.webmd.com/a", "2025-01-01", "medium"),
        ("https://www.reddit.com/r/AskDocs/comments/1", "2025-12-01", "low"),
        ("https://nih.gov.example.com/measles", "2025-12-01", "low"),
        ("https://cdc-gov.info/measles", None, "low"),
        ("https://www.cdc.gov/old-page", "1998-01-01", "medium"),  # authoritative but 28 years old
    ],
)
def test_prior_labels(web_page: MakePage, url: str, published: str | None, label: str) -> None:
    assessment = prior_assessment(web_page(url, "t", "plain text", published), QualityPriors(), TODAY)
    assert assessment.label == label
    assert assessment.reason.startswith("prior ")


def test_priors_are_tunable(web_page: MakePage) -> None:
    page = web_page("https://www.webmd.com/a", "t", "x", "2025-01-01")
    strict = QualityPriors(medium_at=0.6)
    assert prior_assessment(page, strict, TODAY).label == "low"
    generous = QualityPriors(tier_weights={"media": 0.9})
    assert prior_assessment(page, generous, TODAY).label == "high"
    with pytest.raises(ValueError, match="must not exceed"):
        QualityPriors(high_at=0.4, medium_at=0.5)
    with pytest.raises(ValueError, match="extra"):
        QualityPriors.model_validate({"tiers": {}})


def test_assess_with_priors_counts(web_page: MakePage) -> None:
    pages = [
        web_page("https://www.cdc.gov/a", "t", "x", "2025-01-01"),
        web_page("https://www.webmd.com/b", "t", "x", "2025-01-01"),
        web_page("https://www.reddit.com/r/x/comments/1", "t", "x"),
    ]
    quality = assess_with_priors(pages, today=TODAY)
    assert quality.origin == "prior"
    assert (quality.n_high, quality.n_medium, quality.n_low) == (1, 1, 1)
    assert quality.label_of(pages[0].id) == "high"
