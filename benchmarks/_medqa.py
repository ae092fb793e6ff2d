"""MedQA (USMLE, US English, 4 options) in the original jind11 / `GBaker/MedQA-USMLE-4-options` layout."""

from __future__ import annotations

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, RowContext, standard_opener
from clearmed.benchmarks._errors import RowError
from clearmed.benchmarks._io import HubSpec, RawRow
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

HUB_ID = "GBaker/MedQA-USMLE-4-options"

INFO = BenchmarkInfo(
    name="medqa",
    title="MedQA (USMLE, 4 options)",
    hub_id=HUB_ID,
    default_split="test",
    splits=["test", "train"],
    answer_mode="single",
    scoring="accuracy, one gold letter (answer_idx)",
    shared_file="medqa/dev.jsonl",
    notes="hub files phrases_no_exclude_{train,test}.jsonl, read with the json builder",
)


def _hub(split: str) -> list[HubSpec]:
    return [HubSpec(path="json", data_files=f"hf://datasets/{HUB_ID}/phrases_no_exclude_{split}.jsonl")]


def parse_row(row: RawRow, ctx: RowContext) -> Question:
    assert row.data is not None
    data = row.data
    options = f.mapping_options(data, "options")
    gold = f.gold_in_options([f.text(data, "answer_idx").upper()], options)
    answer_text = f.optional_text(data, "answer")
    # The answer text duplicates the letter; a disagreement means the row was edited inconsistently.
    if answer_text is not None and answer_text.casefold() != options[gold[0]].casefold():
        raise RowError(f"answer text {answer_text!r} is not option {gold[0]} ({options[gold[0]]!r})")
    native = data.get("realidx", row.index)
    return Question(
        id=f"medqa:{ctx.split}:{native}",
        text=f.text(data, "question"),
        answer_mode=ctx.answer_mode,
        options=options,
        gold_letters=gold,
        metadata={"meta_info": f.optional_text(data, "meta_info"), "row": row.index},
    )


BENCHMARKS = [BenchmarkDef(INFO, standard_opener(INFO, _hub), parse_row)]
