"""The records a loader hands back: the loaded set, what was left out and why, and the registry entry."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, computed_field

from clearmed.signatures.records import AnswerMode, Question


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RowIssue(_Model):
    """One source row that did not become a `Question`: where it is and why."""

    location: str
    reason: str


class BenchmarkSet(_Model):
    """The questions of one benchmark, plus an honest account of every row that is not among them.

    `skipped` lists rows that could not be turned into a valid question (malformed, gold not among the
    options, duplicate option texts upstream). `excluded` counts rows that are outside the benchmark by its
    own definition (another category, a non-MCQ row, a filtered choice type), by reason. `n_source_rows` is
    every row read, before sampling; `len(questions)` is after `limit`.
    """

    name: str
    source: str
    split: str | None = None
    questions: list[Question]
    skipped: list[RowIssue] = Field(default_factory=list)
    excluded: dict[str, int] = Field(default_factory=dict)
    n_source_rows: int = 0
    seed: int | None = None
    limit: int | None = None
    # The hub revision the rows were read at: the commit the hub resolved where the datasets cache says, else the
    # revision asked for (None: a local file, or the default branch at a commit it does not say).
    revision: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_skipped(self) -> int:
        return len(self.skipped)

    def __len__(self) -> int:
        return len(self.questions)


class BenchmarkInfo(_Model):
    """What `available_benchmarks()` says about one registered benchmark.

    `shared_file` is relative to the shared data's `benchmarks/` folder (`../shared/data/benchmarks`), for
    development copies of the same upstream schema; `None` when there is none. `hub_id` is None when the
    benchmark has no hub copy (MedRBench: pass `source=`).

    `answer_mode` is the benchmark's question format, and every question it loads is asked in it. It is never
    chosen per row from the gold: the mode picks the pathways' instruction ("choose exactly one" / "choose
    every correct option") and their decoding, so a per-row mode would tell the model how many answers are
    right. A benchmark whose questions may have several answers is `multi` for every question.
    """

    name: str
    title: str
    hub_id: str | None
    hub_config: str | None = None
    default_split: str | None = None
    splits: list[str] = Field(default_factory=list)
    answer_mode: AnswerMode
    scoring: str
    shared_file: str | None = None
    notes: str = ""
