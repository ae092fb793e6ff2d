"""HealthBench (OpenAI): rubric-graded conversations. `healthbench` (5,000), `healthbench-hard` (1,000),
`healthbench-consensus` (3,671).

One JSONL record = `prompt` (chat turns), `prompt_id`, `rubrics` [{criterion, points, tags}], `example_tags`,
`ideal_completions_data`. The question text is the last user turn; the whole prompt is `conversation`, the
rubric is `rubric`, and the ideal completion (when present) is `gold_text`. Hub: `openai/healthbench` holds
the plain JSONL files, read with the json builder (bare `load_dataset` would mix in the meta-eval file).
"""

from __future__ import annotations

from collections.abc import Mapping

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, RowContext, standard_opener
from clearmed.benchmarks._errors import RowError
from clearmed.benchmarks._io import HubSpec, RawRow
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import ChatTurn, Question, RubricItem

HUB_ID = "openai/healthbench"
_FILES = {
    "healthbench": "2025-05-07-06-14-12_oss_eval.jsonl",
    "healthbench-hard": "hard_2025-05-08-21-00-10.jsonl",
    "healthbench-consensus": "consensus_2025-05-09-20-00-46.jsonl",
}
_ROLES = {"system", "user", "assistant"}


def _turns(data: Mapping[str, object]) -> list[ChatTurn]:
    prompt = f.field(data, "prompt")
    if not isinstance(prompt, list) or not prompt:
        raise RowError("field 'prompt' should be a non-empty list of turns")
    turns = []
    for position, turn in enumerate(prompt):
        if not isinstance(turn, dict):
            raise RowError(f"prompt turn {position} is not an object")
        role = f.text(turn, "role")
        if role not in _ROLES:
            raise RowError(f"prompt turn {position} has role {role!r}")
        turns.append(ChatTurn.model_validate({"role": role, "content": f.text(turn, "content", allow_empty=True)}))
    if turns[-1].role != "user":
        raise RowError("the last prompt turn is not a user turn")
    return turns


def _rubric(data: Mapping[str, object]) -> list[RubricItem]:
    rubrics = f.field(data, "rubrics")
    if not isinstance(rubrics, list) or not rubrics:
        raise RowError("field 'rubrics' should be a non-empty list")
    items = []
    for position, item in enumerate(rubrics):
        if not isinstance(item, dict):
            raise RowError(f"rubric item {position} is not an object")
        points = f.field(item, "points")
        if isinstance(points, bool) or not isinstance(points, int | float):
            raise RowError(f"rubric item {position} points should be a number, got {points!r}")
        tags = f.string_list(item, "tags") if item.get("tags") is not None else []
        items.append(RubricItem(criterion=f.text(item, "criterion"), points=float(points), tags=tags))
    return items


def parse_row(row: RawRow, ctx: RowContext) -> Question:
    assert row.data is not None
    data = row.data
    turns = _turns(data)
    ideal = data.get("ideal_completions_data")
    ideal_text = ideal.get("ideal_completion") if isinstance(ideal, dict) else None
    return Question(
        id=f"healthbench:{f.text(data, 'prompt_id')}",
        text=turns[-1].content,
        answer_mode=ctx.answer_mode,
        conversation=turns,
        rubric=_rubric(data),
        gold_text=ideal_text if isinstance(ideal_text, str) and ideal_text.strip() else None,
        metadata={
            "example_tags": f.string_list(data, "example_tags") if data.get("example_tags") else [],
            "subset": ctx.benchmark,
        },
    )


BENCHMARKS = []
for _name, _file in _FILES.items():
    _info = BenchmarkInfo(
        name=_name,
        title=f"HealthBench ({_name.removeprefix('healthbench').strip('-') or 'full'})",
        hub_id=HUB_ID,
        default_split="train",
        splits=["train"],
        answer_mode="free_text",
        scoring="rubric: per example sum(points met) / sum(positive points), unclipped; the benchmark score "
        "is the mean clipped to [0, 1] (simple-evals calculate_score)",
        notes=f"hub file {_file}",
    )

    def _hub(_split: str, _file: str = _file) -> list[HubSpec]:
        return [HubSpec(path="json", data_files=f"hf://datasets/{HUB_ID}/{_file}", split="train")]

    BENCHMARKS.append(BenchmarkDef(_info, standard_opener(_info, _hub), parse_row))
