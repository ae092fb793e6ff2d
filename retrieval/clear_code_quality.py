"""The CLEAR code's source-quality table (`[program] source_quality = "clear-code"`): a web page's tier from its
domain and a few words of its title and text, with no LM call.

The facts are the CLEAR authors' (`methods/ace_mr/source_quality.py`, `score_source`): three domain lists scored
0.90 (high), 0.70 (medium) and 0.25 (low); otherwise .edu 0.65, .gov 0.75 and .org 0.50 (medium), any other domain
or none 0.40 / 0.25 (low); then +0.05 for a guideline or recommendation, +0.05 for a meta-analysis or systematic
review, -0.10 for a case report, and the tier re-read from the score (high from 0.80, medium from 0.50).

clearmed's own priors (`retrieval.priors`) rate 26 of these 52 domains otherwise (Medscape, StatPearls, Springer,
fda.gov, MedlinePlus and .edu hospitals higher; nccn.org and diabetesjournals.org lower). A replayed CLEAR results
file whose sources carry no tier is labelled by this table, so that its gates open where the code's did.
"""

from __future__ import annotations

from typing import Final

from clearmed.retrieval.domain_tiers import host_of, matches_suffix
from clearmed.signatures.records import Passage, QualityAssessment, QualityLabel

# Domain -> why it is trusted or not, per tier score; matched as a suffix at a label boundary.
HIGH_DOMAINS: Final[dict[str, str]] = {
    "cdc.gov": "public health authority",
    "nih.gov": "government medical authority",
    "ncbi.nlm.nih.gov": "NIH/NCBI medical reference",
    "pubmed.ncbi.nlm.nih.gov": "PubMed citation",
    "pmc.ncbi.nlm.nih.gov": "PubMed Central full text",
    "nccn.org": "clinical guideline organization",
    "nice.org.uk": "clinical guideline organization",
    "who.int": "public health authority",
    "acog.org": "specialty society",
    "aap.org": "specialty society",
    "heart.org": "specialty society",
    "idsociety.org": "specialty society",
    "diabetesjournals.org": "specialty journal / guideline source",
    "cochrane.org": "systematic review source",
    "nejm.org": "major medical journal",
    "jamanetwork.com": "major medical journal",
    "thelancet.com": "major medical journal",
    "bmj.com": "major medical journal",
    "uptodate.com": "clinician reference",
    "merckmanuals.com": "clinician reference",
    "msdmanuals.com": "clinician reference",
    "mayoclinic.org": "academic medical center reference",
}
MEDIUM_DOMAINS: Final[dict[str, str]] = {
    "aafp.org": "professional society / reference",
    "clevelandclinic.org": "academic medical center reference",
    "mdcalc.com": "clinical decision support reference",
    "emedicine.medscape.com": "clinician reference",
    "medscape.com": "clinician reference",
    "radiopaedia.org": "specialty educational reference",
    "pathologyoutlines.com": "specialty educational reference",
    "statpearls.com": "medical education reference",
    "link.springer.com": "publisher-hosted peer-reviewed literature",
    "sciencedirect.com": "publisher-hosted peer-reviewed literature",
    "academic.oup.com": "publisher-hosted peer-reviewed literature",
    "onlinelibrary.wiley.com": "publisher-hosted peer-reviewed literature",
    "tandfonline.com": "publisher-hosted peer-reviewed literature",
    "nature.com": "publisher-hosted peer-reviewed literature",
    "frontiersin.org": "publisher-hosted peer-reviewed literature",
}
LOW_DOMAINS: Final[dict[str, str]] = {
    "droracle.ai": "automated medical content",
    "consensus.app": "secondary search summary",
    "wikipedia.org": "crowd-edited reference",
    "medium.com": "blog platform",
    "wordpress.com": "blog platform",
    "blogspot.com": "blog platform",
}
# Scores of the lists, then of the generic suffixes, and the tier cut-offs.
HIGH_SCORE, MEDIUM_SCORE, LOW_SCORE = 0.90, 0.70, 0.25
SUFFIX_SCORES: Final[tuple[tuple[str, float, str], ...]] = (
    ("edu", 0.65, "academic domain"),
    ("gov", 0.75, "government domain"),
    ("org", 0.50, "organization domain without an explicit medical-authority rule"),
)
UNRECOGNISED_SCORE = 0.40
HIGH_FROM, MEDIUM_FROM = 0.80, 0.50
# Words in title and text that move the score.
BONUS_WORDS: Final[tuple[tuple[tuple[str, ...], float], ...]] = (
    (("guideline", "recommendation"), 0.05),
    (("meta-analysis", "systematic review"), 0.05),
    (("case report",), -0.10),
)


def domain_score(host: str | None) -> tuple[float, str]:
    """The domain's score and why, before the content words."""
    if not host:
        return LOW_SCORE, "missing URL/domain"
    for table, score in ((HIGH_DOMAINS, HIGH_SCORE), (MEDIUM_DOMAINS, MEDIUM_SCORE), (LOW_DOMAINS, LOW_SCORE)):
        for suffix, why in table.items():
            if matches_suffix(host, suffix):
                return score, why
    for suffix, score, why in SUFFIX_SCORES:
        if host.endswith("." + suffix):
            return score, why
    return UNRECOGNISED_SCORE, "unrecognized source domain"


def tier_of(score: float) -> QualityLabel:
    if score >= HIGH_FROM:
        return "high"
    return "medium" if score >= MEDIUM_FROM else "low"


def clear_code_score(passage: Passage) -> tuple[float, str]:
    """The page's score (0-1) and the domain's reason. Not rounded: the code reads the tier off the unrounded sum
    and rounds only what it reports."""
    score, why = domain_score(host_of(passage))
    text = f"{passage.title} {passage.text}".lower()
    for words, delta in BONUS_WORDS:
        if any(word in text for word in words):
            score = min(1.0, max(0.0, score + delta))
    return score, why


def clear_code_assessment(passage: Passage) -> QualityAssessment:
    """The page's label by the CLEAR code's table, its score and reason in the record."""
    score, why = clear_code_score(passage)
    reason = f"CLEAR code table {score:.2f}: {why}"
    return QualityAssessment(passage_id=passage.id, label=tier_of(score), reason=reason)
