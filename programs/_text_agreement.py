"""Whether two free-text answers say the same thing, without an LM call.

The LM agreement judgement (`agreement_mode = "lm"`) is the default for free text; this is what decides when
no LM call is wanted or the call fails. A bag of words misses paraphrase ("iron deficiency anaemia" vs "anemia
due to low iron stores"), so answers are first normalised the way clinicians vary their wording:

- British and American spelling (anaemia, oedema, haemorrhage, oesophagus, paediatric ...);
- lay and clinical names of one concept (heart attack = myocardial infarction, low iron = iron deficiency,
  high blood pressure = hypertension, kidney = renal ...);
- plural and a few derivational endings, and words that carry no clinical content ("due to", "caused by").

Two answers then agree when the concepts of the shorter one are (nearly) all in the other: containment, not
overlap, because a correct answer often adds a qualifier ("iron deficiency anemia from chronic blood loss").
A shared head word alone is not enough: "iron deficiency anemia" and "anemia of chronic disease" share only
"anemia" (containment 1/3) and disagree. `AGREEMENT_THRESHOLD` was chosen on the labelled pairs in
tests/programs/test_text_agreement.py (every paraphrase pair at or above 0.75, every near miss at or below 0.5).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["AGREEMENT_THRESHOLD", "concepts", "containment", "texts_agree"]

AGREEMENT_THRESHOLD: Final = 0.75

# British -> American spelling, applied to word stems.
_SPELLING: Final = (
    ("anaem", "anem"),
    ("haem", "hem"),
    ("oedem", "edem"),
    ("oesophag", "esophag"),
    ("oestr", "estr"),
    ("paediatr", "pediatr"),
    ("orthopaed", "orthoped"),
    ("leukaem", "leukem"),
    ("ischaem", "ischem"),
    ("diarrhoe", "diarrhe"),
    ("foetal", "fetal"),
    ("tumour", "tumor"),
    ("colour", "color"),
    ("behaviour", "behavior"),
)

# Phrases (after spelling) -> one concept token. Longest first, so "high blood pressure" wins over "blood".
_SYNONYMS: Final = {
    "low iron": "iron deficiency",
    "lack of iron": "iron deficiency",
    "iron deficient": "iron deficiency",
    "heart attack": "myocardial infarction",
    "mi": "myocardial infarction",
    "high blood pressure": "hypertension",
    "raised blood pressure": "hypertension",
    "elevated blood pressure": "hypertension",
    "low blood pressure": "hypotension",
    "high blood sugar": "hyperglycemia",
    "low blood sugar": "hypoglycemia",
    "blood sugar": "glucose",
    "stroke": "cerebrovascular accident",
    "cva": "cerebrovascular accident",
    "kidney": "renal",
    "kidneys": "renal",
    "liver": "hepatic",
    "lung": "pulmonary",
    "lungs": "pulmonary",
    "heart": "cardiac",
    "blood clot": "thrombosis",
    "clot": "thrombosis",
    "underactive thyroid": "hypothyroidism",
    "overactive thyroid": "hyperthyroidism",
    "water pill": "diuretic",
    "painkiller": "analgesic",
    "antibiotics": "antibiotic",
    "tb": "tuberculosis",
    "copd": "chronic obstructive pulmonary disease",
    "dvt": "deep vein thrombosis",
    "pe": "pulmonary embolism",
    "uti": "urinary tract infection",
    "ibs": "irritable bowel syndrome",
    "acei": "ace inhibitor",
    "ace inhibitors": "ace inhibitor",
}
_SYNONYM_PATTERN: Final = re.compile(
    r"\b(" + "|".join(re.escape(k) for k in sorted(_SYNONYMS, key=len, reverse=True)) + r")\b"
)
_NO_CONTENT: Final = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "with",
        "and",
        "or",
        "in",
        "on",
        "to",
        "for",
        "from",
        "by",
        "due",
        "caused",
        "cause",
        "causes",
        "secondary",
        "store",
        "stores",
        "level",
        "levels",
        "type",
        "is",
        "are",
        "be",
        "likely",
        "most",
        "probably",
        "possible",
        "condition",
        "disease",
        "disorder",
        "patient",
        "this",
        "that",
        "which",
        "treatment",
        "therapy",
    ]
)
# Words whose meaning flips the answer: they must match, not be absorbed by containment.
_NEGATIONS: Final = frozenset({"no", "not", "without", "absent", "negative", "non"})


def _stem(word: str) -> str:
    for suffix, keep in (("ices", "ix"), ("ies", "y"), ("es", "e"), ("s", "")):
        if len(word) > 4 and word.endswith(suffix) and not word.endswith(("ss", "us", "is")):
            return word[: -len(suffix)] + keep
    return word


def concepts(text: str) -> frozenset[str]:
    """The clinical content words of an answer, normalised (spelling, synonyms, plurals)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w\s]", " ", text)
    words = [_stem(w) for w in text.split()]
    joined = " ".join(words)
    for british, american in _SPELLING:
        joined = joined.replace(british, american)
    joined = _SYNONYM_PATTERN.sub(lambda m: _SYNONYMS[m.group(1)], joined)
    return frozenset(w for w in joined.split() if w not in _NO_CONTENT)


def containment(first: str, second: str) -> float:
    """Share of the smaller answer's concepts found in the other one (0 when either has none)."""
    a, b = concepts(first), concepts(second)
    if not a or not b:
        return 0.0
    if (a & _NEGATIONS) != (b & _NEGATIONS):
        return 0.0
    return len(a & b) / min(len(a), len(b))


def texts_agree(first: str, second: str, threshold: float = AGREEMENT_THRESHOLD) -> bool:
    return containment(first, second) >= threshold
