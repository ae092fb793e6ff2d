"""Free-text agreement without an LM: paraphrases agree, near misses do not.

These pairs also chose `AGREEMENT_THRESHOLD`: every paraphrase scores at or above it, every near miss below.
The deterministic rule is the fallback whenever the LM agreement call fails, and agreement makes a consensus, so
the words that tell one disease from its neighbour must survive normalisation (issue 25, item 2).
"""

from __future__ import annotations

import pytest

from clearmed.programs.adjudication.text_agreement import (
    AGREEMENT_THRESHOLD,
    SHORT_ANSWER_CONCEPTS,
    WORDING_TOLERANCE_FROM,
    concepts,
    containment,
    texts_agree,
)

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
    # A generic head ("virus infection", "disease") and a possessive do not change the entity.
    ("Hepatitis B", "hepatitis B virus infection"),
    ("Addison disease", "Addison's disease"),
    ("Hirschsprung’s disease", "Hirschsprung disease"),
    ("myocardial infarction", "Myocardial infarction (heart attack)"),
    # An example illustrates the class the answer names.
    ("ACE inhibitor", "an ACE inhibitor such as lisinopril"),
    ("ACE inhibitor", "ACE inhibitor (e.g., ramipril)"),
    # Roman, ordinal and arabic numerals are one number.
    ("Type II diabetes mellitus", "type 2 diabetes mellitus"),
    ("Stage IV renal cell carcinoma", "renal cell carcinoma, stage 4"),
    ("second-degree AV block, Mobitz II", "2nd degree AV block Mobitz type 2"),
    ("Haemophilia A", "hemophilia A"),
    ("Stanford type A aortic dissection", "Type A aortic dissection (Stanford)"),
    ("Disseminated histoplasmosis (DH)", "disseminated histoplasmosis"),
    ("intravenous antibiotics", "IV antibiotics"),
    ("Start metformin", "metformin"),
    # A sentence may word a concept differently.
    (
        "Acute ischemic stroke due to infective endocarditis on a prolapsed mitral valve",
        "Infective endocarditis due to mitral valve prolapse leading to acute ischemic stroke",
    ),
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
# Different diseases that the old normaliser called the same (it dropped single letters, "type", "disease" and
# "secondary", and divided by the smaller answer only).
DIFFERENT_ENTITIES = [
    ("Hepatitis A", "Hepatitis B"),
    ("Stanford type A aortic dissection", "Stanford type B aortic dissection"),
    ("Hemophilia A", "Hemophilia B"),
    ("Cushing syndrome", "Cushing disease"),
    ("Vitamin A deficiency", "vitamin D deficiency"),
    ("first-degree AV block", "second-degree AV block"),
    ("primary hyperparathyroidism", "secondary hyperparathyroidism"),
    ("left-sided heart failure", "right-sided heart failure"),
    ("acute kidney injury", "acute on chronic kidney injury"),
    ("Stop metformin", "metformin"),
    ("Hepatitis A", "Hepatitis A and B coinfection"),
    # A short answer contained in a longer one: the longer one's extra word is what tells its disease apart.
    ("hepatitis", "hepatitis B"),
    ("heart failure", "right heart failure"),
    ("diabetes mellitus", "type 1 diabetes mellitus"),
    # One substituted word in an answer shorter than a sentence.
    ("Autosomal dominant polycystic kidney disease", "Autosomal recessive polycystic kidney disease"),
    ("Internal laryngeal nerve injury", "Recurrent laryngeal nerve injury"),
]
# Pairs the old normaliser already kept apart, some by luck (0.5 or 2/3 below a 0.75 threshold): now by rule.
DISCRIMINATED = [
    ("Type 1 diabetes", "type 2 diabetes"),
    ("type I diabetes mellitus", "type II diabetes mellitus"),
    ("acute pancreatitis", "chronic pancreatitis"),
    ("Mobitz I", "Mobitz II"),
    ("NYHA class III", "NYHA class IV"),
    ("alpha thalassemia", "beta thalassemia"),
    ("Beta blocker", "alpha blocker"),
    ("T-cell lymphoma", "B-cell lymphoma"),
    ("migraine with aura", "migraine without aura"),
    ("non-small cell lung cancer", "small cell lung cancer"),
    ("benign prostatic hyperplasia", "malignant prostatic hyperplasia"),
]


