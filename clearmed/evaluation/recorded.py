"""Pathway answers recorded by an earlier run, read back so CLEAR can adjudicate them without running the pathway.

Three layouts are read:

- **MIRAGE's predictions** (github.com/Teddy-XiongGZ/MIRAGE ``prediction/``): one folder per setting and model,
  ``<subset>/cot/OpenAI/<model>/`` (CoT, no retrieval: the parametric pathway) and
  ``<subset>/rag_32/OpenAI/<model>/medcorp/RRF-4/`` (MedRAG over MedCorp: the local pathway), holding
  ``test_<id>.json`` (``dev_<id>.json`` for MedMCQA): a JSON list whose first string is the model's raw reply,
  normally ``{"step_by_step_thinking": ..., "answer_choice": ...}``.
- **The CLEAR code's run files** (github.com/Yale-BIDS-Chen-Lab/Cross-source_LLM_Evidence_Adjudication_and_Resolution,
  ``methods/clear/run_clear_replay.py`` reads them): a ``results.jsonl`` per run, one object per question with ``id``
  (the data row's ``realidx``, else its position), ``pred`` (one option letter, or null when the call failed or its
  reply named no option; ``trace.error`` then says which), ``gold``, ``raw_response`` and ``trace`` (``method`` direct,
  bm25 or online_search, ``model``, and for bm25 ``retrieved_docs``: ``id``, ``corpus``, ``title``, ``score``,
  ``content``). An online row carries the search's ``evidence`` (``sources``: ``title``, ``url``, ``claim``,
  ``relevance``, and ``quality_tier``/``quality_reason`` where the source was scored). A CLEAR run's own rows hold
  the three as ``candidates.direct`` / ``.bm25`` / ``.online``, read the same way. Given as the file or its folder.
  (The rows are as ``methods/direct/run_direct.py``, ``methods/BM25/run_bm25.py`` and ``methods/clear/run_clear.py``
  write them; ``summarize_retrieved_docs`` is in ``methods/common/retrieval.py``; an online row as the replay reads it.)
- **clearmed's own run folders** (``manifest.json`` and ``results.jsonl``): each record's candidate for the pathway,
  with its option scores where the run scored its answers (``Candidate.option_scores``), so a replay's scored
  features are the live run's.

The answer is located as MIRAGE's own evaluation does (``src/utils.py`` ``locate_answer``: the text after
``"answer_choice": "``, then its chain of patterns), with two differences, both so that no answer is made up:
where MIRAGE falls back to letter A, a reply whose answer cannot be located is recorded as unparseable; and an
answer that names an option's text without its letter takes that option's letter. The CLEAR code's ``pred`` is its own
parse of the reply and is taken as it stands: that is the answer its verifier saw.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import dspy
from pydantic import BaseModel, ConfigDict, Field

from clearmed.signatures.records import (
    Answer,
    Candidate,
    OptionScores,
    Passage,
    PathwayName,
    PathwayResult,
    Provenance,
    QualityAssessment,
    Question,
    SourceQuality,
    StepError,
)

ReplyStatus = Literal["ok", "unparseable", "missing"]
# How the answer was found: the letter alone in answer_choice, by one of MIRAGE's patterns, or by the option's text.
LocatedBy = Literal["letter", "pattern", "option_text"]
RecordedLayout = Literal["mirage", "clear_code", "clearmed", "absent"]

__all__ = [
    "RecordedPathway",
    "RecordedPathwayError",
    "RecordedReply",
    "absent_pathway",
    "locate_answer",
    "read_recorded_pathway",
]


class RecordedPathwayError(Exception):
    """A recorded pathway that cannot be read for these questions; the message is one line."""


class RecordedReply(BaseModel):
    """One question's recorded answer, with where it came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    status: ReplyStatus
    letters: tuple[str, ...] = ()
    located_by: LocatedBy | None = None
    rationale: str = ""
    raw_reply: str | None = None
    source: str = ""
    # Why there is no answer, in the recorded run's words (its error), or why a row was not taken as this question's.
    note: str = ""
    # The evidence the recorded pathway read (the CLEAR code's retrieved documents and web sources), labelled.
    passages: list[Passage] = Field(default_factory=list)
    quality: SourceQuality = Field(default_factory=SourceQuality)
    # The option probabilities a scored answer was read from (a clearmed run with `mcq_decoding = "score"`), kept so
    # that a replay feeds the calibrated and learned verifiers what the live run fed them; None where none were
    # recorded (MIRAGE and the CLEAR code record replies only).
    option_scores: OptionScores | None = None


