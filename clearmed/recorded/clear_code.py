"""The CLEAR code's run files as recorded pathways (github.com/Yale-BIDS-Chen-Lab/Cross-source_LLM_Evidence_
Adjudication_and_Resolution, ``methods/clear/run_clear_replay.py`` reads them): a ``results.jsonl`` per run, one object
per question with ``id`` (the data row's ``realidx``, else its position), ``pred`` (one option letter, or null when the
call failed or its reply named no option; ``trace.error`` then says which), ``gold``, ``raw_response`` and ``trace``
(``method`` direct, bm25 or online_search, ``model``, and for bm25 ``retrieved_docs``: ``id``, ``corpus``, ``title``,
``score``, ``content``). An online row carries the search's ``evidence`` (``sources``: ``title``, ``url``, ``claim``,
``relevance``, and ``quality_tier``/``quality_reason`` where the source was scored). A CLEAR run's own rows hold the
three as ``candidates.direct`` / ``.bm25`` / ``.online``, read the same way. Given as the file or its folder. (The rows
are as ``methods/direct/run_direct.py``, ``methods/BM25/run_bm25.py`` and ``methods/clear/run_clear.py`` write them;
``summarize_retrieved_docs`` is in ``methods/common/retrieval.py``; an online row as the replay reads it.)

The CLEAR code's ``pred`` is its own parse of the reply and is taken as it stands: that is the answer its verifier saw.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clearmed.recorded.mirage import normalised
from clearmed.recorded.pathway import CLEAR_METHOD, RecordedPathway, RecordedPathwayError, RecordedReply, ReplyStatus
from clearmed.signatures.records import (
    Passage,
    PathwayName,
    Provenance,
    QualityAssessment,
    Question,
    SourceQuality,
)

__all__ = ["clear_code_reply", "clear_code_rows", "read_clear_code"]

_SPACE = re.compile(r"\s*")


def clear_code_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The rows of a CLEAR code results file by id, read as its replay reads them (`load_result_objects`): one JSON
    object after another, not line by line, so a file written before it escaped U+2028 (a line separator inside a
    reply) still reads. A later row of an id replaces an earlier one; a damaged row is passed over to the next line
    (its question has no recorded answer)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RecordedPathwayError(f"{path}: not UTF-8 (byte {exc.start}); not a CLEAR code results file") from None
    decoder = json.JSONDecoder()
    rows: dict[str, dict[str, Any]] = {}
    index = _SPACE.match(text).end()  # type: ignore[union-attr]
    while index < len(text):
        try:
            row, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
        else:
            if isinstance(row, dict) and str(row.get("id", "")).strip():
                rows[str(row["id"]).strip()] = row
        index = _SPACE.match(text, index).end()  # type: ignore[union-attr]
    return rows


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _row_mismatch(question: Question, row: Mapping[str, object]) -> str:
    """Why a row filed under this question's id is another question's: its recorded gold (or, where the row records
    it, its question text) is not this question's. "" when nothing recorded contradicts it."""
    gold = row.get("gold")
    if isinstance(gold, str) and gold.strip() and question.gold_letters:
        recorded = sorted({part.strip().upper() for part in gold.split(",") if part.strip()})
        if recorded != sorted(question.gold_letters):
            return f"its gold is {gold.strip()}, the question's {','.join(question.gold_letters)}"
    text = row.get("question")
    if isinstance(text, str) and text.strip() and normalised(text) != normalised(question.text):
        return f"its question begins {text.strip()[:40]!r}, not {question.text.strip()[:40]!r}"
    return ""


def _local_passages(trace: Mapping[str, object]) -> list[Passage]:
    """The bm25 run's `trace.retrieved_docs` as local passages, with their corpus, chunk id, rank and score."""
    from clearmed.programs.pathways.evidence_search import reid
    from clearmed.retrieval.medrag_layout import snippet_passage

    passages = []
    docs = trace.get("retrieved_docs")
    for rank, doc in enumerate(docs if isinstance(docs, list) else [], start=1):
        if not isinstance(doc, dict) or not str(doc.get("content") or doc.get("contents") or "").strip():
            continue
        passage = snippet_passage(doc, str(doc.get("corpus") or "recorded"), fallback_id=f"doc{rank}")
        score = doc.get("score")
        if isinstance(score, int | float):
            passage = passage.model_copy(update={"provenance": passage.provenance.model_copy(update={"score": score})})
        passages.append(passage)
    return reid(passages, "L")


