"""MIRAGE (Xiong et al., 2024, the MedRAG benchmark): five medical QA sets in one `benchmark.json`.

Upstream schema (github.com/Teddy-XiongGZ/MIRAGE, `benchmark.json`): ``{subset: {id: {question, options{A..},
answer}}}`` with the subsets ``mmlu`` (MMLU-Med, 1,089), ``medqa`` (MedQA-US, 1,273), ``medmcqa`` (dev, 4,183),
``pubmedqa`` (PubMedQA*, 500, contexts removed, options yes/no/maybe) and ``bioasq`` (BioASQ-Y/N, 618, yes/no).
Every subset is one benchmark here (``mirage-medqa``, ...), so each gets its own run folder, with MIRAGE's own ids
(``mirage:medqa:0000``): the ids its published predictions are filed under (``test_<id>.json``; ``dev_<id>.json``
for MedMCQA), which `clearmed.recorded` reads as recorded pathways. MIRAGE is on GitHub, not on the
Hugging Face hub: download ``benchmark.json`` and pass it as the source.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, OpenedSource, OpenRows, ParseRow, RowContext
from clearmed.benchmarks._errors import BenchmarkDataError, BenchmarkSourceError
from clearmed.benchmarks._io import RawRow, load_json
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

SUBSETS: dict[str, str] = {
    "mmlu": "MMLU-Med (six medical subjects)",
    "medqa": "MedQA-US (4 options)",
    "medmcqa": "MedMCQA (dev)",
    "pubmedqa": "PubMedQA* (no contexts)",
    "bioasq": "BioASQ-Y/N (no snippets)",
}
# MIRAGE files MedMCQA's predictions under its dev split and every other subset's under test (src/evaluate.py).
PREDICTION_SPLIT: dict[str, str] = {"medmcqa": "dev"}
SOURCE_URL = "https://github.com/Teddy-XiongGZ/MIRAGE/raw/main/benchmark.json"


def question_id(subset: str, native_id: str) -> str:
    return f"mirage:{subset}:{native_id}"


def native_id(question_id_: str) -> tuple[str, str]:
    """``mirage:medqa:0000`` -> ``("medqa", "0000")``; a ValueError for any other id."""
    prefix, subset, native = ([*question_id_.split(":", 2), "", ""])[:3]
    if prefix != "mirage" or subset not in SUBSETS or not native:
        raise ValueError(f"{question_id_!r} is not a MIRAGE question id")
    return subset, native


def _opener(info: BenchmarkInfo, subset: str) -> OpenRows:
    def open_rows(source: Path | None, split: str | None, revision: str | None = None) -> OpenedSource:
        del revision  # not on the hub: a local file only, and load_benchmark refuses a revision for one
        if source is None:
            raise BenchmarkSourceError(
                f"{info.name} has no Hugging Face hub copy; download {SOURCE_URL} and pass --source <benchmark.json>"
            )
        document = load_json(source)
        if not isinstance(document, dict):
            raise BenchmarkDataError(str(source), "not a MIRAGE benchmark.json (expected {subset: {id: question}})")
        table = document.get(subset)
        if not isinstance(table, dict):
            raise BenchmarkSourceError(f"{source}: no {subset!r} subset (it has {sorted(document)})")
        return OpenedSource(f"{source} [{subset}]", split or "test", _rows(source, subset, table))

    return open_rows


def _rows(source: Path, subset: str, table: dict[str, object]) -> Iterator[RawRow]:
    # MIRAGE's own order: sorted ids (utils.QADataset.index).
    for index, key in enumerate(sorted(table)):
        value = table[key]
        location = f"{source} [{subset}][{key}]"
        if isinstance(value, dict):
            yield RawRow(location, index, {**value, "_id": key})
        else:
            yield RawRow(location, index, None, error="question is not an object")


def _parser(subset: str) -> ParseRow:
    def parse_row(row: RawRow, ctx: RowContext) -> Question:
        assert row.data is not None
        data = row.data
        options = f.mapping_options(data, "options")
        return Question(
            id=question_id(subset, str(data["_id"])),
            text=f.text(data, "question"),
            answer_mode=ctx.answer_mode,
            options=options,
            gold_letters=f.gold_in_options([f.text(data, "answer").upper()], options),
            metadata={"subset": subset, "row": row.index},
        )

    return parse_row


def _definition(subset: str, title: str) -> BenchmarkDef:
    info = BenchmarkInfo(
        name=f"mirage-{subset}",
        title=f"MIRAGE {title}",
        hub_id=None,
        default_split="test",
        splits=["test"],
        answer_mode="single",
        scoring="accuracy, one gold letter (answer)",
        # Relative to the shared data's benchmarks/ folder: the shared copy keeps MIRAGE's own layout beside it.
        shared_file="../mirage/benchmark.json",
        notes=f"benchmark.json from {SOURCE_URL}",
    )
    return BenchmarkDef(info, _opener(info, subset), _parser(subset))


BENCHMARKS = [_definition(subset, title) for subset, title in SUBSETS.items()]