class RecordedPathway(BaseModel):
    """A pathway's recorded answers for a set of questions, and its provenance (file layout, folder, model)."""

    model_config = ConfigDict(extra="forbid")

    pathway: PathwayName
    layout: RecordedLayout
    path: str
    model: str
    replies: dict[str, RecordedReply]

    @property
    def source(self) -> str:
        """What the run's manifest records of this pathway: its folder, or ``absent``."""
        return "absent" if self.layout == "absent" else str(Path(self.path).resolve())

    @property
    def label(self) -> str:
        """A short name for run folders: ``absent``, ``cot-gpt-4-32k`` / ``medrag-gpt-4-32k`` (MIRAGE), or the
        run folder's name."""
        if self.layout == "absent":
            return "absent"
        if self.layout == "mirage":
            setting = "cot" if "/cot/" in f"{Path(self.path).resolve().as_posix()}/" else "medrag"
            return f"{setting}-{self.model.rsplit('/', 1)[-1]}"
        if self.layout == "clear_code":
            return f"{_CLEAR_METHOD[self.pathway]}-{self.model}"
        return Path(self.path).resolve().name

    def module(self) -> dspy.Module:
        """The pathway module that hands back these answers in the program (`programs.pathways.recorded`)."""
        from clearmed.programs.pathways.recorded import AbsentPathway, RecordedAnswers

        if self.layout == "absent":
            return AbsentPathway(self.pathway)
        results = {qid: self.result_for(reply) for qid, reply in self.replies.items()}
        return RecordedAnswers(self.pathway, results, self.path)

    def result_for(self, reply: RecordedReply) -> PathwayResult:
        """The pathway's result as a live pathway returns it: the candidate, its evidence and their quality."""
        return PathwayResult(candidate=self.candidate_for(reply), passages=reply.passages, quality=reply.quality)

    def counts(self) -> dict[ReplyStatus, int]:
        counted: dict[ReplyStatus, int] = {"ok": 0, "unparseable": 0, "missing": 0}
        for reply in self.replies.values():
            counted[reply.status] += 1
        return counted

    def candidate(self, question: Question) -> Candidate:
        """The pathway's candidate as CLEAR's bundle holds it; an unparseable or missing reply is a failed
        pathway, recorded as such (the adjudication then goes on with the others, as for a live failure)."""
        return self.candidate_for(
            self.replies.get(question.id) or RecordedReply(question_id=question.id, status="missing")
        )

    def candidate_for(self, reply: RecordedReply) -> Candidate:
        error = None
        if reply.status != "ok":
            what = "no recorded reply" if reply.status == "missing" else "the recorded reply names no option"
            note = f": {reply.note}" if reply.note else ""
            error = StepError(stage=self.pathway, kind="parse_error", message=f"{what}{note} ({self.path})")
        return Candidate(
            pathway=self.pathway,
            answer=Answer.of_letters(*reply.letters) if reply.letters else None,
            rationale=reply.rationale,
            raw_answer=reply.raw_reply,
            passage_ids=[passage.id for passage in reply.passages],
            model=self.model,
            retriever="recorded" if self.pathway == "local" else None,
            recorded_from=reply.source or self.path,
            error=error,
            option_scores=reply.option_scores,
        )


def _choice_pattern(letters: Sequence[str]) -> str:
    return "(" + "|".join(re.escape(letter) for letter in letters) + ")"


def _mirage_patterns(letters: Sequence[str]) -> list[re.Pattern[str]]:
    """MIRAGE's ``locate_answer`` chain, in its order, over the question's own letters (A-D there)."""
    x = _choice_pattern(letters)
    return [
        re.compile(rf"^\s*{x}$"),
        re.compile(rf"^\s*{x} or"),
        re.compile(rf"^\s*{x} and"),
        re.compile(rf"^\s*{x}/"),
        re.compile(rf"^\s*{x},"),
        re.compile(rf"[Oo]ption {x}"),
        re.compile(rf":\s*{x}"),
        re.compile(rf"^\s*{x}\."),
        re.compile(rf'^\s*{x}"'),
        re.compile(rf"^\s*{x}:"),
    ]


