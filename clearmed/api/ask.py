"""`ask`: one question through CLEAR, the door of `clearmed ask`. `AskRequest` holds one field per option of the
command that says what to answer and with what (its display options, `--json` and `--passages`, are the command's
own); `ask` turns it into a `Question`, refuses one the model could not read, and answers it with the program
`build_program` builds, the artifact loaded."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic
from pydantic import BaseModel, ConfigDict

from clearmed.config import ClearmedConfig
from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    from clearmed.signatures.records import AnswerMode, Decision, Question

_OPTION = re.compile(r"^\s*([A-Za-z])\s*[:=.)]\s*(.+)$", re.DOTALL)


class AskRequest(BaseModel):
    """One field per `clearmed ask` option of the same name (`--set` is `overrides`, `-o` is `option`); a field
    left at its default means what the command's default means."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    question: str | None = None  # the question text (not with `demo`)
    option: list[str] = []  # "A: text" (also A=, A., A)), or plain texts lettered A, B, C... in order
    multi: bool = False  # several options may be correct
    context: str | None = None  # given with the question (e.g. an abstract)
    demo: str | None = None  # a question of the built-in demo bundle, by id
    config: ClearmedConfig | str | Path | None = None  # a config, a packaged config name or a TOML path
    overrides: list[str] = []  # SECTION.KEY=VALUE, as `--set` gives them
    program_artifact: str | Path | None = None  # a `clearmed compile` / `clearmed tune` artifact folder


def parse_options(raw: Sequence[str]) -> dict[str, str]:
    """`--option "A: text"` (also A=, A., A)), or plain texts lettered A, B, C... in order."""
    options: dict[str, str] = {}
    for index, item in enumerate(raw):
        match = _OPTION.match(item)
        letter, text = (match.group(1).upper(), match.group(2).strip()) if match else (chr(ord("A") + index), item)
        if letter in options:
            raise UsageError(f"option {letter} is given twice")
        options[letter] = text
    return options


def demo_bundle() -> tuple[Question, ...]:
    """The built-in demo questions `ask --demo ID` answers (`clearmed demo` lists them)."""
    from clearmed.demo import demo_questions

    return demo_questions()


def asked_question(request: AskRequest) -> Question:
    """The question asked, checked before anything heavy is imported (one-line errors)."""
    from clearmed.demo import demo_question
    from clearmed.signatures.records import Question

    if request.demo:
        if request.question or request.option:
            raise UsageError("--demo picks a demo question; do not also give a question or options")
        return demo_question(request.demo)
    if not request.question:
        raise UsageError('give a question, e.g. clearmed ask "What causes ...?" -o "A: ..." -o "B: ...", or --demo')
    for name, value in (
        ("the question", request.question),
        ("--context", request.context),
        *(("--option", o) for o in request.option),
    ):
        # Bytes that are not UTF-8 reach argv as lone surrogates (Python's surrogateescape): no prompt can hold them.
        if value and any("\udc80" <= char <= "\udcff" for char in value):
            raise UsageError(f"{name} holds bytes that are not UTF-8; re-encode it as UTF-8 (e.g. iconv -t UTF-8)")
    options = parse_options(request.option) if request.option else None
    if options is not None and len(options) < 2:
        raise UsageError("a multiple-choice question needs at least two --option values")
    mode: AnswerMode = "free_text" if options is None else ("multi" if request.multi else "single")
    try:
        return Question(id="cli", text=request.question, options=options, answer_mode=mode, context=request.context)
    except pydantic.ValidationError as err:
        raise UsageError("; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())) from None


def ask(request: AskRequest | None = None, /, **fields: Any) -> Decision:
    """CLEAR's Decision on one question: `ask(AskRequest(...))` or `ask(question=..., option=[...], config=...)`."""
    from clearmed.api.assemble import build_program
    from clearmed.api.config_choice import request_config
    from clearmed.programs.lm.prompting import over_budget

    if request is None:
        request = AskRequest(**fields)
    elif fields:
        raise UsageError("give a request or its fields as keywords, not both")
    question = asked_question(request)  # a bad question is refused before anything heavy is loaded
    config = request_config(request)
    refusal = over_budget(question, config.program)  # before loading a model that could not read it
    if refusal is not None:
        raise UsageError(refusal)
    program = build_program("clear", config, artifact=request.program_artifact)
    decision: Decision = program(question=question).decision
    return decision
