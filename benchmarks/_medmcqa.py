"""MedMCQA (`openlifescienceai/medmcqa`): opa..opd, `cop` 0-3.

`choice_type` "multi" rows still carry exactly one `cop` upstream (there is no multi-letter key), so they are
loaded as single-answer questions with that one gold letter and `metadata["choice_type"] == "multi"`.
* `medmcqa`: every labelled row (the validation split is what papers report).
* `medmcqa-single`: only `choice_type == "single"` (MedAgentsBench's filter); other rows are counted in
  `excluded`. Rows whose choice type is unknown (the shared copy has "unknown" where the source lost it) are
  excluded too, since they cannot be shown to be single.
Rows with repeated option texts (about 20 in validation) cannot be a `Question` and are skipped and counted.
"""

from __future__ import annotations

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, ParseRow, RowContext, standard_opener
from clearmed.benchmarks._errors import Excluded, RowError
from clearmed.benchmarks._io import HubSpec, RawRow
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

HUB_ID = "openlifescienceai/medmcqa"
_KEYS = ("opa", "opb", "opc", "opd")


def _info(name: str, title: str) -> BenchmarkInfo:
    return BenchmarkInfo(
        name=name,
        title=title,
        hub_id=HUB_ID,
        default_split="validation",
        splits=["validation", "train", "test"],
        answer_mode="single",
        scoring="accuracy, one gold letter (cop 0-3 -> A-D); the test split is unlabelled (cop = -1)",
        shared_file="medmcqa/validation.jsonl",
    )


def _hub(split: str) -> list[HubSpec]:
    return [HubSpec(path=HUB_ID, split=split)]


def _parser(single_only: bool) -> ParseRow:
    def parse_row(row: RawRow, ctx: RowContext) -> Question:
        assert row.data is not None
        data = row.data
        choice_type = f.optional_text(data, "choice_type") or "unknown"
        if single_only and choice_type != "single":
            raise Excluded(f"choice_type is {choice_type}, not single")
        cop = f.integer(data, "cop")
        if cop == -1:
            raise Excluded("unlabelled (cop = -1)")
        if cop not in range(4):
            raise RowError(f"cop {cop} is not 0-3")
        options = f.letter_options([f.text(data, key, allow_empty=True) for key in _KEYS])
        native = data.get("id") or f"{ctx.split}:{row.index}"
        return Question(
            id=f"medmcqa:{native}",
            text=f.text(data, "question"),
            answer_mode=ctx.answer_mode,
            options=options,
            gold_letters=[f.LETTERS[cop]],
            metadata={
                "choice_type": choice_type,
                "subject_name": f.optional_text(data, "subject_name"),
                "topic_name": f.optional_text(data, "topic_name"),
                "split": ctx.split,
            },
        )

    return parse_row


BENCHMARKS = []
for _name, _single, _title in (
    ("medmcqa", False, "MedMCQA (all labelled rows; multi rows keep their one cop)"),
    ("medmcqa-single", True, "MedMCQA, choice_type single only"),
):
    _i = _info(_name, _title)
    BENCHMARKS.append(BenchmarkDef(_i, standard_opener(_i, _hub), _parser(_single)))