def _upstream_quality(source: Mapping[str, object], passage_id: str) -> QualityAssessment | None:
    """The CLEAR code's own label of a web source (`source_quality.score_source`), where it was recorded."""
    tier = str(source.get("quality_tier") or "").strip().lower()
    if tier not in ("high", "medium", "low"):
        return None
    why = str(source.get("quality_reason") or "").strip()
    score = source.get("quality_score")
    reason = f"the CLEAR code's source quality{f' {score}' if score is not None else ''}{f': {why}' if why else ''}"
    return QualityAssessment(passage_id=passage_id, label=tier, reason=reason)  # type: ignore[arg-type]


def _web_passages(
    evidence: Mapping[str, object], scored: Mapping[str, Mapping[str, object]], backend: str | None
) -> tuple[list[Passage], SourceQuality]:
    """The online run's evidence as web passages: its `evidence_summary` and `key_facts` first (the code's verifier
    reads them before the sources: `prompts.format_evidence`), then its `sources` (the claim as text, the URL as
    provenance). Each source is labelled by the CLEAR code's quality where it was recorded (on the source, or by URL
    in its verifier's report: `scored`), else by the CLEAR code's own domain table (`retrieval.clear_code_quality`),
    as its verifier scores sources that carry no tier. The summary and the facts are the online model's own
    synthesis, no source: they carry no quality label and count towards no gate."""
    from clearmed.programs.assessors.source_quality import label_passages
    from clearmed.retrieval.clear_code_quality import clear_code_assessment
    from clearmed.retrieval.corpus import domain_of

    synthesis = _synthesis_passages(evidence, backend)
    passages: list[Passage] = []
    assessments: list[QualityAssessment] = []
    sources = evidence.get("sources")
    for item in sources if isinstance(sources, list) else []:
        source = _mapping(item)
        text = str(source.get("claim") or source.get("relevance") or "").strip()
        if not text:
            continue
        url = str(source.get("url") or "").strip() or None
        passage = Passage(
            id=f"W{len(passages) + 1}",
            title=str(source.get("title") or ""),
            text=text,
            pathway="dynamic",
            provenance=Provenance(
                kind="web", url=url, domain=domain_of(url) if url else None, backend=backend, rank=len(passages) + 1
            ),
        )
        passages.append(passage)
        labelled = _upstream_quality(source, passage.id) or _upstream_quality(scored.get(url or "", {}), passage.id)
        assessments.append(labelled or clear_code_assessment(passage))
    quality = SourceQuality(assessments=assessments, origin="prior")
    return synthesis + label_passages(passages, quality), quality


def _synthesis_passages(evidence: Mapping[str, object], backend: str | None) -> list[Passage]:
    """The online run's `evidence_summary` (id WS) and `key_facts` (WK, one fact a line), where it wrote them."""
    summary = str(evidence.get("evidence_summary") or "").strip()
    facts = evidence.get("key_facts")
    listed = [str(fact).strip() for fact in facts if str(fact).strip()] if isinstance(facts, list) else []
    made = []
    for pid, title, text in (
        ("WS", "Evidence summary (the online run's own synthesis, not a source)", summary),
        ("WK", "Key facts (the online run's own synthesis, not a source)", "\n".join(f"- {fact}" for fact in listed)),
    ):
        if text:
            provenance = Provenance(kind="web", backend=backend)
            made.append(Passage(id=pid, title=title, text=text, pathway="dynamic", provenance=provenance))
    return made


def _evidence_of(pathway: PathwayName, row: Mapping[str, object], trace: Mapping[str, object]) -> dict[str, object]:
    """The evidence a pathway's row carries, as `RecordedReply` fields: retrieved documents (local), web sources and
    their quality (dynamic), nothing (parametric)."""
    if pathway == "local":
        return {"passages": _local_passages(trace)}
    if pathway == "dynamic":
        report = _mapping(_mapping(row.get("verifier")).get("source_quality")).get("sources")
        scored = {str(s.get("url")): s for s in report if isinstance(s, dict)} if isinstance(report, list) else {}
        backend = str(trace.get("search_provider") or "") or None
        passages, quality = _web_passages(_mapping(row.get("evidence")), scored, backend)
        return {"passages": passages, "quality": quality}
    return {}


