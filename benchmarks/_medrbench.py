"""MedRBench (PMC case reports; free text): `medrbench-diagnosis` and `medrbench-treatment`.

A file is one JSON object keyed by PMCID. The question is the case summary (`generate_case.case_summary`,
the official inference input) followed by the task; the gold is `diagnosis_results` / `treatment_plan_results`.
`raw_case` contains the answer and is never loaded. There is no hub copy: the files live on GitHub
(MAGIC-AI4Med/MedRBench data/MedRBench/*.json) and are passed as `source=`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, ParseRow, RowContext, standard_opener
from clearmed.benchmarks._errors import BenchmarkSourceError, RowError
from clearmed.benchmarks._io import RawRow, load_json
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

Task = Literal["diagnosis", "treatment"]

_GOLD_FIELD: dict[Task, str] = {"diagnosis": "diagnosis_results", "treatment": "treatment_plan_results"}
_TASK_LINE: dict[Task, str] = {
    "diagnosis": "Based on the case above, what is the final diagnosis?",
    "treatment": "Based on the case above, what treatment plan do you recommend?",
}
_UPSTREAM_FILE: dict[Task, str] = {
    "diagnosis": "diagnosis_957_cases_with_rare_disease_491.json",
    "treatment": "treatment_496_cases_with_rare_disease_165.json",
}


def _read_local(path: Path, _split: str | None) -> Iterator[RawRow]:
    document = load_json(path)
    if not isinstance(document, dict):
        raise BenchmarkSourceError(f"{path}: expected one JSON object keyed by PMCID")
    for index, (pmcid, record) in enumerate(document.items()):
        location = f"{path} [{pmcid}]"
        if isinstance(record, dict):
            yield RawRow(location, index, {"pmcid": pmcid, **record})
        else:
            yield RawRow(location, index, None, error="record is not an object")


def _parser(task: Task) -> ParseRow:
    def parse_row(row: RawRow, ctx: RowContext) -> Question:
        assert row.data is not None
        data = row.data
        case = f.field(data, "generate_case")
        if not isinstance(case, dict):
            raise RowError("field 'generate_case' should be an object")
        summary = f.text(case, "case_summary")
        rare = f.string_list(data, "checked_rare_disease") if "checked_rare_disease" in data else []
        return Question(
            id=f"{ctx.benchmark}:{data['pmcid']}",
            text=f"{summary}\n\n{_TASK_LINE[task]}",
            answer_mode=ctx.answer_mode,
            gold_text=f.text(case, _GOLD_FIELD[task]),
            metadata={
                "pmcid": str(data["pmcid"]),
                "task": task,
                "body_category": f.metadata_value(data.get("body_category")),
                "disorder_category": f.metadata_value(data.get("disorder_category")),
                "rare_disease": bool(rare),
                "checked_rare_disease": rare,
                "receive_time": f.optional_text(data, "receive_time"),
            },
        )

    return parse_row


BENCHMARKS = []
for _task in ("diagnosis", "treatment"):
    _info = BenchmarkInfo(
        name=f"medrbench-{_task}",
        title=f"MedRBench {_task} (free text, PMC case reports)",
        hub_id=None,
        default_split=None,
        answer_mode="free_text",
        scoring=f"LLM judge, binary Correct/Wrong against the reference {_task} (MedRBench outcome accuracy)",
        shared_file=f"medrbench/{_task}.json",
        notes=f"GitHub MAGIC-AI4Med/MedRBench data/MedRBench/{_UPSTREAM_FILE[_task]}",
    )
    BENCHMARKS.append(BenchmarkDef(_info, standard_opener(_info, None, _read_local), _parser(_task)))
