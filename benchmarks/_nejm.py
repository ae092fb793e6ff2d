"""NEJM-QA (`nejm-ai-qa/exams`): five specialty CSVs with columns `question` (stem + options "\\nA. ...")
and `answer` (a letter, or comma-separated letters for multi-answer questions such as "A,C").

`split` is the specialty; without one, all five are loaded. Some questions have several correct letters, so
every question is `multi` (choose one or more), whatever its own gold: the answer mode sets the prompt, and a
mode taken from the gold would tell the model how many answers are right. Scoring is exact set equality.

Known malformed upstream rows are repaired when the fix is unambiguous (the repair is recorded in
`metadata["repair"]`): an option introduced as "Third." instead of "C.", one out-of-sequence letter standing
where exactly one letter is missing (obgyn "G." for "C."), or a missing letter written inline inside the
previous option (". C. "). Anything else (e.g. a missing "A." label) is a malformed row.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, OpenedSource, RowContext, from_hub
from clearmed.benchmarks._errors import BenchmarkSourceError, RowError
from clearmed.benchmarks._io import HubSpec, RawRow, read_delimited
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

HUB_ID = "nejm-ai-qa/exams"
SPECIALTIES = ("general_surgery", "internal_medicine", "obgyn", "pediatrics", "psychiatry")
_OPTION_LINE = re.compile(r"^\s*([A-Z])[.)]\s+(.*)$")
_THIRD = re.compile(r"^\s*Third[.)]\s+", re.MULTILINE)

INFO = BenchmarkInfo(
    name="nejm-qa",
    title="NEJM-QA (Israeli residency board exams; five specialties)",
    hub_id=HUB_ID,
    default_split=None,
    splits=list(SPECIALTIES),
    answer_mode="multi",
    scoring="exact set equality with the gold letters (some questions have several; every question is asked as "
    "choose one or more); the CLEAR code's lenient 'prediction in gold set' is reported separately",
    notes="split = specialty; none = all five. Hub files <specialty>.csv, read with the csv builder",
)


def _hub_specs(specialties: tuple[str, ...]) -> list[HubSpec]:
    return [
        HubSpec(path="csv", data_files=f"hf://datasets/{HUB_ID}/{name}.csv", split="train", group=name)
        for name in specialties
    ]


def _specialties(split: str | None) -> tuple[str, ...]:
    if split is None:
        return SPECIALTIES
    if split not in SPECIALTIES:
        raise BenchmarkSourceError(f"nejm-qa: unknown specialty {split!r}; choose from {list(SPECIALTIES)}")
    return (split,)


def _open_rows(source: Path | None, split: str | None, revision: str | None = None) -> OpenedSource:
    label = split or "all"
    if source is None:
        description, rows = from_hub(_hub_specs(_specialties(split)), revision)
        return OpenedSource(description, label, rows)
    if source.is_dir():
        files = [source / f"{name}.csv" for name in _specialties(split)]
        missing = [str(file) for file in files if not file.exists()]
        if missing:
            raise BenchmarkSourceError(f"nejm-qa: missing specialty files {missing}")
        return OpenedSource(str(source), label, _read_files(files))
    return OpenedSource(str(source), split or source.stem, _read_files([source], group=split))


def _read_files(files: list[Path], group: str | None = None) -> Iterator[RawRow]:
    for file in files:
        yield from read_delimited(file, group=group or file.stem)


def split_embedded_options(question: str) -> tuple[str, dict[str, str], str | None]:
    """(stem, options, repair note) from a question whose options follow the stem as "\\nA. ..." lines."""
    repair: str | None = None
    if _THIRD.search(question):
        question = _THIRD.sub("C. ", question)
        repair = "option C introduced as 'Third.'"
    lines = question.split("\n")
    start = next((i for i, line in enumerate(lines) if re.match(r"^\s*A[.)]\s+", line)), None)
    if start is None:
        raise RowError("no 'A.' option line in the question")
    stem = "\n".join(lines[:start]).strip()
    entries: list[tuple[str, str]] = []
    for line in lines[start:]:
        match = _OPTION_LINE.match(line)
        if match:
            entries.append((match.group(1), match.group(2).strip()))
        elif entries and line.strip():
            letter, text = entries[-1]
            entries[-1] = (letter, f"{text} {line.strip()}")
    letters = [letter for letter, _ in entries]
    expected = list(f.LETTERS[: len(letters)])
    if letters != expected:
        entries, note = _repair_letters(entries)
        repair = note if repair is None else f"{repair}; {note}"
    if not stem:
        raise RowError("the question stem is empty")
    return stem, dict(entries), repair


def _repair_letters(entries: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], str]:
    letters = [letter for letter, _ in entries]
    if len(set(letters)) != len(letters):
        raise RowError(f"repeated option letters {letters}")
    # A missing letter written inline inside the option before it ("B. Fluids. C. Antibiotic"): split it.
    expected = list(f.LETTERS[: len(letters) + 1])
    missing = [letter for letter in expected if letter not in letters]
    if len(missing) == 1 and missing[0] != "A" and letters[-1] == expected[-1]:
        gap = missing[0]
        before = f.LETTERS[f.LETTERS.index(gap) - 1]
        position = letters.index(before)
        pieces = re.split(rf"(?<=[.;,])\s+{gap}[.)]\s+", entries[position][1], maxsplit=1)
        if len(pieces) == 2 and pieces[0].strip() and pieces[1].strip():
            entries = list(entries)
            entries[position : position + 1] = [(before, pieces[0].strip()), (gap, pieces[1].strip())]
            return entries, f"option {gap} inline inside option {before}"
    # One stray letter standing exactly where the one missing letter belongs ("A, B, G, D"): rename it.
    # A stray that is merely the next letter ("A, B, D") is a gap, not a mislabel, and is not renamed.
    expected = list(f.LETTERS[: len(letters)])
    missing = [letter for letter in expected if letter not in letters]
    stray = [letter for letter in letters if letter not in expected]
    if len(missing) == 1 and len(stray) == 1 and stray[0] not in f.LETTERS[: len(letters) + 1]:
        position = letters.index(stray[0])
        if position == expected.index(missing[0]):
            entries = list(entries)
            entries[position] = (missing[0], entries[position][1])
            return entries, f"option {missing[0]} labelled {stray[0]!r}"
    raise RowError(f"cannot read the options: letters found {letters}")


def parse_row(row: RawRow, ctx: RowContext) -> Question:
    assert row.data is not None
    stem, options, repair = split_embedded_options(f.text(row.data, "question"))
    options = f.check_options(options)
    gold = f.gold_in_options(f.split_letters(f.text(row.data, "answer")), options)
    specialty = row.group or ctx.split
    return Question(
        id=f"nejm-qa:{specialty}:{row.index}",
        text=stem,
        answer_mode=ctx.answer_mode,
        options=options,
        gold_letters=gold,
        metadata={"specialty": specialty, "row": row.index, "repair": repair},
    )


BENCHMARKS = [BenchmarkDef(INFO, _open_rows, parse_row)]
