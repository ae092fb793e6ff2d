"""A recorded pathway read from where it was given (`read_recorded_pathway`: the layout told from the path: MIRAGE's
predictions, the CLEAR code's results, or a clearmed run folder), or one left out (`absent_pathway`).

clearmed's own run folders (``manifest.json`` and ``results.jsonl``) give each record's candidate for the pathway,
with its option scores where the run scored its answers (``Candidate.option_scores``), so a replay's scored features
are the live run's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from clearmed.recorded.clear_code import read_clear_code
from clearmed.recorded.mirage import read_mirage
from clearmed.recorded.pathway import RecordedPathway, RecordedPathwayError, RecordedReply
from clearmed.signatures.records import PathwayName, Question, SourceQuality

__all__ = ["absent_pathway", "read_recorded_pathway"]


def read_recorded_pathway(path: Path, pathway: PathwayName, questions: Iterable[Question]) -> RecordedPathway:
    """The recorded answers of ``pathway`` for ``questions`` from ``path``: a MIRAGE prediction folder, the CLEAR
    code's results file (or its run folder), or a clearmed run folder. A question with no recorded answer is kept as
    missing; a source in which none of the questions has one is refused (it belongs to another benchmark or setting).
    """
    chosen = list(questions)
    if path.is_file():
        recorded = read_clear_code(path, pathway, chosen)
    elif not path.is_dir():
        raise RecordedPathwayError(
            f"{path}: no such folder (a MIRAGE prediction folder, a clearmed run folder, or the CLEAR code's "
            "results.jsonl)"
        )
    elif (path / "manifest.json").is_file():
        recorded = _read_clearmed(path, pathway, chosen)
    elif (path / "results.jsonl").is_file():
        recorded = read_clear_code(path, pathway, chosen)
    elif any(path.glob("*_*.json")):
        recorded = read_mirage(path, pathway, chosen)
    else:
        raise RecordedPathwayError(
            f"{path}: neither MIRAGE predictions (test_<id>.json), a run's results.jsonl, nor a clearmed run"
        )
    if chosen and recorded.counts()["missing"] == len(chosen):
        first = chosen[0].id
        raise RecordedPathwayError(
            f"{path}: no recorded answer for any of the {len(chosen)} questions (first: {first})"
        )
    return recorded


def absent_pathway(pathway: PathwayName, questions: Iterable[Question]) -> RecordedPathway:
    """A pathway left out by choice (``--pathway dynamic=absent``)."""
    del questions  # every question alike
    return RecordedPathway(pathway=pathway, layout="absent", path="", model="", replies={})


def _read_clearmed(run_dir: Path, pathway: PathwayName, questions: Sequence[Question]) -> RecordedPathway:
    from clearmed.evaluation.store import read_records

    wanted = {question.id for question in questions}
    replies: dict[str, RecordedReply] = {}
    model = ""
    for record in read_records(run_dir):
        if record.question_id not in wanted:
            continue
        candidate = next((c for c in record.decision.bundle.candidates if c.pathway == pathway), None)
        if candidate is None:
            continue
        model = model or candidate.model
        letters = candidate.answer.letters if candidate.answer is not None else ()
        # A pathway that failed after its retries (a degraded question) has no answer to record: it is missing.
        failed = candidate.error is not None and candidate.error.transient
        bundle = record.decision.bundle
        # The evidence the pathway read, and the dynamic results' labels as the run assessed them (not its
        # follow-up rounds, which were the adjudication's): without them a replayed guard would count no high source.
        passages = {"local": bundle.local_passages, "dynamic": bundle.dynamic_passages}.get(pathway, [])
        replies[record.question_id] = RecordedReply(
            question_id=record.question_id,
            status="ok" if letters else ("missing" if failed else "unparseable"),
            letters=letters,
            located_by="letter" if letters else None,
            rationale=candidate.rationale,
            raw_reply=candidate.raw_answer,
            source=str(run_dir / "results.jsonl"),
            passages=list(passages),
            quality=bundle.source_quality if pathway == "dynamic" else SourceQuality(),
            option_scores=candidate.option_scores,
        )
    for question in questions:
        replies.setdefault(question.id, RecordedReply(question_id=question.id, status="missing", source=str(run_dir)))
    return RecordedPathway(pathway=pathway, layout="clearmed", path=str(run_dir), model=model, replies=replies)