@pytest.mark.parametrize(("first", "second"), PARAPHRASES)
def test_paraphrases_agree(first: str, second: str) -> None:
    assert containment(first, second) >= AGREEMENT_THRESHOLD, (concepts(first), concepts(second))
    assert texts_agree(second, first)


@pytest.mark.parametrize(("first", "second"), NEAR_MISSES + DISCRIMINATED)
def test_near_misses_disagree(first: str, second: str) -> None:
    assert containment(first, second) < AGREEMENT_THRESHOLD, (concepts(first), concepts(second))
    assert not texts_agree(second, first)


def test_pathway_answers_agree_by_concepts() -> None:
    from clearmed.programs.lm.parsing import answers_agree
    from clearmed.signatures.records import Answer

    first, second = PARAPHRASES[0]  # a sorted bag of words kept these apart
    assert answers_agree(Answer.of_text(first), Answer.of_text(second)) is True
    assert answers_agree(Answer.of_text(NEAR_MISSES[0][0]), Answer.of_text(NEAR_MISSES[0][1])) is False
    assert answers_agree(Answer.of_text(first), None) is None


def test_empty_answers_never_agree() -> None:
    assert containment("", "anemia") == 0.0
    assert not texts_agree("the", "a")


@pytest.mark.parametrize(("first", "second"), DIFFERENT_ENTITIES)
def test_words_that_tell_diseases_apart_are_kept(first: str, second: str) -> None:
    assert not texts_agree(first, second), (concepts(first), concepts(second))
    assert not texts_agree(second, first)


def test_hepatitis_a_and_b_disagree_on_the_pathway_path() -> None:
    from clearmed.programs.lm.parsing import answers_agree
    from clearmed.signatures.records import Answer

    assert answers_agree(Answer.of_text("Hepatitis A"), Answer.of_text("Hepatitis B")) is False
    assert answers_agree(Answer.of_text("Hepatitis B"), Answer.of_text("hepatitis B virus infection")) is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hepatitis A", {"hepatitis", "a"}),  # a capital letter inside the answer names the virus
        ("hemophilia a", {"hemophilia", "a"}),  # an article never ends an answer
        ("Stanford type a dissection", {"stanford", "a", "dissection"}),  # nor follows a classifier
        ("A beta blocker", {"beta", "blocker"}),  # the article
        ("Start a loop diuretic", {"loop", "diuretic"}),
        ("I would start aspirin", {"aspirin"}),  # the pronoun
        ("Stage IV", {"stage", "4"}),
        ("IV fluids", {"iv", "fluid"}),  # intravenous, not 4
        ("Mobitz I", {"mobitz", "i"}),  # no classifier: the letter stays
        ("Third-degree heart block", {"3", "degree", "cardiac", "block"}),
        ("Cushing syndrome", {"cushing", "syndrome"}),
        ("Hyperparathyroidism secondary to renal failure", {"hyperparathyroidism", "renal", "failure"}),
        ("Secondary hyperparathyroidism", {"secondary", "hyperparathyroidism"}),
        ("Pulmonary embolism (PE)", {"pulmonary", "embolism"}),
        ("heart failure (HFrEF)", {"cardiac", "failure", "hfref"}),  # not the initials: kept
    ],
)
def test_concepts_keep_discriminating_tokens(text: str, expected: set[str]) -> None:
    assert concepts(text) == frozenset(expected)


def test_short_answers_must_be_contained_both_ways() -> None:
    short, longer = "heart failure", "right heart failure"
    assert len(concepts(short)) <= SHORT_ANSWER_CONCEPTS
    assert containment(short, longer) == pytest.approx(2 / 3)
    # Three concepts name an entity; a longer answer that only adds to it agrees.
    assert containment("acute kidney injury", "acute kidney injury from rhabdomyolysis") == 1.0
    # But a substituted word disagrees below sentence length, and is tolerated in a sentence.
    assert containment("chronic bacterial prostatitis", "chronic bacterial cystitis") < AGREEMENT_THRESHOLD
    sentence = "infective endocarditis with embolic stroke of the left middle cerebral artery territory"
    reworded = "infective endocarditis with embolic stroke of the left middle cerebral artery region"
    assert len(concepts(sentence)) >= WORDING_TOLERANCE_FROM
    assert texts_agree(sentence, reworded)


def test_generic_heads_alone_agree_only_when_identical() -> None:
    assert texts_agree("infection", "Infection")
    assert not texts_agree("infection", "disease")
