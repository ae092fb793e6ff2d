"""Free-text agreement without an LM: paraphrases agree, near misses do not.

These pairs also chose `AGREEMENT_THRESHOLD`: every paraphrase scores at or above it, every near miss below.
"""

from __future__ import annotations

import pytest

from clearmed.programs._text_agreement import AGREEMENT_THRESHOLD, concepts, containment, texts_agree

PARAPHRASES = [
    ("iron deficiency anaemia", "anemia due to low iron stores"),
    ("Iron-deficiency anemia", "iron deficiency anaemia secondary to chronic blood loss"),
    ("heart attack", "acute myocardial infarction"),
    ("high blood pressure", "Hypertension"),
    ("ACE inhibitors", "an ACE inhibitor"),
    ("oesophageal varices", "esophageal varix"),
    ("deep vein thrombosis", "DVT"),
    ("kidney failure", "renal failure"),
    ("Start a loop diuretic", "start loop diuretics"),
    ("paediatric leukaemia", "pediatric leukemia"),
    ("stroke", "cerebrovascular accident"),
    ("The most likely diagnosis is pulmonary embolism", "pulmonary embolism"),
]
NEAR_MISSES = [
    ("iron deficiency anemia", "anemia of chronic disease"),
    ("type 1 diabetes mellitus", "type 2 diabetes mellitus"),
    ("hyperthyroidism", "hypothyroidism"),
    ("deep vein thrombosis", "pulmonary embolism"),
    ("left heart failure", "right heart failure"),
    ("bacterial meningitis", "viral meningitis"),
    ("acute kidney injury", "chronic kidney disease"),
    ("no treatment needed", "treatment needed"),
    ("hypertension", "hypotension"),
    ("vitamin B12 deficiency", "folate deficiency"),
]


@pytest.mark.parametrize(("first", "second"), PARAPHRASES)
def test_paraphrases_agree(first: str, second: str) -> None:
    assert containment(first, second) >= AGREEMENT_THRESHOLD, (concepts(first), concepts(second))
    assert texts_agree(second, first)


@pytest.mark.parametrize(("first", "second"), NEAR_MISSES)
def test_near_misses_disagree(first: str, second: str) -> None:
    assert containment(first, second) < AGREEMENT_THRESHOLD, (concepts(first), concepts(second))
    assert not texts_agree(second, first)


def test_pathway_answers_agree_by_concepts() -> None:
    from clearmed.programs._answers import answers_agree
    from clearmed.signatures.records import Answer

    first, second = PARAPHRASES[0]  # a sorted bag of words kept these apart
    assert answers_agree(Answer.of_text(first), Answer.of_text(second)) is True
    assert answers_agree(Answer.of_text(NEAR_MISSES[0][0]), Answer.of_text(NEAR_MISSES[0][1])) is False
    assert answers_agree(Answer.of_text(first), None) is None


def test_empty_answers_never_agree() -> None:
    assert containment("", "anemia") == 0.0
    assert not texts_agree("the", "a")
