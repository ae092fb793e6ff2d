"""MMLU medical subsets (`cais/mmlu`, one config per subject): `choices` (4) and `answer` 0-3.

`mmlu-medical` is the usual six subjects together; `mmlu-<subject>` (hyphens for underscores) is one of them.
Ids are `mmlu:<subject>:<split>:<row>` whichever name loaded them, so results line up between the two.
Local sources: a file of hub rows (.jsonl/.json/.parquet with a `subject` column), or the original headerless
CSVs (`question,A,B,C,D,answer-letter`, named `<subject>_<split>.csv`), one file or a directory of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, ParseRow, RowContext, standard_opener
from clearmed.benchmarks._errors import BenchmarkSourceError, Excluded, RowError
from clearmed.benchmarks._io import HubSpec, RawRow, read_delimited, read_table
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

HUB_ID = "cais/mmlu"
MEDICAL_SUBJECTS = (
    "anatomy",
    "clinical_knowledge",
    "college_biology",
    "college_medicine",
    "medical_genetics",
    "professional_medicine",
)
_RAW_COLUMNS = ("question", "A", "B", "C", "D", "answer")
_RAW_NAME = re.compile(r"^(?P<subject>[a-z_]+?)_(?P<split>test|val|dev)$")


def _subject_of_file(path: Path) -> str:
    match = _RAW_NAME.match(path.stem)
    return match.group("subject") if match else path.stem


def _read_local(path: Path, split: str | None) -> Iterator[RawRow]:
    if path.is_dir():
        # The original archive names the validation files "_val"; the hub calls the split "validation".
        suffix = {"validation": "val"}.get(split or "test", split or "test")
        files = sorted(path.rglob(f"*_{suffix}.csv"))
        if not files:
            raise BenchmarkSourceError(f"{path}: no <subject>_{suffix}.csv files")
        for file in files:
            yield from read_delimited(file, fieldnames=_RAW_COLUMNS, group=_subject_of_file(file))
    elif path.suffix.lower() == ".csv":
        yield from read_delimited(path, fieldnames=_RAW_COLUMNS, group=_subject_of_file(path))
    else:
        yield from read_table(path)


def _parser(subjects: tuple[str, ...]) -> ParseRow:
    def parse_row(row: RawRow, ctx: RowContext) -> Question:
        assert row.data is not None
        data = row.data
        subject = f.optional_text(data, "subject") or row.group or ""
        if subject not in subjects:
            raise Excluded(f"subject {subject or '(none)'} is not in {ctx.benchmark}")
        if "choices" in data:
            options = f.letter_options(f.string_list(data, "choices"))
            answer = f.field(data, "answer")
            if isinstance(answer, int) and not isinstance(answer, bool):
                if answer not in range(len(options)):
                    raise RowError(f"answer index {answer} is out of range for {len(options)} choices")
                gold = [f.LETTERS[answer]]
            else:
                gold = f.split_letters(str(answer))
        else:  # the original headerless CSV
            options = f.letter_options([f.text(data, key, allow_empty=True) for key in "ABCD"])
            gold = f.split_letters(f.text(data, "answer"))
        if len(gold) != 1:
            raise RowError(f"MMLU has one answer per question, got {gold}")
        return Question(
            id=f"mmlu:{subject}:{ctx.split}:{row.index}",
            text=f.text(data, "question"),
            answer_mode=ctx.answer_mode,
            options=options,
            gold_letters=f.gold_in_options(gold, options),
            metadata={"subject": subject},
        )

    return parse_row


def _definition(name: str, title: str, subjects: tuple[str, ...], shared_file: str | None = None) -> BenchmarkDef:
    info = BenchmarkInfo(
        name=name,
        title=title,
        hub_id=HUB_ID,
        hub_config=",".join(subjects),
        default_split="test",
        splits=["test", "validation", "dev"],
        answer_mode="single",
        scoring="accuracy, one gold letter (answer 0-3 -> A-D)",
        shared_file=shared_file,
    )

    def hub(split: str) -> list[HubSpec]:
        return [HubSpec(path=HUB_ID, name=subject, split=split, group=subject) for subject in subjects]

    return BenchmarkDef(info, standard_opener(info, hub, _read_local), _parser(subjects))


# The shared pool is MIRAGE's six subjects (cais/mmlu rows with `subject`); part of the 1,089 is held out.
BENCHMARKS = [
    _definition("mmlu-medical", "MMLU, six medical subjects", MEDICAL_SUBJECTS, shared_file="mmlu_med/test_pool.jsonl")
]
BENCHMARKS += [
    _definition(f"mmlu-{subject.replace('_', '-')}", f"MMLU {subject}", (subject,)) for subject in MEDICAL_SUBJECTS
]
