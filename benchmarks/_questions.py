"""Your own questions, in the format `clearmed.evaluate` takes a list in: a JSONL file of one object a line, or a
JSON list of objects, each ``{"question": ..., "options": [...], "answer": "B", "id": ...}`` (`PlainQuestion`).

`load_benchmark("questions", source=FILE)` reads such a file, and so does `clearmed eval --benchmark questions
--source FILE`: your own questions are then sampled, listed by id, sharded and put in a suite as a benchmark's
are. "questions" is no registered benchmark: a benchmark asks every question in one format
(`BenchmarkInfo.answer_mode`), while each of your questions says its own (options or none, and `multi`); neither
is ever read from the gold. An id is kept as given; a question without one gets the digest of its text and
options (`Question.of`), the id the Python API gives the same question, so a run folder resumes on the same
questions whichever door wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from clearmed.benchmarks._base import OpenedSource
from clearmed.benchmarks._errors import BenchmarkSourceError, RowError
from clearmed.benchmarks._io import RawRow, check_file, load_json, read_jsonl, records_to_rows
from clearmed.signatures.records import Question

QUESTIONS = "questions"
QUESTIONS_FORMAT = (
    'a JSONL file (or a JSON list) of {"question": ..., "options": [...], "answer": "B", "id": ...} objects'
)


class PlainQuestion(BaseModel):
    """A question as a dict gives it: its text, its options (a list, lettered A, B, C, ... in order, or letters to
    texts; none for free text), the gold (`Question.of`), and an id if it has one."""

    model_config = ConfigDict(extra="forbid")

    question: str
    options: list[str] | dict[str, str] | None = None
    answer: str | list[str] | None = None
    id: str | None = None
    multi: bool = False
    context: str | None = None

    @field_validator("options", mode="before")
    @classmethod
    def _not_one_string(cls, value: object) -> object:
        if isinstance(value, str):  # "A: x, B: y" is no list: refused in the words of the list, not of the union
            raise ValueError("give a list of option texts (or letters to texts), not one string")
        return value

    def record(self) -> Question:
        return Question.of(
            self.question, self.options, answer=self.answer, id=self.id, multi=self.multi, context=self.context
        )


def plain_question(item: str | Mapping[str, object]) -> Question:
    """A question from its text (free text) or its dict (`PlainQuestion`); what is wrong with it is one
    `ValueError` naming the fields."""
    try:
        return Question.of(item) if isinstance(item, str) else PlainQuestion.model_validate(item).record()
    except ValidationError as err:  # a ValueError too: caught first, for its fields' names
        raise ValueError(_reasons(err)) from None


def _reasons(err: ValidationError) -> str:
    """Each error as `field: reason` (a whole-question rule's reason alone), without pydantic's "Value error, "."""
    return "; ".join(
        ".".join(map(str, e["loc"])) + ": " * bool(e["loc"]) + e["msg"].removeprefix("Value error, ")
        for e in err.errors()
    )


def benchmark_folder(benchmark: str, source: str | Path | None) -> str:
    """The folder a run of `benchmark` is named by: the name, or for your own questions "questions-<the file's
    stem>", so the runs of two files never share a default folder (a resume would find the other file's list)."""
    return f"{QUESTIONS}-{Path(source).stem}" if benchmark == QUESTIONS and source else benchmark


def open_rows(source: Path | None, split: str | None) -> OpenedSource:
    """The file's rows; `split` only labels the set (default: the file's stem), as for a benchmark's local file."""
    if source is None:
        raise BenchmarkSourceError(
            f"{QUESTIONS}: give your questions file as the source (--source FILE): {QUESTIONS_FORMAT}"
        )
    check_file(source)
    suffix = source.suffix.lower()
    if suffix in {".jsonl", ".ndjson"}:
        rows = read_jsonl(source)
    elif suffix == ".json":
        value = load_json(source)
        if not isinstance(value, list):
            raise BenchmarkSourceError(f"{source}: expected a JSON list of questions, got {type(value).__name__}")
        rows = records_to_rows(source, value)
    else:
        raise BenchmarkSourceError(
            f"{source}: your questions are {QUESTIONS_FORMAT}, not a {suffix or 'suffixless'} file"
        )
    return OpenedSource(str(source), split or source.stem, rows)


def parse_row(row: RawRow) -> Question:
    assert row.data is not None
    try:
        return plain_question(row.data)
    except ValueError as err:
        raise RowError(str(err)) from None
