"""Evidence: passages with their provenance, and the categorical quality labels of the web results."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import Field, computed_field, field_serializer, field_validator, model_validator

from clearmed.core.sanitize import clean_text
from clearmed.signatures.records.base import QualityLabel, QualityOrigin, Record


class Provenance(Record):
    """Where a passage came from: a corpus document, or a web page found by a search backend."""

    kind: Literal["corpus", "web"]
    corpus: str | None = None
    doc_id: str | None = None
    url: str | None = None
    domain: str | None = None
    published: date | None = None
    backend: str | None = None
    query: str | None = None
    rank: int | None = None
    score: float | None = None

    # An ISO string in every dump, not only JSON: DSPy's `Evaluate(save_as_json=...)` json-dumps a prediction's
    # python dump, where a `date` would stop the save.
    @field_serializer("published")
    def _iso_date(self, value: date | None) -> str | None:
        return value.isoformat() if value is not None else None


class Passage(Record):
    """One piece of evidence. `id` is unique within a question's bundle (it is what verdicts cite)."""

    id: str = Field(min_length=1)
    title: str = ""
    text: str
    pathway: Literal["local", "dynamic"]
    provenance: Provenance
    quality: QualityLabel | None = None
    quality_reason: str | None = None

    @field_validator("title", "text")
    @classmethod
    def _clean(cls, value: str) -> str:
        return clean_text(value)


class QualityAssessment(Record):
    passage_id: str
    label: QualityLabel
    reason: str = ""


class SourceQuality(Record):
    """Categorical quality labels for dynamic evidence (CLEAR A.2: counts, not continuous scores).

    `origin` says who labelled: the LLM assessment, the domain/content priors standing in for a failed
    assessment, or nobody (everything counted as low, the conservative choice).
    """

    assessments: list[QualityAssessment] = Field(default_factory=list)
    origin: QualityOrigin = "llm"

    def _count(self, label: QualityLabel) -> int:
        return sum(1 for item in self.assessments if item.label == label)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_high(self) -> int:
        return self._count("high")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_medium(self) -> int:
        return self._count("medium")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_low(self) -> int:
        return self._count("low")

    def label_of(self, passage_id: str) -> QualityLabel | None:
        for item in self.assessments:
            if item.passage_id == passage_id:
                return item.label
        return None

    @classmethod
    def merge(cls, *parts: SourceQuality) -> SourceQuality:
        seen: dict[str, QualityAssessment] = {}
        for part in parts:
            for item in part.assessments:
                seen.setdefault(item.passage_id, item)
        origins = {part.origin for part in parts if part.assessments}
        origin: QualityOrigin = "llm"
        if "none" in origins:
            origin = "none"
        elif "prior" in origins:
            origin = "prior"
        return cls(assessments=list(seen.values()), origin=origin)

    # The counts are serialised for readers of the JSON; on reload they come back as keys to drop.
    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: object) -> object:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if key not in {"n_high", "n_medium", "n_low"}}
        return data
