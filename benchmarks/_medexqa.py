"""MedExQA (`bluesky333/MedExQA`): headerless TSVs `<split>/<specialty>_<split>.tsv` with columns
question, A, B, C, D, exp0, exp1, answer. The explanations describe the answer and are not loaded.

Hub: the csv builder with `sep="\\t"` and explicit column names (bare `load_dataset` would take the first
question as a header). Local: one TSV (specialty from its name) or a directory holding the TSVs.

One answer per question (the authors' prompt asks for "the most suitable one among A, B, C and D" and their
scorer compares one letter), so every question is `single` and a gold of several letters is a malformed row.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, RowContext, standard_opener
from clearmed.benchmarks._errors import BenchmarkSourceError
from clearmed.benchmarks._io import HubSpec, RawRow, read_delimited
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

HUB_ID = "bluesky333/MedExQA"
SPECIALTIES = (
    "biomedical_engineer",
    "clinical_laboratory_scientist",
    "clinical_psychologist",
    "occupational_therapist",
    "speech_pathologist",
)
COLUMNS = ("question", "A", "B", "C", "D", "exp0", "exp1", "answer")
_FILE_NAME = re.compile(r"^(?P<specialty>[a-z_]+?)_(?P<split>test|dev)$")

INFO = BenchmarkInfo(
    name="medexqa",
    title="MedExQA (five underrepresented medical specialties)",
    hub_id=HUB_ID,
    default_split="test",
    splits=["test", "dev"],
    answer_mode="single",
    scoring="accuracy, one gold letter",
)


def _hub(split: str) -> list[HubSpec]:
    return [
        HubSpec(
            path="csv",
            data_files=f"hf://datasets/{HUB_ID}/{split}/{name}_{split}.tsv",
            split="train",
            sep="\t",
            column_names=COLUMNS,
            group=f"{name}:{split}",
        )
        for name in SPECIALTIES
    ]


def _group(path: Path, split: str | None) -> str:
    """`<specialty>:<split>` from `<specialty>_<split>.tsv`, so dev and test rows never share an id."""
    match = _FILE_NAME.match(path.stem)
    if match:
        return f"{match.group('specialty')}:{match.group('split')}"
    return f"{path.stem}:{split or 'test'}"


def _read_local(path: Path, split: str | None) -> Iterator[RawRow]:
    if path.is_dir():
        pattern = f"*_{split or 'test'}.tsv"
        files = sorted(path.rglob(pattern))
        if not files:
            raise BenchmarkSourceError(f"{path}: no {pattern} files")
    else:
        files = [path]
    for file in files:
        yield from read_delimited(file, delimiter="\t", fieldnames=COLUMNS, group=_group(file, split))


def parse_row(row: RawRow, ctx: RowContext) -> Question:
    assert row.data is not None
    data = row.data
    options = f.letter_options([f.text(data, key, allow_empty=True) for key in "ABCD"])
    gold = f.gold_in_options(f.split_letters(f.text(data, "answer")), options)
    group = row.group or f"unknown:{ctx.split}"
    specialty = group.split(":")[0]
    return Question(
        id=f"medexqa:{group}:{row.index}",
        text=f.text(data, "question"),
        answer_mode=ctx.answer_mode,
        options=options,
        gold_letters=gold,
        metadata={"specialty": specialty},
    )


BENCHMARKS = [BenchmarkDef(INFO, standard_opener(INFO, _hub, _read_local), parse_row)]
