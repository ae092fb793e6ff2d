"""A pathway's answers as an earlier run (another system's, or clearmed's own) recorded them: one question's reply
(`RecordedReply`: its letters, how they were found, its evidence) and a pathway's replies for a set of questions
(`RecordedPathway`), which hands them to the program as the pathway's results (`programs.pathways.recorded`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import dspy
from pydantic import BaseModel, ConfigDict, Field

from clearmed.signatures.records import (
    Answer,
    Candidate,
    OptionScores,
    Passage,
    PathwayName,
    PathwayResult,
    Question,
    SourceQuality,
    StepError,
)

ReplyStatus = Literal["ok", "unparseable", "missing"]
# How the answer was found: the letter alone in answer_choice, by one of MIRAGE's patterns, or by the option's text.
LocatedBy = Literal["letter", "pattern", "option_text"]
RecordedLayout = Literal["mirage", "clear_code", "clearmed", "absent"]
# The CLEAR code's name for each pathway's run: its key in a CLEAR row's `candidates`, and the run's label here.
CLEAR_METHOD: dict[PathwayName, str] = {"parametric": "direct", "local": "bm25", "dynamic": "online"}

__all__ = [
    "CLEAR_METHOD",
    "LocatedBy",
    "RecordedLayout",
    "RecordedPathway",
    "RecordedPathwayError",
    "RecordedReply",
    "ReplyStatus",
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
            return f"{CLEAR_METHOD[self.pathway]}-{self.model}"
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
