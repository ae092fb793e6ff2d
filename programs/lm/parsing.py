"""Reading what the model wrote: the tolerant chat adapter, option letters and free-text answers.

A ChatAdapter that forgives the formatting slips of small models on enumerated and boolean fields.

DSPy parses `Literal` outputs case-sensitively and booleans as JSON, so "Consensus", "keep local",
"Yes" or "**high**" fail a whole call. Here such values are normalised onto the allowed spelling before
DSPy's own parser runs; a value that still matches nothing fails as before and is recorded upstream.

Turning model text into answers: option-letter parsing and the free-text normaliser.

The parser is deliberately tolerant of how weak models write a letter ("B", "(b)", "B) Aspirin",
"Answer: B", the option's own text) and deliberately strict about what it accepts: a letter outside the
options, two letters for a single-answer question, or prose naming no option gives None, which callers
record as unparsed. Nothing here ever guesses.
"""

from __future__ import annotations

import re
import types
import typing
import unicodedata
from typing import Any, Literal, get_args, get_origin

import dspy
from dspy.adapters.chat_adapter import ChatAdapter

from clearmed.programs.adjudication.text_agreement import texts_agree
from clearmed.signatures.records import Answer, AnswerMode, Question

_HEADER = re.compile(r"^\s*\[\[ ## (\w+) ## \]\](.*)$")
_TRUE = {"true", "yes", "y", "1"}
_FALSE = {"false", "no", "n", "0"}


def _key(text: str) -> str:
    return re.sub(r"[\s\-]+", "_", re.sub(r"[*`\"'.,;:!()]", "", text).strip().casefold())


def normalise_literal(value: str, allowed: tuple[Any, ...]) -> str:
    """Map a loosely written value onto one allowed Literal value, or return it unchanged."""
    wanted = _key(value)
    by_key = {_key(str(option)): str(option) for option in allowed}
    if wanted in by_key:
        return by_key[wanted]
    first_word = _key(value.split()[0]) if value.split() else ""
    return by_key.get(first_word, value)


def normalise_bool(value: str) -> str:
    word = _key(value.split()[0]) if value.split() else ""
    if word in _TRUE:
        return "true"
    if word in _FALSE:
        return "false"
    return value


def _is_literal(annotation: object) -> bool:
    return get_origin(annotation) is Literal


def _is_optional_bool(annotation: object) -> bool:
    if annotation is bool:
        return True
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return bool in get_args(annotation)
    return False


class TolerantChatAdapter(ChatAdapter):
    """ChatAdapter whose parse step first normalises Literal and bool field values."""

    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, Any]:
        return super().parse(signature, self._normalise(signature, completion))

    def _normalise(self, signature: type[dspy.Signature], completion: str) -> str:
        out: list[str] = []
        field: str | None = None
        for line in completion.splitlines():
            header = _HEADER.match(line)
            if header:
                field = header.group(1)
                rest = header.group(2).strip()
                out.append(line[: header.start(2)].rstrip())
                if not rest:
                    continue
                line = rest
            out.append(self._normalise_value(signature, field, line))
        return "\n".join(out)

    @staticmethod
    def _normalise_value(signature: type[dspy.Signature], field: str | None, line: str) -> str:
        info = signature.output_fields.get(field) if field else None
        if info is None or not line.strip():
            return line
        if _is_literal(info.annotation):
            return normalise_literal(line.strip(), get_args(info.annotation))
        if _is_optional_bool(info.annotation):
            return normalise_bool(line.strip())
        return line


_PREFIX = re.compile(
    r"^\s*(?:the\s+)?(?:final\s+|correct\s+|best\s+)?(?:answer|option|choice|options|answers)s?"
    r"(?:\s+is|\s+are)?\s*[:\-]?\s*",
    re.IGNORECASE,
)
_DECOR = re.compile(r"[*_`\"'\[\]{}]")
_LETTER_LIST = re.compile(r"^\(?([A-Za-z])\)?(?:\s*(?:,|;|/|&|\band\b|\s)\s*\(?([A-Za-z])\)?)*\s*\.?$")
_LEADING_LETTER = re.compile(r"^\(?([A-Z])\s*[\).:\-]\s+\S")
_IS_LETTER_PHRASE = re.compile(r"\b(?:answer|option|choice)\s+(?:is\s+)?\(?([A-Z])\)?(?![A-Za-z])")
_NONE = re.compile(r"^\s*(none|n/a|unknown|no answer)\s*\.?\s*$", re.IGNORECASE)