def clear_code_reply(question: Question, row: Mapping[str, object], pathway: PathwayName, source: str) -> RecordedReply:
    """One row of the CLEAR code's results (a direct, bm25 or online run's, or a CLEAR run's candidate) as a
    recorded reply: its `pred` as the answer, its `raw_response` as the rationale, its evidence."""
    candidates = row.get("candidates")
    part = _mapping(candidates.get(CLEAR_METHOD[pathway])) if isinstance(candidates, dict) else row
    trace = _mapping(part.get("trace"))
    raw = part.get("raw_response")
    raw_reply = raw if isinstance(raw, str) and raw.strip() else None
    pred = part.get("pred")
    letter = pred.strip().upper() if isinstance(pred, str) else ""
    fields: dict[str, Any] = {"rationale": (raw_reply or "").strip(), "raw_reply": raw_reply, "source": source}
    fields |= _evidence_of(pathway, row, trace)
    if letter in (question.options or {}):
        return RecordedReply(question_id=question.id, status="ok", letters=(letter,), located_by="letter", **fields)
    error = str(trace.get("error") or "").strip()
    note = f"pred {pred!r} is not an option of this question" if pred is not None else error
    # A reply that names no option is unparseable; no reply at all (the call failed: `trace.error`) is missing.
    status: ReplyStatus = "unparseable" if raw_reply or pred is not None else "missing"
    return RecordedReply(question_id=question.id, status=status, note=note, **fields)


def _clear_code_row(rows: Mapping[str, dict[str, Any]], question: Question) -> dict[str, Any] | None:
    """The row filed under the question's id: the same id, else its last part (`medqa:test:17` -> ``17``, the data
    row's `realidx` the CLEAR code files it under)."""
    return rows.get(question.id) or rows.get(question.id.rsplit(":", 1)[-1])


def _refuse_shared_native_ids(path: Path, rows: Mapping[str, object], questions: Sequence[Question]) -> None:
    """The CLEAR code's ids are one data file's: two questions whose ids end alike cannot be told apart in it."""
    first: dict[str, str] = {}
    for question in questions:
        if question.id in rows:
            continue
        native = question.id.rsplit(":", 1)[-1]
        if native in first:
            raise RecordedPathwayError(
                f"{path}: {first[native]} and {question.id} would both be row {native} (the CLEAR code numbers the "
                "rows of one data file): evaluate one split or subject at a time (--split)"
            )
        first[native] = question.id


def read_clear_code(path: Path, pathway: PathwayName, questions: Sequence[Question]) -> RecordedPathway:
    results = path / "results.jsonl" if path.is_dir() else path
    rows = clear_code_rows(results)
    _refuse_shared_native_ids(path, rows, questions)
    replies: dict[str, RecordedReply] = {}
    model = ""
    for question in questions:
        row = _clear_code_row(rows, question)
        if row is None:
            replies[question.id] = RecordedReply(question_id=question.id, status="missing", source=str(results))
            continue
        # Never filtered row by row: a row that is another question's means the file is not this benchmark's rows
        # in this order (misaligned by one row, another split), and dropping only the rows that disagree keeps
        # exactly those whose answers happen to be right.
        mismatch = _row_mismatch(question, row)
        if mismatch:
            raise RecordedPathwayError(
                f"{results}: row {row['id']} is not question {question.id} ({mismatch}): the file does not hold "
                "these questions' rows under their ids, so none of it is read"
            )
        replies[question.id] = clear_code_reply(question, row, pathway, f"{results} id={row['id']}")
        candidates = row.get("candidates")
        part = _mapping(candidates.get(CLEAR_METHOD[pathway])) if isinstance(candidates, dict) else row
        model = model or str(_mapping(part.get("trace")).get("model") or _mapping(row.get("trace")).get("model") or "")
    if questions and all(reply.status == "missing" for reply in replies.values()):
        found = ", ".join(list(rows)[:3]) or "none"
        raise RecordedPathwayError(
            f"{results}: no recorded answer for any of the {len(questions)} questions (first: {questions[0].id}, "
            f"looked up as id {questions[0].id.rsplit(':', 1)[-1]}; the file's first ids: {found})"
        )
    return RecordedPathway(pathway=pathway, layout="clear_code", path=str(path), model=model, replies=replies)
