"""Whether two free-text answers say the same thing, without an LM call.

The LM agreement judgement (`agreement_mode = "lm"`) is the default for free text; this is what decides when
no LM call is wanted or the call fails, and agreement is what makes a consensus, so a false "same" costs more
than a false "different" (which only sends the question on to adjudication). A bag of words misses paraphrase
("iron deficiency anaemia" vs "anemia due to low iron stores"), so answers are first normalised the way
clinicians vary their wording:

- British and American spelling (anaemia, oedema, haemorrhage, oesophagus, paediatric ...);
- lay and clinical names of one concept (heart attack = myocardial infarction, low iron = iron deficiency,
  high blood pressure = hypertension, kidney = renal ...);
- plural and possessive endings (Addison's disease = Addison disease), roman and ordinal numerals (type II =
  type 2, second-degree = 2 degree), examples after "such as" / "e.g." (they illustrate the class the answer
  names), an acronym that restates the words before it ("pulmonary embolism (PE)"), and words that carry no
  clinical content (articles, "due to", "most likely diagnosis", "start").

What tells one disease from its neighbour is kept: letters and numbers (hepatitis A / B, type 1 / 2, Mobitz I /
II), "syndrome" vs "disease" (Cushing), and qualifiers such as left / right, acute / chronic, primary /
secondary, benign / malignant, and negation. Two answers disagree outright when they contradict on one of these.

Otherwise they agree when their concepts cover each other both ways (`containment`). One way is enough only
when the longer answer adds a qualifier to a shorter one that already names a specific entity, "iron deficiency
anemia" in "iron deficiency anemia from chronic blood loss"; an answer of one or two concepts is usually a head
noun whose siblings differ by exactly the word the longer one adds ("heart failure" vs "right heart failure",
"hepatitis" vs "hepatitis B"). A shared head word alone is never enough: "iron deficiency anemia" and "anemia of
chronic disease" share only "anemia". `AGREEMENT_THRESHOLD` was chosen on the labelled pairs in
tests/programs/test_text_agreement.py (every paraphrase pair at or above 0.75, every near miss below it).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = [
    "AGREEMENT_THRESHOLD",
    "SHORT_ANSWER_CONCEPTS",
    "WORDING_TOLERANCE_FROM",
    "concepts",
    "containment",
    "texts_agree",
]

AGREEMENT_THRESHOLD: Final = 0.75
# Answers with at most this many specific concepts must be contained both ways (see `containment`).
SHORT_ANSWER_CONCEPTS: Final = 2
# From this many concepts on, an answer may miss a share of the other's wording (see `containment`).
WORDING_TOLERANCE_FROM: Final = 6

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
    ("generalis", "generaliz"),
    ("localis", "localiz"),
)

# Phrases (after spelling) -> one concept token. Longest first, so "high blood pressure" wins over "blood".
_SYNONYMS: Final = {
    "low iron": "iron deficiency",
    "lack of iron": "iron deficiency",
    "iron deficient": "iron deficiency",
    # A myocardial infarction is an acute event by definition (the other is an "old" one), and a heart attack
    # is one, so "acute" adds nothing here.
    "heart attack": "myocardial infarction",
    "acute myocardial infarction": "myocardial infarction",
    "acute mi": "myocardial infarction",
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
    "intravenous": "iv",
    "x ray": "radiograph",
    "disorder": "disease",
}
_SYNONYM_PATTERN: Final = re.compile(
    r"\b(" + "|".join(re.escape(k) for k in sorted(_SYNONYMS, key=len, reverse=True)) + r")\b"
)
# Filler only: function words, hedges and words that name the kind of answer rather than its content.
_NO_CONTENT: Final = frozenset(
    [
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
        "as",
        "at",
        "due",
        "caused",
        "cause",
        "causes",
        "store",
        "stores",
        "level",
        "levels",
        "type",
        "subtype",
        "is",
        "are",
        "be",
        "was",
        "it",
        "likely",
        "most",
        "probably",
        "probable",
        "possible",
        "diagnosis",
        "answer",
        "condition",
        "patient",
        "this",
        "that",
        "which",
        "treatment",
        "therapy",
        # "Start X" and "X" are the same management answer; "stop X" is not, so only starting verbs are filler.
        "start",
        "begin",
        "initiate",
        "commence",
        "give",
        "administer",
        "prescribe",
        "recommend",
        "should",
        "would",
    ]
)
# Words whose meaning flips the answer: they must match, not be absorbed by containment.
_NEGATIONS: Final = frozenset({"no", "not", "without", "absent", "negative", "non"})
# Qualifiers that tell one entity from its neighbour: two answers that each use one of a group must use the same
# ones ("acute" vs "acute on chronic" differ too). Stated by one answer only, they count as content (see
# `containment`).
_CONTRASTS: Final = tuple(
    frozenset(group.split())
    for group in (
        "left right bilateral",
        "unilateral bilateral",
        "acute subacute chronic",
        "primary secondary tertiary",
        "benign malignant",
        "congenital acquired",
        "bacterial viral fungal parasitic",
        "mild moderate severe",
        "upper lower",
        "high low",
        "higher lower",
        "small large",
        "early late",
        "anterior posterior",
        "superior inferior",
        "proximal distal",
        "medial lateral",
        "internal external",
        "central peripheral",
        "direct indirect",
        "open closed",
        "stable unstable",
        "active latent",
        "compensated decompensated",
        "partial complete total",
        "focal multifocal diffuse generalized",
        "simple complex",
        "systolic diastolic",
        "dominant recessive",
        "increased decreased",
        "endogenous exogenous",
        "single double",
        "ischemic hemorrhagic",
        "obstructive restrictive",
        "hypertrophic dilated restrictive",
        "intrinsic extrinsic",
    )
)
# "Cushing syndrome" is not "Cushing disease", but "disease" (and "syndrome", "infection", "virus") is also the
# generic head of a name that means the same with or without it (Addison disease = Addison's; hepatitis B =
# hepatitis B virus infection). So heads never count as content, and they contradict only when the two answers'
# heads are disjoint: "disease" also turns up generically in longer answers ("... due to metastatic disease").
_HEADS: Final = frozenset({"disease", "syndrome", "infection", "virus", "viruse"})  # "viruse": stem of "viruses"
_NOSOLOGY: Final = frozenset({"disease", "syndrome"})

_ROMAN: Final = re.compile(r"^(x{0,3})(ix|iv|v?i{0,3})$")
_ROMAN_DIGITS: Final = {"i": 1, "ii": 2, "iii": 3, "iv": 4, "v": 5, "vi": 6, "vii": 7, "viii": 8, "ix": 9}
_NUMBER_WORDS: Final = {
    w: str(i)
    for i, words in enumerate(
        (
            (),
            ("one", "first"),
            ("two", "second"),
            ("three", "third"),
            ("four", "fourth"),
            ("five", "fifth"),
            ("six", "sixth"),
            ("seven", "seventh"),
            ("eight", "eighth"),
            ("nine", "ninth"),
            ("ten", "tenth"),
        )
    )
    for w in words
}
_ORDINAL: Final = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
# Words after which a lone letter or roman numeral is a designator ("type a" = type A, "stage iv" = stage 4).
_CLASSIFIERS: Final = frozenset(
    {"type", "subtype", "stage", "grade", "class", "group", "phase", "factor", "nerve", "zone", "category", "tier"}
)
# Letters, numbers and Greek letters name one member of a family (hepatitis A, type 2, beta thalassemia).
_DESIGNATOR: Final = re.compile(r"^(?:[a-z]|\d+(?:\.\d+)?|alpha|beta|gamma|delta|epsilon|kappa|lambda|mu|[α-ω])$")

# "X secondary to Y" is causation, not the primary/secondary classification.
_SECONDARY_TO: Final = re.compile(r"\bsecondary\s+to\b", re.IGNORECASE)
_POSSESSIVE: Final = re.compile(r"(\w)['’]s\b")
_ACRONYM: Final = re.compile(r"\(\s*([A-Z][A-Za-z]{1,7}?)s?\s*\)")
_LETTER_WORD: Final = re.compile(r"[^\W\d_]+")
# An example illustrates the class the answer names ("an ACE inhibitor such as lisinopril"); it ends at the clause.
_EXAMPLE: Final = re.compile(
    r"\b(?:such\s+as|for\s+(?:example|instance)|e\.\s?g\b\.?)[,:]?[^;,.()\[\]\n]*", re.IGNORECASE
)
_TOKEN: Final = re.compile(r"\w+(?:\.\d+)*")
_SENTENCE_BREAK: Final = re.compile(r"[.!?:;\n]")


def _stem(word: str) -> str:
    for suffix, keep in (("ices", "ix"), ("ies", "y"), ("es", "e"), ("s", "")):
        if len(word) > 4 and word.endswith(suffix) and not word.endswith(("ss", "us", "is")):
            return word[: -len(suffix)] + keep
    return word


def _roman(word: str) -> int | None:
    match = _ROMAN.match(word)
    if not word or match is None:
        return None
    return 10 * len(match.group(1)) + _ROMAN_DIGITS.get(match.group(2), 0)


def _drop_restated_acronyms(text: str) -> str:
    """Drop a bracketed acronym that spells the initials of the words before it: it only restates them
    ("disseminated histoplasmosis (DH)"). Any other stays ("heart failure (HFrEF)")."""

    def restated(match: re.Match[str]) -> str:
        letters = match.group(1).casefold()
        words = _LETTER_WORD.findall(text, 0, match.start())[-len(letters) :]
        return " " if "".join(w[0] for w in words).casefold() == letters else match.group()

    return _ACRONYM.sub(restated, text)


def _words(text: str) -> list[str]:
    """Lowercase words with articles and the pronoun "I" dropped and numerals in digits; letters are kept.

    "a" is the article in lower case or at the start of a sentence before another word, and the letter after a
    classifier ("type a"), in upper case inside a sentence ("hepatitis A"), or last ("hemophilia a"). A roman
    numeral of two or more letters is a number anywhere, except "iv" (intravenous) and "i", "v", "x", which are
    numbers only after a classifier ("stage IV", "type I"); elsewhere they stay letters ("Mobitz I")."""
    matches = list(_TOKEN.finditer(text))
    words: list[str] = []
    previous_end: int | None = None
    for index, match in enumerate(matches):
        raw = match.group()
        word = raw.casefold()
        sentence_start = previous_end is None or bool(_SENTENCE_BREAK.search(text, previous_end, match.start()))
        previous_end = match.end()
        has_next = index + 1 < len(matches)
        after_classifier = bool(words) and words[-1] in _CLASSIFIERS
        if word == "a" and not after_classifier and has_next and (raw == "a" or sentence_start):
            continue
        if raw == "I" and sentence_start and has_next:
            continue
        roman = _roman(word)
        if roman is not None and (after_classifier or (len(word) > 1 and word != "iv" and set(word) != {"x"})):
            word = str(roman)
        elif (ordinal := _ORDINAL.match(word)) is not None:
            word = ordinal.group(1)
        words.append(_NUMBER_WORDS.get(word, word))
    return words


def concepts(text: str) -> frozenset[str]:
    """The clinical content words of an answer, normalised (spelling, synonyms, plurals, numerals)."""
    text = unicodedata.normalize("NFKC", text)
    text = _EXAMPLE.sub(" ", _SECONDARY_TO.sub("due to", text))
    text = _POSSESSIVE.sub(r"\1", _drop_restated_acronyms(text))
    joined = " ".join(_stem(w) for w in _words(text))
    for british, american in _SPELLING:
        joined = joined.replace(british, american)
    joined = _SYNONYM_PATTERN.sub(lambda m: _SYNONYMS[m.group(1)], joined)
    return frozenset(w for w in joined.split() if w not in _NO_CONTENT)


def _contradict(a: frozenset[str], b: frozenset[str]) -> bool:
    """The answers differ on a word that tells entities apart: negation, a qualifier, a letter or number."""
    if (a & _NEGATIONS) != (b & _NEGATIONS):
        return True
    if (a & _NOSOLOGY) and (b & _NOSOLOGY) and not (a & b & _NOSOLOGY):
        return True
    # Letters and numbers are one more family: "type 1" vs "type 2", "4th" vs "4th and 5th" arch.
    designators = frozenset(w for w in a | b if _DESIGNATOR.match(w))
    return any((a & group) and (b & group) and (a & group) != (b & group) for group in (*_CONTRASTS, designators))


def containment(first: str, second: str) -> float:
    """How far the answers' specific concepts cover each other, 0 when they contradict or either has none.

    Containment both ways (shared concepts over all concepts of the two, as in Jaccard), except:
    - the shorter answer has more than `SHORT_ANSWER_CONCEPTS` concepts (so it names a specific entity itself,
      where "hepatitis" or "heart failure" does not) and all of them are in the longer, which only adds a
      qualifier ("iron deficiency anemia from chronic blood loss"): 1;
    - the shorter answer has `WORDING_TOLERANCE_FROM` concepts or more: the share of it found in the other. A
      sentence that long may word one concept in four differently. In a shorter answer one differing word is most
      often the very one that tells the answers apart ("autosomal dominant / recessive polycystic kidney
      disease", "internal / recurrent laryngeal nerve injury"), more than the lists above can foresee, and both
      ways it scores at most 4/6, below the threshold."""
    a, b = concepts(first), concepts(second)
    if not a or not b or _contradict(a, b):
        return 0.0
    specific_a, specific_b = a - _HEADS, b - _HEADS
    if not specific_a or not specific_b:
        # Nothing but a generic head ("infection"): only the same words agree.
        return 1.0 if a == b else 0.0
    shared = len(specific_a & specific_b)
    shorter = min(len(specific_a), len(specific_b))
    if shorter >= WORDING_TOLERANCE_FROM or (shorter > SHORT_ANSWER_CONCEPTS and shared == shorter):
        return shared / shorter
    return shared / len(specific_a | specific_b)


def texts_agree(first: str, second: str, threshold: float = AGREEMENT_THRESHOLD) -> bool:
    return containment(first, second) >= threshold
