"""Pathway answers recorded by an earlier run, read back so CLEAR can adjudicate them without running the pathway.

Two layouts are read:

- **MIRAGE's predictions** (github.com/Teddy-XiongGZ/MIRAGE ``prediction/``): one folder per setting and model,
  ``<subset>/cot/OpenAI/<model>/`` (CoT, no retrieval: the parametric pathway) and
  ``<subset>/rag_32/OpenAI/<model>/medcorp/RRF-4/`` (MedRAG over MedCorp: the local pathway), holding
  ``test_<id>.json`` (``dev_<id>.json`` for MedMCQA): a JSON list whose first string is the model's raw reply,
  normally ``{"step_by_step_thinking": ..., "answer_choice": ...}``.
- **clearmed's own run folders** (``results.jsonl``): each record's candidate for the pathway.

The answer is located as MIRAGE's own evaluation does (``src/utils.py`` ``locate_answer``: the text after
``"answer_choice": "``, then its chain of patterns), with two differences, both so that no answer is made up:
where MIRAGE falls back to letter A, a reply whose answer cannot be located is recorded as unparseable; and an
answer that names an option's text without its letter takes that option's letter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import dspy
from pydantic import BaseModel, ConfigDict

from clearmed.signatures.records import Answer, Candidate, PathwayName, Question, StepError

ReplyStatus = Literal["ok", "unparseable", "missing"]
# How the answer was found: the letter alone in answer_choice, by one of MIRAGE's patterns, or by the option's text.
LocatedBy = Literal["letter", "pattern", "option_text"]
RecordedLayout = Literal["mirage", "clearmed", "absent"]

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
        return Path(self.path).resolve().name

    def module(self) -> dspy.Module:
        """The pathway module that hands back these answers in the program (`programs.pathways.recorded`)."""
        from clearmed.programs.pathways.recorded import AbsentPathway, RecordedAnswers

        if self.layout == "absent":
            return AbsentPathway(self.pathway)
        answers = {qid: self.candidate_for(reply) for qid, reply in self.replies.items()}
        return RecordedAnswers(self.pathway, answers, self.path)

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
            error = StepError(stage=self.pathway, kind="parse_error", message=f"{what} ({self.path})")
        return Candidate(
            pathway=self.pathway,
            answer=Answer.of_letters(*reply.letters) if reply.letters else None,
            rationale=reply.rationale,
            raw_answer=reply.raw_reply,
            model=self.model,
            retriever="recorded" if self.pathway == "local" else None,
            recorded_from=reply.source or self.path,
            error=error,
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
        replies[record.question_id] = RecordedReply(
            question_id=record.question_id,
            status="ok" if letters else ("missing" if failed else "unparseable"),
            letters=letters,
            located_by="letter" if letters else None,
            rationale=candidate.rationale,
            raw_reply=candidate.raw_answer,
            source=str(run_dir / "results.jsonl"),
        )
    for question in questions:
        replies.setdefault(question.id, RecordedReply(question_id=question.id, status="missing", source=str(run_dir)))
    return RecordedPathway(pathway=pathway, layout="clearmed", path=str(run_dir), model=model, replies=replies)


def read_recorded_pathway(path: Path, pathway: PathwayName, questions: Iterable[Question]) -> RecordedPathway:
    """The recorded answers of ``pathway`` for ``questions`` from ``path``: a MIRAGE prediction folder or a
    clearmed run folder. A question with no recorded answer is kept as missing; a folder in which none of the
    questions has one is refused (it belongs to another benchmark or setting)."""
    chosen = list(questions)
    if not path.is_dir():
        raise RecordedPathwayError(f"{path}: no such folder (a MIRAGE prediction folder or a clearmed run folder)")
    if (path / "results.jsonl").is_file():
        recorded = _read_clearmed(path, pathway, chosen)
    elif any(path.glob("*_*.json")):
        recorded = _read_mirage(path, pathway, chosen)
    else:
        raise RecordedPathwayError(f"{path}: neither MIRAGE predictions (test_<id>.json) nor a run's results.jsonl")
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
