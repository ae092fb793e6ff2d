"""Source-quality assessment of dynamic evidence: all results labelled in one LM call (CLEAR A.2).

Domain and content-type priors (from `retrieval.quality`, when configured) are shown to the LM as
features and stand in for labels the LM failed to give. With neither, a result counts as low quality:
the conservative choice, since quality counts gate overrides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import dspy

from clearmed.programs.formatting import format_search_results
from clearmed.programs.run_context import current
from clearmed.programs.stage import run_stage
from clearmed.signatures.clear import AssessSourceQuality
from clearmed.signatures.records import Passage, QualityAssessment, SourceQuality, StepError


class QualityPriors(Protocol):
    """What the assessment needs from a prior: a feature line per result, and labels when the LM fails."""

    def features(self, passage: Passage) -> str: ...

    def assess(self, passage: Passage) -> QualityAssessment: ...


def label_passages(passages: Sequence[Passage], quality: SourceQuality) -> list[Passage]:
    """Copy each passage with its quality label attached (for rendering to later stages)."""
    by_id = {item.passage_id: item for item in quality.assessments}
    out = []
    for passage in passages:
        item = by_id.get(passage.id)
        update = {"quality": item.label, "quality_reason": item.reason} if item else {}
        out.append(passage.model_copy(update=update))
    return out


class SourceQualityAssessor(dspy.Module):
    def __init__(self, priors: QualityPriors | None = None) -> None:
        super().__init__()
        self.assess = dspy.Predict(AssessSourceQuality)
        self.priors = priors

    def _fallback(self, passage: Passage) -> QualityAssessment:
        if self.priors is not None:
            return self.priors.assess(passage)
        return QualityAssessment(passage_id=passage.id, label="low", reason="unassessed: counted as low")

    def forward(self, question_text: str, passages: list[Passage], stage: str = "source_quality") -> dspy.Prediction:
        if not passages:
            return dspy.Prediction(quality=SourceQuality(), error=None)
        features = {p.id: self.priors.features(p) for p in passages} if self.priors is not None else {}
        settings = current().settings
        words = settings.quality_snippet_words or settings.passage_words
        result = run_stage(
            stage,  # type: ignore[arg-type]
            self.assess,
            question=question_text,
            results=format_search_results(passages, words, features),
        )
        labels: dict[str, str] = dict(result.prediction.quality_labels) if result.prediction is not None else {}
        assessments: list[QualityAssessment] = []
        missing: list[str] = []
        for passage in passages:
            label = labels.get(passage.id)
            if label in ("high", "medium", "low"):
                assessments.append(QualityAssessment(passage_id=passage.id, label=label, reason="llm"))  # type: ignore[arg-type]
            else:
                missing.append(passage.id)
                assessments.append(self._fallback(passage))
        if not missing:
            origin = "llm"
        elif self.priors is not None:
            origin = "prior"
        else:
            origin = "none"
        error = result.error
        if error is None and missing:
            error = StepError(stage=stage, kind="parse_error", message=f"no quality label for {', '.join(missing)}")
        return dspy.Prediction(quality=SourceQuality(assessments=assessments, origin=origin), error=error)