def _normalised(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def locate_answer(choice: str, options: Mapping[str, str]) -> tuple[str | None, LocatedBy | None]:
    """The option letter a recorded answer names, and how it was found; (None, None) when it names none."""
    letters = sorted(options)
    stripped = choice.strip()
    if stripped in letters:
        return stripped, "letter"
    for pattern in _mirage_patterns(letters):
        found = pattern.search(choice)
        if found:
            return found.group(1), "pattern"
    wanted = _normalised(stripped.removesuffix('"}'))
    named = [letter for letter, text in options.items() if wanted and _normalised(text) == wanted]
    return (named[0], "option_text") if len(named) == 1 else (None, None)


def _unfenced(reply: str) -> str:
    text = reply.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def mirage_reply(question: Question, raw: object, source: str) -> RecordedReply:
    """One MIRAGE prediction file's content (already JSON-decoded) as a recorded reply."""
    reply = raw[0] if isinstance(raw, list) and raw and isinstance(raw[0], str) else None
    if reply is None:
        return RecordedReply(question_id=question.id, status="unparseable", source=source)
    rationale, choice = reply, reply.split('"answer_choice": "')[-1]
    try:
        decoded = json.loads(_unfenced(reply))
    except json.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict) and "answer_choice" in decoded:
        choice = str(decoded.get("answer_choice") or "")
        rationale = str(decoded.get("step_by_step_thinking") or "")
    letter, located_by = locate_answer(choice, question.options or {})
    return RecordedReply(
        question_id=question.id,
        status="ok" if letter else "unparseable",
        letters=(letter,) if letter else (),
        located_by=located_by,
        rationale=rationale.strip(),
        raw_reply=reply,
        source=source,
    )


def _mirage_file(folder: Path, question: Question) -> Path:
    from clearmed.benchmarks._mirage import PREDICTION_SPLIT, native_id

    try:
        subset, native = native_id(question.id)
    except ValueError as exc:
        raise RecordedPathwayError(
            f"{folder}: MIRAGE predictions are filed under MIRAGE's ids; {exc} (run a mirage-* benchmark)"
        ) from None
    return folder / f"{PREDICTION_SPLIT.get(subset, 'test')}_{native}.json"


def _mirage_model(folder: Path) -> str:
    # prediction/<subset>/cot/<org>/<model>/ or prediction/<subset>/rag_32/<org>/<model>/<corpus>/<retriever>/
    parts = folder.resolve().parts
    for setting in ("cot", "rag_32"):
        if setting in parts:
            index = parts.index(setting)
            return "/".join(parts[index + 1 : index + 3])
    return folder.name


def _read_mirage(folder: Path, pathway: PathwayName, questions: Sequence[Question]) -> RecordedPathway:
    replies: dict[str, RecordedReply] = {}
    for question in questions:
        path = _mirage_file(folder, question)
        if not path.is_file():
            replies[question.id] = RecordedReply(question_id=question.id, status="missing", source=str(path))
            continue
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raw = None
        replies[question.id] = mirage_reply(question, raw, str(path))
    return RecordedPathway(
        pathway=pathway, layout="mirage", path=str(folder), model=_mirage_model(folder), replies=replies
    )


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


# The CLEAR code's name for each pathway's run: its key in a CLEAR row's `candidates`, and the run's label here.
_CLEAR_METHOD: dict[PathwayName, str] = {"parametric": "direct", "local": "bm25", "dynamic": "online"}
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
    if isinstance(text, str) and text.strip() and _normalised(text) != _normalised(question.text):
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
    part = _mapping(candidates.get(_CLEAR_METHOD[pathway])) if isinstance(candidates, dict) else row
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


def _read_clear_code(path: Path, pathway: PathwayName, questions: Sequence[Question]) -> RecordedPathway:
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
        part = _mapping(candidates.get(_CLEAR_METHOD[pathway])) if isinstance(candidates, dict) else row
        model = model or str(_mapping(part.get("trace")).get("model") or _mapping(row.get("trace")).get("model") or "")
    if questions and all(reply.status == "missing" for reply in replies.values()):
        found = ", ".join(list(rows)[:3]) or "none"
        raise RecordedPathwayError(
            f"{results}: no recorded answer for any of the {len(questions)} questions (first: {questions[0].id}, "
            f"looked up as id {questions[0].id.rsplit(':', 1)[-1]}; the file's first ids: {found})"
        )
    return RecordedPathway(pathway=pathway, layout="clear_code", path=str(path), model=model, replies=replies)


def read_recorded_pathway(path: Path, pathway: PathwayName, questions: Iterable[Question]) -> RecordedPathway:
    """The recorded answers of ``pathway`` for ``questions`` from ``path``: a MIRAGE prediction folder, the CLEAR
    code's results file (or its run folder), or a clearmed run folder. A question with no recorded answer is kept as
    missing; a source in which none of the questions has one is refused (it belongs to another benchmark or setting).
    """
    chosen = list(questions)
    if path.is_file():
        recorded = _read_clear_code(path, pathway, chosen)
    elif not path.is_dir():
        raise RecordedPathwayError(
            f"{path}: no such folder (a MIRAGE prediction folder, a clearmed run folder, or the CLEAR code's "
            "results.jsonl)"
        )
    elif (path / "manifest.json").is_file():
        recorded = _read_clearmed(path, pathway, chosen)
    elif (path / "results.jsonl").is_file():
        recorded = _read_clear_code(path, pathway, chosen)
    elif any(path.glob("*_*.json")):
        recorded = _read_mirage(path, pathway, chosen)
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
