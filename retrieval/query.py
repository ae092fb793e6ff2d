"""Queries for the local and dynamic pathways, built from a `Question`, and shortened for web search."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from clearmed.signatures.records import Question

# Words that carry no search signal in a clinical vignette ("A 45-year-old man comes to the physician because
# of ..."); clinical findings, drugs, values and the asked-for thing are what a search engine needs.
_STOPWORDS: Final = frozenset(
    """a an the and or but of to in on at by for with without from into over under after before during since
    is are was were be been being has have had do does did this that these those it its his her their he she
    they him them who whom whose which what when where why how than then there here as so such very most more
    following comes come came presents presented presenting brought brings visit visits physician doctor
    office clinic department emergency because history patient patients man woman boy girl child infant year
    years old day days week weeks month months hour hours ago today reports report states says shows shown
    also about appears appear likely best next step management diagnosis following? would should could may
    might can will shall one two three four five""".split()  # noqa: SIM905 - a word list reads better as text
)
_QUESTION_WORDS: Final = frozenset({"which", "what", "how", "why", "when", "where"})
_TOKEN: Final = re.compile(r"[A-Za-z][A-Za-z0-9\-+/]*|\d+(?:\.\d+)?(?:\s?(?:%|mg|mm|g/dl|mmhg|/min|°[cf]))?")


def build_query(question: Question, include_options: bool = False) -> str:
    """The retrieval query for a question.

    Question text only by default: the CLEAR/MIRAGE convention, which keeps retrieval from being steered
    towards whichever option shares the most words with the corpus. `include_options=True` appends the
    option texts (without letters), which raises recall when the stem alone is vague ("Which of the
    following ...").
    """
    query = question.text
    if include_options and question.options:
        query = f"{query} {' '.join(question.options[letter] for letter in question.letters)}"
    return " ".join(query.split())


def _content_words(text: str) -> list[str]:
    return [w for w in _TOKEN.findall(text) if w.casefold() not in _STOPWORDS and len(w) > 1]


def salient_query(text: str, max_chars: int) -> str:
    """A keyword query of at most ``max_chars`` characters from a long question, without an LM.

    The asked-for part (the last sentence: "most likely diagnosis", "mechanism of action") comes first, then
    the findings in the order the vignette gives them, each word once, cut at a word boundary. Option
    letters never appear: they mean nothing to a search engine.
    """
    sentences = [s for s in re.split(r"(?<=[.?!])\s+", " ".join(text.split())) if s]
    asked = sentences[-1] if sentences else ""
    focus = [w for w in _content_words(asked) if w.casefold() not in _QUESTION_WORDS]
    # What is asked: a few words that name it survive the stopword filter only partly ("diagnosis" is a
    # stopword for findings but the point of the question), so keep the asked sentence's key nouns.
    asked_for = re.findall(
        r"\b(diagnosis|mechanism|treatment|management|cause|test|drug|pathogen|finding)\b", asked, re.I
    )
    words = list(dict.fromkeys([*(w.lower() for w in asked_for), *focus, *_content_words(" ".join(sentences[:-1]))]))
    return cut_at_word(" ".join(words), max_chars)


def cut_at_word(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters at a word boundary (never mid-word)."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars + 1].rsplit(" ", 1)[0]
    return cut if cut and len(cut) <= max_chars else text[:max_chars]


def without_option_letters(query: str, letters: Iterable[str]) -> str:
    """``query`` with every reference to an option letter removed ("option B", "(C)", "A." opening an item).

    A written query must not carry letters: they mean nothing to a search engine and would only steer it. Bare
    capital letters stay, since medicine needs them ("vitamin A", "hepatitis B", "type C").
    """
    keys = "".join(sorted({letter for letter in letters if len(letter) == 1 and letter.isalpha()}))
    if not keys:
        return " ".join(query.split())
    named = rf"\b(?i:options?|choices?|answers?)\s*[:#]?\s*\(?[{keys}]\)?(?![\w])"
    bracketed = rf"\(\s*[{keys}]\s*\)"
    # "A) ...", "B: ...", "C. ..." opening an item and followed by more text (a bare "vitamin A" stays)
    item = rf"(?:^|(?<=[\s,;/|]))[{keys}][.):](?=\s+\S)"
    for pattern in (named, bracketed, item):
        query = re.sub(pattern, " ", query)
    return " ".join(query.split()).strip(" ,;:-|")
