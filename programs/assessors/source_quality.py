"""Source-quality assessment of dynamic evidence: all results labelled in one LM call (CLEAR A.2).

Domain and content-type priors (from `retrieval.priors`, when configured) are shown to the LM as
features and stand in for labels the LM failed to give. With neither, a result counts as low quality:
the conservative choice, since quality counts gate overrides.

Every label, however it was given, is then capped: at low for a page the evidence screen quarantines
(`retrieval.screening`: text addressed to the model, imitations of the prompt, look-alike domains), and, with
priors, by what the page's domain can vouch for (`label_ceilings`): a blog, a forum or an unrecognised site
never counts as high or medium quality, whatever it claims about itself.

`source_quality = "clear-code"` labels by the CLEAR code's domain table alone (`retrieval.clear_code_quality`), with
no LM call and no domain ceiling: only the screen's quarantine caps it.
"""

from __future__ import annotations

from collections.abc import Sequence

import dspy

from clearmed.programs.lm.context import current
from clearmed.programs.lm.prompting import format_search_results
from clearmed.programs.lm.stage import run_stage
from clearmed.retrieval.clear_code_quality import clear_code_assessment
from clearmed.retrieval.priors import QualityPriors, label_ceiling, prior_assessment, prior_features
from clearmed.retrieval.screening import cap_label, screen
from clearmed.signatures.clear import AssessSourceQuality
from clearmed.signatures.records import (
    Passage,
    QualityAssessment,
    QualityOrigin,
    SourceQuality,
    StepError,
)
from clearmed.signatures.records.results import QualityResult
from clearmed.signatures.records.settings import Stage


def capped(passage: Passage, assessment: QualityAssessment, priors: QualityPriors | None) -> QualityAssessment:
    """The assessment with its label capped by the screen and the domain's ceiling; the cap is in the reason."""
    screening = screen(passage)
    if screening.quarantined:
        ceiling, why = screening.ceiling, screening.reason()
    elif priors is not None:
        ceiling, why = label_ceiling(passage, priors), f"{screening.tier} domain"
    else:
        return assessment
    label = cap_label(assessment.label, ceiling)
    if label == assessment.label:
        return assessment
    reason = f"{assessment.reason}; capped {assessment.label} -> {label} ({why})".lstrip("; ")
    return assessment.model_copy(update={"label": label, "reason": reason})


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
            return prior_assessment(passage, self.priors)
        return QualityAssessment(passage_id=passage.id, label="low", reason="unassessed: counted as low")

    def forward(self, question_text: str, passages: list[Passage], stage: Stage = "source_quality") -> QualityResult:
        if not passages:
            return QualityResult(quality=SourceQuality())
        settings = current().settings
        if settings.source_quality == "clear-code":
            # No LM call: the CLEAR code's domain table alone; only the evidence screen's quarantine still caps a
            # label (a page that talks to the model is no source, whatever its domain).
            by_table = [capped(p, clear_code_assessment(p), None) for p in passages]
            return QualityResult(quality=SourceQuality(assessments=by_table, origin="prior"))
        if settings.source_quality == "priors" and self.priors is not None:
            # No LM call: for a backbone whose labels measure worse than the domain/content priors (issue 16).
            by_prior = [capped(p, prior_assessment(p, self.priors), self.priors) for p in passages]
            return QualityResult(quality=SourceQuality(assessments=by_prior, origin="prior"))
        features = {p.id: prior_features(p) for p in passages} if self.priors is not None else {}
        words = settings.quality_snippet_words or settings.passage_words
        result = run_stage(
            stage,
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
                given = QualityAssessment(passage_id=passage.id, label=label, reason="llm")  # type: ignore[arg-type]
            else:
                missing.append(passage.id)
                given = self._fallback(passage)
            assessments.append(capped(passage, given, self.priors))
        origin: QualityOrigin
        if not missing:
            origin = "llm"
        elif self.priors is not None:
            origin = "prior"
        else:
            origin = "none"
        error = result.error
        if error is None and missing:
            error = StepError(stage=stage, kind="parse_error", message=f"no quality label for {', '.join(missing)}")
        return QualityResult(quality=SourceQuality(assessments=assessments, origin=origin), error=error)
