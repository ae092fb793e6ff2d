"""MedBullets (Chen et al. 2025): no official hub copy; `mkieffer/Medbullets` is used (splits `op4_test`,
`op5_test`; fields idx, question, options{A..E}, answer, explanation, link; E is "" in op4).

Local sources: rows in that layout, or the raw upstream pandas column-oriented JSON
(`{"question": {"0": ...}, "opa": {...}, ..., "answer_idx": {...}}`, HanjieChen/ChallengeClinicalQA).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, RowContext, standard_opener
from clearmed.benchmarks._io import HubSpec, RawRow, load_json, read_table
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

HUB_ID = "mkieffer/Medbullets"
_RAW_OPTION_COLUMNS = {"opa": "A", "opb": "B", "opc": "C", "opd": "D", "ope": "E"}

INFO = BenchmarkInfo(
    name="medbullets",
    title="MedBullets (USMLE step 2/3 style; community hub copy)",
    hub_id=HUB_ID,
    default_split="op4_test",
    splits=["op4_test", "op5_test"],
    answer_mode="single",
    scoring="accuracy, one gold letter",
    notes="the same 308 questions in both splits; the gold letter may differ between them",
)


def _hub(split: str) -> list[HubSpec]:
    return [HubSpec(path=HUB_ID, split=split)]


def _read_local(path: Path, _split: str | None) -> Iterator[RawRow]:
    if path.suffix.lower() == ".json":
        document = load_json(path)
        if isinstance(document, dict) and isinstance(document.get("question"), dict):
            yield from _columns_to_rows(path, document)
            return
    yield from read_table(path)


def _columns_to_rows(path: Path, columns: dict[str, object]) -> Iterator[RawRow]:
    questions = columns["question"]
    assert isinstance(questions, dict)
    for index, key in enumerate(questions):
        row: dict[str, object] = {"idx": str(key)}
        for name, column in columns.items():
            if isinstance(column, dict):
                row[name] = column.get(key)
        options = {letter: row.pop(col) for col, letter in _RAW_OPTION_COLUMNS.items() if col in row}
        row["options"] = options
        row["answer"] = row.pop("answer_idx", None)
        yield RawRow(f"{path} [question {key}]", index, row)


def parse_row(row: RawRow, ctx: RowContext) -> Question:
    assert row.data is not None
    data = row.data
    options = f.mapping_options(data, "options")
    gold = f.gold_in_options([f.text(data, "answer").upper()], options)
    native = data.get("idx") or row.index
    return Question(
        id=f"medbullets:{ctx.split}:{native}",
        text=f.text(data, "question"),
        answer_mode=ctx.answer_mode,
        options=options,
        gold_letters=gold,
        metadata={"link": f.optional_text(data, "link"), "split": ctx.split},
    )


BENCHMARKS = [BenchmarkDef(INFO, standard_opener(INFO, _hub, _read_local), parse_row)]
