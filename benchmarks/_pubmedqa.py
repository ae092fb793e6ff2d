"""PubMedQA PQA-L (yes / no / maybe), as options A=yes, B=no, C=maybe.

Two benchmarks share this parser:
* `pubmedqa`: the abstract (labelled sections) goes into `Question.context` — the reasoning-required setting.
* `pubmedqa-noctx`: question only, no abstract — MIRAGE's PubMedQA* setting.
They use different id prefixes because the same PMID is a different task with and without the abstract.

Rows come in two layouts, both accepted from any source: the hub's (`pubid, question, context{contexts,
labels}, final_decision`) and the original `ori_pqal.json` (`{pmid: {QUESTION, CONTEXTS, LABELS, ...}}`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from clearmed.benchmarks import _fields as f
from clearmed.benchmarks._base import BenchmarkDef, ParseRow, RowContext, standard_opener
from clearmed.benchmarks._errors import RowError
from clearmed.benchmarks._io import HubSpec, RawRow, load_json, read_table
from clearmed.benchmarks._types import BenchmarkInfo
from clearmed.signatures.records import Question

HUB_ID = "qiaojin/PubMedQA"
OPTIONS = {"A": "yes", "B": "no", "C": "maybe"}
_LETTER_OF = {text: letter for letter, text in OPTIONS.items()}


def _info(name: str, with_context: bool) -> BenchmarkInfo:
    setting = "with the abstract as context" if with_context else "question only (PubMedQA*, no abstract)"
    return BenchmarkInfo(
        name=name,
        title=f"PubMedQA pqa_labeled, {setting}",
        hub_id=HUB_ID,
        hub_config="pqa_labeled",
        default_split="train",
        splits=["train"],
        answer_mode="single",
        scoring="accuracy over A=yes, B=no, C=maybe (final_decision)",
        shared_file="pubmedqa/pqal_dev.json",
        notes="the hub has only a train split (1,000 rows); the official 500-question test set is a PMID list "
        "(pubmedqa/pubmedqa data/test_ground_truth.json), not a split",
    )


def _hub(_split: str) -> list[HubSpec]:
    return [HubSpec(path=HUB_ID, name="pqa_labeled", split="train")]


def _read_local(path: Path, _split: str | None) -> Iterator[RawRow]:
    if path.suffix.lower() == ".json":
        document = load_json(path)
        if isinstance(document, dict):  # ori_pqal.json: {pmid: record}
            for index, (pmid, record) in enumerate(document.items()):
                location = f"{path} [{pmid}]"
                if isinstance(record, dict):
                    yield RawRow(location, index, {"pubid": pmid, **record})
                else:
                    yield RawRow(location, index, None, error="record is not an object")
            return
    yield from read_table(path)


def _context(sections: list[str], labels: list[str]) -> str:
    if labels and len(labels) == len(sections):
        return "\n\n".join(f"{label}: {section.strip()}" for label, section in zip(labels, sections, strict=True))
    return "\n\n".join(section.strip() for section in sections)


def _fields_of(data: Mapping[str, object]) -> tuple[str, str, list[str], list[str], object]:
    """(question, decision, contexts, labels, year) from either layout."""
    if "QUESTION" in data:
        return (
            f.text(data, "QUESTION"),
            f.text(data, "final_decision"),
            f.string_list(data, "CONTEXTS"),
            f.string_list(data, "LABELS") if "LABELS" in data else [],
            data.get("YEAR"),
        )
    context = f.field(data, "context")
    if not isinstance(context, dict):
        raise RowError("field 'context' should be an object with 'contexts' and 'labels'")
    return (
        f.text(data, "question"),
        f.text(data, "final_decision"),
        f.string_list(context, "contexts"),
        f.string_list(context, "labels") if context.get("labels") is not None else [],
        None,
    )


def _parser(with_context: bool) -> ParseRow:
    def parse_row(row: RawRow, ctx: RowContext) -> Question:
        assert row.data is not None
        question, decision, contexts, labels, year = _fields_of(row.data)
        letter = _LETTER_OF.get(decision.casefold())
        if letter is None:
            raise RowError(f"final_decision {decision!r} is not yes, no or maybe")
        pmid = str(f.field(row.data, "pubid"))
        if with_context and not contexts:
            raise RowError("no abstract sections in the context")
        return Question(
            id=f"{ctx.benchmark}:{pmid}",
            text=question,
            answer_mode=ctx.answer_mode,
            options=dict(OPTIONS),
            context=_context(contexts, labels) if with_context else None,
            gold_letters=[letter],
            metadata={"pubid": pmid, "year": f.metadata_value(year), "split": ctx.split},
        )

    return parse_row


BENCHMARKS = []
for _name, _with in (("pubmedqa", True), ("pubmedqa-noctx", False)):
    _i = _info(_name, _with)
    BENCHMARKS.append(BenchmarkDef(_i, standard_opener(_i, _hub, _read_local), _parser(_with)))
