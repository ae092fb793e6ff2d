"""The quality counts the override guard and the challenge audit use: LLM labels, capped by domain priors.

`effective_quality` is the one function behind those counts, in the live program and in replay (threshold
tuning) alike. Under default Thresholds it is `bundle.dynamic_quality()` unchanged. With the quality gate on
(`Thresholds.high_requires_prior` / `medium_requires_prior`), each page's prior score is recomputed from its
recorded provenance (domain tier, content type, date: `retrieval.quality`), with the tier weights the
thresholds may override, and an LLM label counts only as high as that score allows.
"""

from __future__ import annotations

import threading
from datetime import date

from clearmed.programs.rules import gate_quality
from clearmed.retrieval.quality import QualityPriors, domain_tier, host_of, prior_score
from clearmed.signatures.records import EvidenceBundle, Passage, SourceQuality, Thresholds

_DEFAULT_PRIORS = QualityPriors()
_CACHE_LIMIT = 200_000

# (passage fields, priors without tier weights, day) -> (tier, score without the tier weight). A tuning study
# rescores the same pages under hundreds of weight settings; classifying a page (suffix tables, regexes) is
# the expensive part and does not depend on the weights.
_parts_cache: dict[tuple[object, ...], tuple[str, float]] = {}
_cache_lock = threading.Lock()


def _prior_parts(passage: Passage, base: QualityPriors, base_key: str, today: date) -> tuple[str, float]:
    provenance = passage.provenance
    key = (
        provenance.url,
        provenance.domain,
        provenance.kind,
        provenance.published,
        passage.title,
        passage.text,
        base_key,
        today,
    )
    found = _parts_cache.get(key)
    if found is not None:
        return found
    tier, _ = domain_tier(host_of(passage), provenance.url)
    # prior_score adds the tier weight to the content, recency and age terms: with no tier weights it is the
    # rest, so any weights can be added back without classifying the page again.
    parts = (tier, prior_score(passage, base, today))
    with _cache_lock:
        if len(_parts_cache) >= _CACHE_LIMIT:
            _parts_cache.clear()
        _parts_cache[key] = parts
    return parts


def prior_scores(
    passages: list[Passage], thresholds: Thresholds, priors: QualityPriors | None = None, today: date | None = None
) -> dict[str, float]:
    """Each passage's prior score, with the tier weights of `priors` overridden by the thresholds'."""
    priors = priors or _DEFAULT_PRIORS
    weights = {**priors.tier_weights, **thresholds.prior_tier_weights}
    base = priors.model_copy(update={"tier_weights": {}})
    base_key = base.model_dump_json()
    today = today or date.today()
    scores: dict[str, float] = {}
    for passage in passages:
        tier, rest = _prior_parts(passage, base, base_key, today)
        scores[passage.id] = round(weights.get(tier, 0.0) + rest, 4)  # type: ignore[call-overload]
    return scores


def effective_quality(
    bundle: EvidenceBundle, thresholds: Thresholds, priors: QualityPriors | None = None, today: date | None = None
) -> SourceQuality:
    """The dynamic evidence's quality (initial results and every follow-up round) as the rules count it."""
    quality = bundle.dynamic_quality()
    if not thresholds.quality_gate_on:
        return quality
    return gate_quality(quality, prior_scores(bundle.all_dynamic_passages(), thresholds, priors, today), thresholds)
