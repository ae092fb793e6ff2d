"""What every record shares: the base class and the small vocabularies (pathways, labels, ranks, tiers)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

AnswerMode = Literal["single", "multi", "free_text"]
PathwayName = Literal["parametric", "local", "dynamic"]
PATHWAYS: tuple[PathwayName, ...] = ("parametric", "local", "dynamic")
QualityLabel = Literal["high", "medium", "low"]
# Who labelled the dynamic evidence: the LLM, the domain/content priors standing in, or nobody (all low).
QualityOrigin = Literal["llm", "prior", "none"]
# A free-text grader's verdict (signatures/grading.py asks for it; metrics/ scores it).
GradeVerdict = Literal["correct", "partially_correct", "incorrect"]
Confidence = Literal["high", "medium", "low"]
# Quality labels are ordered: passage filters and label ceilings compare them by rank.
QUALITY_RANK: dict[QualityLabel, int] = {"low": 0, "medium": 1, "high": 2}
# The authority tiers of web domains (retrieval.quality assigns them; thresholds and priors weight them).
DomainTier = Literal["government", "literature", "academic", "media", "low", "unknown"]
# What a reader does with a malformed row of a benchmark or corpus file: stop, or skip it and count it.
OnError = Literal["raise", "skip"]
MetadataValue = str | int | float | bool | None | list[str]


class Record(BaseModel):
    """Base for records: immutable by convention, unknown fields rejected so typos surface."""

    model_config = ConfigDict(extra="forbid")
