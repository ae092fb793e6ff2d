"""Decisions of two sets of run folders, question by question: what a restructuring must leave unchanged.

    python scripts/diff_decisions.py BEFORE AFTER

BEFORE and AFTER each hold run folders (results.jsonl) under the same relative paths, written by the same
scripted programs before and after a change (`scripts/scripted_medqa_run.py`, `clearmed.testing.synthetic_run`).
Every field of each Decision is compared (answer, route, rule, rationale, confidence, bundle, agreement, verifier
outputs, steps, usage rows in any order, thresholds, error) but the wall-clock seconds of its usage rows, and fields only one
side has (a field a change added or removed) are listed apart. Exits 1 if any decision differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _without_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_clock(item) for key, item in value.items() if key != "seconds"}
    if isinstance(value, list):
        return [_without_clock(item) for item in value]
    return value


def _comparable(decision: dict[str, Any]) -> dict[str, Any]:
    # The pathways run concurrently, so their usage rows are in the order they finished: compared as a multiset.
    decision = _without_clock(decision)
    decision["usage"] = sorted(decision.get("usage") or [], key=lambda row: json.dumps(row, sort_keys=True))
    return decision


def decisions(run_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {record["question_id"]: _comparable(record["decision"]) for record in map(json.loads, lines)}


def main(before_root: Path, after_root: Path) -> int:
    changed = 0
    for results in sorted(before_root.rglob("results.jsonl")):
        run = results.parent.relative_to(before_root)
        before, after = decisions(results.parent), decisions(after_root / run)
        only = {key for d in before.values() for key in d} ^ {key for d in after.values() for key in d}
        differing = [
            qid
            for qid in before
            if {k: v for k, v in before[qid].items() if k not in only}
            != {k: v for k, v in after.get(qid, {}).items() if k not in only}
        ]
        missing = sorted(set(before) ^ set(after))
        changed += len(differing) + len(missing)
        fields = f"; fields on one side only: {', '.join(sorted(only))}" if only else ""
        print(f"{run}: {len(before)} decisions, {len(differing)} different, {len(missing)} missing{fields}")
        for qid in differing[:5]:
            keys = [k for k in before[qid] if k not in only and before[qid][k] != after[qid].get(k)]
            print(f"  {qid}: {', '.join(keys)}")
    return 1 if changed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2])))