def answer_format(question: Question) -> str:
    """The instruction a pathway sees about how many options to choose."""
    if question.answer_mode == "single":
        return "choose exactly one option letter"
    if question.answer_mode == "multi":
        return "choose every correct option letter (one or more)"
    return "free text: answer in a short phrase or sentence"


def format_options(question: Question) -> str:
    if not question.options:
        return ""
    return "\n".join(f"{letter}. {text}" for letter, text in question.options.items())


def _normalise_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w\s]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def _letters_from_list(text: str, valid: set[str]) -> tuple[str, ...] | None:
    compact = text.strip()
    if not _LETTER_LIST.match(compact):
        return None
    letters = re.findall(r"(?<![A-Za-z])([A-Za-z])(?![A-Za-z])", compact.replace("and", " "))
    upper = [letter.upper() for letter in letters]
    # A lowercase letter is accepted only as a bare list item ("b", "a, c"), never inside a word.
    if not upper or any(letter not in valid for letter in upper):
        return None
    return tuple(sorted(set(upper)))


def parse_letters(raw: str | None, options: dict[str, str], mode: AnswerMode) -> tuple[str, ...] | None:
    """Parse an MCQ answer into sorted option letters, or None when it names no valid option set.

    `single` needs exactly one letter; `multi` a non-empty set. Letters outside `options` are invalid.
    """
    if raw is None:
        return None
    valid = set(options)
    text = _DECOR.sub("", raw).strip()
    if not text or _NONE.match(text):
        return None
    first_line = text.splitlines()[0].strip()
    candidates: list[tuple[str, ...]] = []
    for chunk in (text, first_line):
        stripped = _PREFIX.sub("", chunk).strip()
        parsed = _letters_from_list(stripped, valid)
        if parsed:
            candidates.append(parsed)
            break
        leading = _LEADING_LETTER.match(stripped)
        if leading and leading.group(1) in valid:
            candidates.append((leading.group(1),))
            break
    if not candidates:
        by_text = _match_option_text(text, options)
        if by_text:
            candidates.append(by_text)
    if not candidates:
        phrases = {m.group(1) for m in _IS_LETTER_PHRASE.finditer(text)}
        if phrases and phrases <= valid:
            candidates.append(tuple(sorted(phrases)))
    if not candidates:
        return None
    letters = candidates[0]
    if mode == "single" and len(letters) != 1:
        return None
    return letters


def _match_option_text(text: str, options: dict[str, str]) -> tuple[str, ...] | None:
    """An answer that restates an option's text exactly (ignoring case and punctuation) names that option."""
    target = _normalise_text(_PREFIX.sub("", text))
    matches = [letter for letter, option in options.items() if _normalise_text(option) == target]
    return tuple(matches) if len(matches) == 1 else None


def parse_answer(raw: str | None, question: Question) -> Answer | None:
    """Parse a pathway's or the verifier's answer for this question; None when unparseable."""
    if question.answer_mode == "free_text":
        if raw is None or not raw.strip() or _NONE.match(raw):
            return None
        return Answer.of_text(raw.strip())
    letters = parse_letters(raw, question.options or {}, question.answer_mode)
    return Answer(letters=letters) if letters else None


def answers_agree(first: Answer | None, second: Answer | None) -> bool | None:
    """MCQ answers agree when their letter sets are equal; free text when one's clinical concepts are (nearly)
    all in the other's (`adjudication/text_agreement.py`: spelling, synonyms and paraphrase). None if one is absent."""
    if first is None or second is None:
        return None
    if first.letters or second.letters:
        return first.letters == second.letters
    return texts_agree(first.text or "", second.text or "")
