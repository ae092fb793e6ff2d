"""MMLU-Pro, health category (`TIGER-Lab/MMLU-Pro`): 3-10 options as a list, answer letter A-J.

Rows of other categories are counted in `excluded`. Trailing "N/A" options are padding (the validation split
pads every question to ten) and are dropped; an "N/A" in the middle of the list is kept as written.
"""

from __future__ import annotations

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, RowContext, standard_opener
from clearmed.benchmarks._errors import Excluded, RowError
from clearmed.benchmarks._io import HubSpec, RawRow
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

HUB_ID = "TIGER-Lab/MMLU-Pro"
CATEGORY = "health"
_PADDING = {"n/a"}

INFO = BenchmarkInfo(
    name="mmlu-pro-health",
    title="MMLU-Pro, health category",
    hub_id=HUB_ID,
    default_split="test",
    splits=["test", "validation"],
    answer_mode="single",
    scoring="accuracy, one gold letter among up to 10 (A-J)",
    shared_file="mmlu_pro/test_health.jsonl",
    notes="category == 'health' filter; shared also has mmlu_pro/validation.jsonl (all categories)",
)


def _hub(split: str) -> list[HubSpec]:
    return [HubSpec(path=HUB_ID, split=split)]


def parse_row(row: RawRow, ctx: RowContext) -> Question:
    assert row.data is not None
    data = row.data
    category = f.text(data, "category")
    if category != CATEGORY:
        raise Excluded(f"category is not {CATEGORY}")
    texts = f.string_list(data, "options")
    while texts and texts[-1].strip().casefold() in _PADDING:
        texts.pop()
    options = f.letter_options(texts)
    letter = f.text(data, "answer").upper()
    gold = f.gold_in_options([letter], options)
    if "answer_index" in data and data["answer_index"] is not None:
        index = f.integer(data, "answer_index")
        if f.LETTERS[index : index + 1] != letter:
            raise RowError(f"answer {letter} disagrees with answer_index {index}")
    native = data.get("question_id", f"{ctx.split}:{row.index}")
    return Question(
        id=f"mmlu-pro:{native}",
        text=f.text(data, "question"),
        answer_mode=ctx.answer_mode,
        options=options,
        gold_letters=gold,
        metadata={"src": f.optional_text(data, "src"), "category": category, "split": ctx.split},
    )


BENCHMARKS = [BenchmarkDef(INFO, standard_opener(INFO, _hub), parse_row)]
