"""AfriMed-QA v2 (`intronhealth/afrimedqa_v2`, gated; one CSV, hub split `train`), MCQ part.

The benchmark is the expert-written MCQs (`question_type == "mcq"` and `tier == "expert"`); other rows are
counted in `excluded`. The real train/test split is the `split` column, selected with `split=` (default
"test"). Options come from the `answer_options` JSON string (`option1..option5`, unused slots "N/A") and
`optionN` becomes the N-th letter. Some golds name several options ("option1,option3"), so every question is
`multi` (choose one or more), whatever its own gold, and is scored by exact set: a mode taken from the gold
would tell the model how many answers are right (the official AfriMed code keeps only the first gold option;
note this when comparing).
"""

from __future__ import annotations

import json
from pathlib import Path

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, OpenedSource, RowContext, choose_split, from_hub
from clearmed.benchmarks._errors import Excluded, RowError
from clearmed.benchmarks._io import HubSpec, RawRow, read_table
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

HUB_ID = "intronhealth/afrimedqa_v2"
_UNUSED = {"", "n/a", "na", "none"}

INFO = BenchmarkInfo(
    name="afrimedqa",
    title="AfriMed-QA v2, expert multiple-choice questions",
    hub_id=HUB_ID,
    default_split="test",
    splits=["test", "train"],
    answer_mode="multi",
    scoring="exact set equality with the gold letters (optionN -> N-th letter; every question is asked as choose "
    "one or more)",
    notes="gated on the hub (accept the terms, then `huggingface-cli login`); split = the `split` column",
)


def _open_rows(source: Path | None, split: str | None, revision: str | None = None) -> OpenedSource:
    chosen = choose_split(INFO, split)
    if source is None:
        description, rows = from_hub([HubSpec(path=HUB_ID, split="train")], revision)
        return OpenedSource(description, chosen, rows)
    return OpenedSource(str(source), chosen, read_table(source))


def _options(raw: str) -> dict[str, str]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RowError(f"answer_options is not JSON ({exc.msg})") from exc
    if not isinstance(value, dict):
        raise RowError("answer_options should be a JSON object of option1..option5")
    options: dict[str, str] = {}
    for key, text in value.items():
        if not (isinstance(key, str) and key.startswith("option") and key[6:].isdigit()):
            raise RowError(f"answer_options key {key!r} is not optionN")
        if text is None or (isinstance(text, str) and text.strip().casefold() in _UNUSED):
            continue
        options[f.LETTERS[int(key[6:]) - 1]] = str(text)
    return f.check_options(options)


def _gold(raw: str) -> list[str]:
    letters = []
    for part in raw.split(","):
        part = part.strip()
        if not (part.startswith("option") and part[6:].isdigit() and int(part[6:]) >= 1):
            raise RowError(f"correct_answer {raw!r} is not optionN or a comma-separated list of them")
        letters.append(f.LETTERS[int(part[6:]) - 1])
    return letters


def parse_row(row: RawRow, ctx: RowContext) -> Question:
    assert row.data is not None
    data = row.data
    question_type = f.text(data, "question_type")
    if question_type != "mcq":
        raise Excluded(f"question_type is {question_type}, not mcq")
    tier = f.optional_text(data, "tier") or "unknown"
    if tier != "expert":
        raise Excluded(f"tier is {tier}, not expert")
    row_split = f.optional_text(data, "split") or "unknown"
    if row_split != ctx.split:
        raise Excluded(f"split column is {row_split}, not {ctx.split}")
    options = _options(f.text(data, "answer_options"))
    gold = f.gold_in_options(_gold(f.text(data, "correct_answer")), options)
    return Question(
        id=f"afrimedqa:{f.text(data, 'sample_id')}",
        text=f.text(data, "question"),
        answer_mode=ctx.answer_mode,
        options=options,
        gold_letters=gold,
        metadata={
            "specialty": f.optional_text(data, "specialty"),
            "country": f.optional_text(data, "country"),
            "tier": tier,
            "split": row_split,
        },
    )


BENCHMARKS = [BenchmarkDef(INFO, _open_rows, parse_row)]
