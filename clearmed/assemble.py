"""Config -> a ready program: LMs per role, the local retriever, the web search and quality priors.

The only place that joins the packages together; everything below it is usable and testable alone.
"""

from __future__ import annotations

import os

import dspy

from clearmed.backbones.factory import build_lm
from clearmed.config import ClearmedConfig
from clearmed.programs.clear import CLEAR
from clearmed.retrieval.factory import build_retriever, build_web_search
from clearmed.retrieval.quality import QualityPriors, prior_assessment, prior_features
from clearmed.signatures.records import Passage, QualityAssessment


class ConfiguredPriors:
    """Domain and content-type priors as the program's `QualityPriors` protocol."""

    def __init__(self, priors: QualityPriors) -> None:
        self.priors = priors

    def features(self, passage: Passage) -> str:
        return prior_features(passage)

    def assess(self, passage: Passage) -> QualityAssessment:
        return prior_assessment(passage, self.priors)


def build_role_lms(config: ClearmedConfig, roles: tuple[str, ...] = ("main", "assessor")) -> dict[str, dspy.BaseLM]:
    """One LM per configured role; roles sharing an identical backbone table share one LM object."""
    built: dict[str, dspy.BaseLM] = {}
    for role in roles:
        backbone = config.backbones.get(role)
        if backbone is None:
            continue
        twin = next((r for r, lm in built.items() if config.backbones[r] == backbone), None)
        built[role] = built[twin] if twin else build_lm(backbone, role=role, source=config.source)
    return built


def configure_lm_cache(config: ClearmedConfig) -> None:
    if config.run.lm_cache_dir is not None:
        os.environ.setdefault("DSPY_CACHEDIR", str(config.run.lm_cache_dir))


def build_clear(config: ClearmedConfig, *, role_lms: dict[str, dspy.BaseLM] | None = None) -> CLEAR:
    configure_lm_cache(config)
    retriever = build_retriever(config.corpus) if config.corpus is not None else None
    web = build_web_search(config.search) if config.search is not None else None
    priors = ConfiguredPriors(config.quality_priors) if config.quality_priors is not None else None
    return CLEAR(
        retriever,
        web,
        settings=config.program,
        thresholds=config.thresholds,
        quality_priors=priors,
        role_lms=role_lms if role_lms is not None else build_role_lms(config),
    )
