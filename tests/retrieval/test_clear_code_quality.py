"""The CLEAR code's source-quality table (`source_quality = "clear-code"`), pinned to the code's literals
(methods/ace_mr/source_quality.py: `_domain_rule` and `score_source`)."""

from __future__ import annotations

import pytest

from clearmed.programs.assessors.source_quality import SourceQualityAssessor
from clearmed.programs.lm.context import Ledger, RunContext, activate
from clearmed.retrieval.clear_code_quality import clear_code_assessment, clear_code_score
from clearmed.signatures.records import Passage, Provenance
from clearmed.signatures.records.settings import ProgramSettings


def page(url: str | None, title: str = "Page", text: str = "Some claim.") -> Passage:
    return Passage(id="W1", title=title, text=text, pathway="dynamic", provenance=Provenance(kind="web", url=url))


@pytest.mark.parametrize(
    ("url", "score", "tier"),
    [
        ("https://www.cdc.gov/x", 0.90, "high"),
        ("https://pubmed.ncbi.nlm.nih.gov/1", 0.90, "high"),
        ("https://www.nccn.org/x", 0.90, "high"),  # clearmed's priors rate it lower
        ("https://diabetesjournals.org/care/x", 0.90, "high"),
        ("https://www.mayoclinic.org/x", 0.90, "high"),
        ("https://www.medscape.com/x", 0.70, "medium"),  # clearmed's priors rate it higher
        ("https://www.statpearls.com/x", 0.70, "medium"),
        ("https://link.springer.com/x", 0.70, "medium"),
        ("https://en.wikipedia.org/wiki/x", 0.25, "low"),
        ("https://someone.blogspot.com/p", 0.25, "low"),
        ("https://www.fda.gov/x", 0.75, "medium"),  # generic .gov
        ("https://medlineplus.gov/x", 0.75, "medium"),
        ("https://www.hopkinsmedicine.edu/x", 0.65, "medium"),  # generic .edu
        ("https://www.someclinic.org/x", 0.50, "medium"),  # generic .org: the medium floor exactly
        ("https://www.example.com/x", 0.40, "low"),
        (None, 0.25, "low"),  # no URL
        ("https://nih.gov.example.com/x", 0.40, "low"),  # suffix at a label boundary only
    ],
)
def test_the_domain_table(url: str | None, score: float, tier: str) -> None:
    got, _ = clear_code_score(page(url))
    assert round(got, 2) == score
    assert clear_code_assessment(page(url)).label == tier


@pytest.mark.parametrize(
    ("url", "title", "text", "score", "tier"),
    [
        ("https://www.fda.gov/x", "Treatment guideline", "c", 0.80, "high"),  # 0.75 + 0.05: the high floor exactly
        ("https://www.medscape.com/x", "Systematic review", "a recommendation", 0.80, "high"),
        ("https://www.cdc.gov/x", "t", "a case report of ...", 0.80, "high"),  # 0.90 - 0.10
        ("https://www.someclinic.org/x", "Case report", "c", 0.40, "low"),  # 0.50 - 0.10
        ("https://www.cdc.gov/x", "Meta-analysis and guideline", "c", 1.0, "high"),  # capped at 1
    ],
)
def test_the_content_words(url: str, title: str, text: str, score: float, tier: str) -> None:
    got, _ = clear_code_score(page(url, title, text))
    assert round(got, 2) == score
    assert clear_code_assessment(page(url, title, text)).label == tier


def test_clear_code_labels_make_no_lm_call() -> None:
    passages = [page("https://www.medscape.com/x"), page("https://www.nccn.org/y").model_copy(update={"id": "W2"})]
    settings = ProgramSettings(source_quality="clear-code")
    with activate(RunContext(settings=settings, role_lms={}, ledger=Ledger())) as context:
        result = SourceQualityAssessor().forward("q", passages)
    assert [a.label for a in result.quality.assessments] == ["medium", "high"]
    assert result.quality.origin == "prior"
    assert result.error is None
    assert context.ledger.rows == []
