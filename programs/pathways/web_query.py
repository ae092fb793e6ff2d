"""The query a web search is sent, always within the backend's `max_query_chars` (Tavily: 400).

`[program] web_query` chooses who makes it:
- "question": the question itself (CLEAR's convention), unless it is longer than the backend accepts; then its
  key terms (`salient_query`), recorded as replaced.
- "salient": the key terms always (no LM call).
- "lm": the `WriteWebQuery` step writes it; a failed step or an empty query falls back to the key terms, and a
  query longer than the limit is cut at a word boundary. Both are recorded on the result.

Whatever made it, a query never carries option letters and is never sent over the limit: a backend would only
refuse it (Tavily: HTTP 400), and the pathway would lose its evidence.

Built from the question (`build_query`, also the local pathway's BM25 query), and shortened for web search.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

import dspy

from clearmed.programs.lm.context import current
from clearmed.programs.lm.prompting import render_question
from clearmed.programs.lm.stage import run_stage
from clearmed.signatures.records import Question, StepError
from clearmed.signatures.records.results import WebQueryResult
from clearmed.signatures.records.settings import Stage
from clearmed.signatures.web_query import WriteWebQuery

# A written query is short whatever the backend: without a backend limit, the strictest one known (Tavily's).
DEFAULT_QUERY_CHARS: Final = 400
_LABEL: Final = re.compile(r"^(?:search\s+)?query\s*:\s*", re.IGNORECASE)


def fit_query(query: str, limit: int | None) -> tuple[str, int | None]:
    """(the query to send, its length before a cut or None): cut at a word boundary when over ``limit``."""
    query = " ".join(query.split())
    if limit is None or len(query) <= limit:
        return query, None
    return cut_at_word(query, limit), len(query)


def clean_written_query(raw: object, question: Question) -> str:
    """A model-written query as one line, without a "Query:" label, quotes or option letters."""
    lines = [line.strip() for line in str(raw or "").splitlines() if line.strip()]
    text = _LABEL.sub("", lines[0] if lines else "").strip().strip("\"'`").strip()
    return without_option_letters(text, question.letters if question.options else ())


def key_terms(question: Question, limit: int | None) -> str:
    """The deterministic query: key terms of the question, or its words cut at the limit when it has none."""
    budget = limit or DEFAULT_QUERY_CHARS
    return salient_query(question.text, budget) or cut_at_word(question.text, budget)


class WebQueryWriter(dspy.Module):
    """Makes the web query per `settings.web_query`; one predictor, shared by the dynamic pathway, the follow-up
    search and QPIS, so an optimizer tunes one query-writing prompt."""

    def __init__(self) -> None:
        super().__init__()
        self.write = dspy.Predict(WriteWebQuery)

    def forward(self, question: Question, limit: int | None, stage: Stage = "web_query") -> WebQueryResult:
        """`stage` names the LM call in the ledger: the follow-up passes its own, so tuning counts the call as the
        follow-up's cost."""
        settings = current().settings
        asked = build_query(question)
        mode = settings.web_query
        if mode == "question" and (limit is None or len(asked) <= limit):
            return WebQueryResult(query=asked, source="question")
        error: StepError | None = None
        if mode == "lm":
            written = run_stage(
                stage,
                self.write,
                question=render_question(question),
                max_characters=limit or DEFAULT_QUERY_CHARS,
            )
            error = written.error
            text = clean_written_query(written.prediction.query, question) if written.prediction is not None else ""
            if text:
                query, cut = fit_query(text, limit)
                return WebQueryResult(query=query, source="lm", replaced_chars=len(asked), cut_chars=cut)
            if error is None:
                error = StepError(stage=stage, kind="invalid_answer", message="the query writer wrote no query")
        return WebQueryResult(
            query=key_terms(question, limit), source="salient", replaced_chars=len(asked), error=error
        )


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
