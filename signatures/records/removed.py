"""Settings and record fields that were removed, and what an older record or config that still has them becomes.

Issue 26 removed what docs/results.md measured not to pay: the letter-prior correction, stated confidence, the
quality gate, the plain and evidence-first scoring layouts and options in the retrieval query; and tuning extensions
no config set and no measurement backed: the verifier-confidence gates, the calibrated verifier's own
needs_more_search (a follow-up round that re-scored the dynamic pathway) and its generated-letter probability. A
config that sets
one is refused with a one-line error naming it. A stored Decision made with one still loads: its candidates go
back to what the pathways produced, and `Decision.removed_settings` names what was used, so replay reports a miss
instead of reproducing a procedure that no longer exists. Fields at their old defaults are dropped silently (every
older record and artifact carries them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# name -> the value that meant "off"
REMOVED_THRESHOLDS: dict[str, object] = {
    "letter_prior_strength": 0.0,
    "letter_priors": {},
    "calibrated_stated_weight": 1.0,
    "high_requires_prior": None,
    "medium_requires_prior": None,
    "prior_tier_weights": {},
    "accept_dynamic_min_confidence": "low",
    "audit_skip_confidence": None,
    "calibrated_more_search_below": 0.0,
    "calibrated_generated_probability": 0.0,
}
# Rules that only a removed threshold could fire -> that threshold.
REMOVED_RULES: dict[str, str] = {
    "guard_rejected_low_confidence": "accept_dynamic_min_confidence",
    "audit_skipped_confident_consensus": "audit_skip_confidence",
}
REMOVED_PROGRAM_SETTINGS: dict[str, object] = {
    "query_includes_options": False,
    "stated_confidence": False,
    "score_prompt": "chat",
    "score_evidence_first": False,
}


def split_removed(data: Mapping[str, Any], removed: Mapping[str, object]) -> tuple[dict[str, Any], list[str]]:
    """`data` without the removed fields, and the names of those it set to anything but their old default."""
    kept = {key: value for key, value in data.items() if key not in removed}
    used = [key for key in data if key in removed and data[key] != removed[key]]
    return kept, used


def refuse_removed(data: object, removed: Mapping[str, object], table: str) -> object:
    """A config table's fields with the removed ones at their old defaults dropped; a removed one set is an error."""
    if not isinstance(data, Mapping):
        return data
    kept, used = split_removed(data, removed)
    if used:
        raise ValueError(
            f"[{table}] {used[0]} was removed (it did not pay, or was never shown to: docs/results.md); delete it"
        )
    return kept


def _letters(candidate: Mapping[str, Any]) -> tuple[str, ...] | None:
    answer = candidate.get("answer")
    return None if answer is None else tuple(answer.get("letters") or ())


def _letter_agreement(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """The agreement of single-answer MCQ candidates (the only kind a removed setting changed)."""
    by = {c.get("pathway"): _letters(c) for c in candidates}

    def agree(first: str, second: str) -> bool | None:
        a, b = by.get(first), by.get(second)
        return None if a is None or b is None else a == b

    return {
        "parametric_local": agree("parametric", "local"),
        "parametric_dynamic": agree("parametric", "dynamic"),
        "local_dynamic": agree("local", "dynamic"),
        "method": "letters",
    }


def _as_produced(candidate: dict[str, Any], used: set[str]) -> dict[str, Any]:
    """A stored candidate as its pathway produced it (before a letter-prior correction), stated confidence gone."""
    if candidate.get("uncorrected") is not None:
        used.add("letter_prior_strength")
        candidate = candidate["uncorrected"]
    if candidate.get("stated_confidence") is not None:
        used.add("stated_confidence")
    drop = ("uncorrected", "stated_confidence", "stated_confidence_raw")
    return {key: value for key, value in candidate.items() if key not in drop}


def _migrate_bundle(bundle: dict[str, Any], used: set[str]) -> tuple[dict[str, Any], bool]:
    """The bundle as the pathways left it, and whether its candidates changed (so their agreement must too)."""
    rounds = [dict(r) for r in bundle.get("followups") or ()]
    replaced = next((r["replaced"] for r in rounds if r.get("replaced") is not None), None)
    candidates = list(bundle.get("candidates") or ())
    if replaced is not None:
        candidates = [replaced if c.get("pathway") == "dynamic" else c for c in candidates]
    if replaced is not None or any(r.get("rescored") is not None for r in rounds):
        used.add("calibrated_more_search_below")
    restored = [_as_produced(dict(c), used) for c in candidates]
    for round_ in rounds:
        round_.pop("replaced", None)
        round_.pop("rescored", None)
    changed = replaced is not None or "letter_prior_strength" in used
    return {**bundle, "candidates": restored, "followups": rounds}, changed


def _without_removed_rules(data: dict[str, Any], used: set[str]) -> dict[str, Any]:
    """Steps and the deciding rule of a removed mechanism (a letter-prior calibration step, a confidence gate's
    rule) taken out, and the setting they show was used named."""
    steps = []
    for step in data.get("steps") or ():
        if isinstance(step, dict) and step.get("mechanism") == "calibration":
            used.add("letter_prior_strength")
            continue
        if isinstance(step, dict) and step.get("rule") in REMOVED_RULES:
            used.add(REMOVED_RULES[step["rule"]])
            step = {**step, "rule": ""}
        steps.append(step)
    if data.get("deciding_rule") in REMOVED_RULES:
        used.add(REMOVED_RULES[data["deciding_rule"]])
        data = {**data, "deciding_rule": ""}
    return {**data, "steps": steps} if isinstance(data.get("steps"), list) else data


def migrate_decision(data: dict[str, Any]) -> dict[str, Any]:
    """An older stored Decision in today's shape: the bundle as the pathways left it (a re-scored dynamic candidate
    put back from `FollowUpRound.replaced`, a round's re-scoring dropped, a letter-prior correction undone from
    `Candidate.uncorrected`), the agreement of those candidates, removed thresholds, steps and rules dropped, and
    `removed_settings` naming what was used."""
    data = dict(data)
    used: set[str] = set(data.get("removed_settings") or ())
    if isinstance(data.get("bundle"), dict):
        data["bundle"], changed = _migrate_bundle(data["bundle"], used)
        if changed and data.get("agreement") is not None:
            data["agreement"] = _letter_agreement(data["bundle"]["candidates"])
    if isinstance(data.get("thresholds"), Mapping):
        data["thresholds"], set_there = split_removed(data["thresholds"], REMOVED_THRESHOLDS)
        used.update(set_there)
    data = _without_removed_rules(data, used)
    if used:
        data["removed_settings"] = sorted(used)
    return data
