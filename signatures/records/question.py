"""The question and its answer: what comes in, and the normalised form every pathway's answer takes."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from clearmed.core.sanitize import clean_text
from clearmed.signatures.records.base import AnswerMode, MetadataValue, Record

_LETTER = re.compile(r"^[A-Z]$")
# A question's options as people write them: texts in order (lettered A, B, C, ...), or letters to texts.
OptionTexts = Sequence[str] | Mapping[str, str]


class ChatTurn(Record):
    """One turn of a conversation-style item (HealthBench)."""

    role: Literal["system", "user", "assistant"]
    content: str

    @field_validator("content")
    @classmethod
    def _clean(cls, value: str) -> str:
        return clean_text(value)


class RubricItem(Record):
    """One physician-written grading criterion (HealthBench); negative points penalise."""

    criterion: str
    points: float
    tags: list[str] = Field(default_factory=list)


class Question(Record):
    """One benchmark item or user question.

    `options` maps capital letters to option texts; it is None exactly when `answer_mode` is `free_text`.
    `gold_letters` holds the reference option set for MCQ, `gold_text` the reference answer for free text.
    """

    id: str = Field(min_length=1)
    text: str
    answer_mode: AnswerMode = "single"
    options: dict[str, str] | None = None
    context: str | None = None
    gold_letters: list[str] | None = None
    gold_text: str | None = None
    conversation: list[ChatTurn] | None = None
    rubric: list[RubricItem] | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, value: str) -> str:
        # Control characters go first: a "question" of escape sequences alone is empty, and none may reach a
        # prompt or a terminal.
        value = clean_text(value).strip()
        if not value:
            raise ValueError("question text is empty")
        return value

    @field_validator("context")
    @classmethod
    def _clean_context(cls, value: str | None) -> str | None:
        return clean_text(value) if value is not None else None

    @field_validator("options")
    @classmethod
    def _options_well_formed(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        value = {key: clean_text(text) for key, text in value.items()}
        bad = [key for key in value if not _LETTER.match(key)]
        if bad:
            raise ValueError(f"option keys must be single capital letters A-Z, got {bad}")
        blank = [key for key, text in value.items() if not text or not text.strip()]
        if blank:
            raise ValueError(f"options {blank} have empty text")
        texts = [text.strip().casefold() for text in value.values()]
        if len(set(texts)) != len(texts):
            raise ValueError("two options have the same text")
        return {key: value[key].strip() for key in sorted(value)}

    @model_validator(mode="after")
    def _mode_matches_options(self) -> Question:
        if self.answer_mode == "free_text":
            if self.options:
                raise ValueError("a free_text question cannot have options")
            if self.gold_letters:
                raise ValueError("a free_text question cannot have gold_letters")
            return self
        if not self.options or len(self.options) < 2:
            raise ValueError(f"a {self.answer_mode} question needs at least two options")
        if self.gold_letters is not None:
            gold = sorted(set(self.gold_letters))
            missing = [letter for letter in gold if letter not in self.options]
            if missing:
                raise ValueError(f"gold letters {missing} are not among the options {sorted(self.options)}")
            if not gold:
                raise ValueError("gold_letters is empty")
            if self.answer_mode == "single" and len(gold) != 1:
                raise ValueError(f"a single-answer question needs exactly one gold letter, got {gold}")
            self.gold_letters = gold
        return self

    @property
    def is_mcq(self) -> bool:
        return self.answer_mode != "free_text"

    @property
    def letters(self) -> list[str]:
        return sorted(self.options) if self.options else []

    @classmethod
    def of(
        cls,
        text: str,
        options: OptionTexts | None = None,
        *,
        answer: str | Sequence[str] | None = None,
        id: str | None = None,
        multi: bool = False,
        context: str | None = None,
    ) -> Question:
        """A question from plain values. `options`: a list of texts (lettered A, B, C, ... in order), or letters to
        texts; none for a free-text question. `answer`: the gold letter (letters, as a list or "A,C", with `multi`)
        of a multiple-choice question, or the reference answer of a free-text one. Without an `id`, the id is a
        digest of the text and options: the same question keeps its id in every run (a run resumes by ids)."""
        if isinstance(options, str):
            raise ValueError("options must be a list of option texts (or letters to texts), not one string")
        if isinstance(options, Mapping):
            lettered = dict(options)
        else:
            lettered = {chr(ord("A") + index): option for index, option in enumerate(options or [])}
        mode: AnswerMode = "free_text" if options is None else ("multi" if multi else "single")
        gold_letters = gold_text = None
        if answer is not None and options is None:
            if not isinstance(answer, str):
                raise ValueError("the answer of a free-text question is its reference text")
            gold_text = answer
        elif answer is not None:
            given = answer.split(",") if isinstance(answer, str) else list(answer)
            gold_letters = [letter.strip().upper() for letter in given if letter.strip()]
        if id is None:
            digest = hashlib.sha256(json.dumps([text, lettered], sort_keys=True).encode()).hexdigest()
            id = f"q-{digest[:12]}"
        return cls(
            id=id,
            text=text,
            answer_mode=mode,
            options=lettered or None,
            context=context,
            gold_letters=gold_letters,
            gold_text=gold_text,
        )


def as_question(question: Question | str, options: OptionTexts | None = None) -> Question:
    """What a program's `forward` takes: a `Question`, or a question's text with its options (`Question.of`)."""
    if isinstance(question, Question):
        if options is not None:
            raise TypeError("options go inside the Question record; give them with the question as text instead")
        return question
    if isinstance(question, str):
        return Question.of(question, options)
    raise TypeError(f"a question is a Question record or its text, not {type(question).__name__}")


class Answer(Record):
    """A normalised answer: a sorted set of option letters for MCQ, or a text for free-text questions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    letters: tuple[str, ...] = ()
    text: str | None = None

    @field_validator("letters")
    @classmethod
    def _sorted_unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for letter in value:
            if not _LETTER.match(letter):
                raise ValueError(f"not an option letter: {letter!r}")
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Answer:
        if bool(self.letters) == bool(self.text and self.text.strip()):
            raise ValueError("an Answer holds either option letters or a text, not both and not neither")
        return self

    @classmethod
    def of_letters(cls, *letters: str) -> Answer:
        return cls(letters=tuple(letters))

    @classmethod
    def of_text(cls, text: str) -> Answer:
        return cls(text=text.strip())

    def display(self) -> str:
        return ",".join(self.letters) if self.letters else (self.text or "")
