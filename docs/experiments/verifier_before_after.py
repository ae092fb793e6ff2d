"""The LM verifier before and after a change of its prompt, paired on the same questions (issue 46: the CLEAR code's
decision policy and structured verdict).

    python docs/experiments/verifier_before_after.py BEFORE_RUN AFTER_RUN [--common]

Both folders are `clearmed eval --program clear` runs of one benchmark over the same recorded pathways
(`docs/experiments/eval_mirage_recorded.sh`); BEFORE_RUN may come from an older checkout, so its records are read
as plain JSON (an older record has no structured verdict). For each run: accuracy, verifier calls, the route mix of
the calls, how often the verifier kept the parametric answer, and how often its own letter differs from the answer
its route gives; then the paired gained / lost with the exact McNemar p, and what the code's rule (`answer_source =
"verifier"`: the verifier's own letter stands) would have scored on the after run's calls. `--common` pairs the
questions both folders hold (a run cut short), and says how many.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from clearmed.metrics import mcnemar_exact_p
from clearmed.report.markdown import p_text


def records(folder: Path) -> dict[str, dict[str, Any]]:
    """The run's last record of each question (a resume appends redone ones after the degraded)."""
    by_id: dict[str, dict[str, Any]] = {}
    with (folder / "results.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                by_id[record["question_id"]] = record
    return by_id


def correct(record: dict[str, Any]) -> bool:
    score = record.get("score")
    return bool(score and score.get("correct"))


def letters(answer: dict[str, Any] | None) -> tuple[str, ...]:
    return tuple(answer.get("letters") or ()) if answer else ()


def lm_call(record: dict[str, Any]) -> dict[str, Any] | None:
    """The first verifier output the LM gave (None: no call, e.g. consensus or one usable answer)."""
    outputs = record["decision"].get("verifier_outputs") or []
    return next((out for out in outputs if out.get("mode") == "lm"), None)


def describe(name: str, run: dict[str, dict[str, Any]]) -> tuple[list[str], dict[str, bool]]:
    calls = {qid: out for qid, record in run.items() if (out := lm_call(record)) is not None}
    routes = Counter(str(out.get("route")) for out in calls.values())
    asked = sum(any(u.get("stage") == "verifier" for u in r["decision"].get("usage") or []) for r in run.values())
    unbacked = Counter(  # a route no candidate backs: the deterministic verifier decided instead
        str(out["error"].get("raw_output"))
        for r in run.values()
        for out in r["decision"].get("verifier_outputs") or []
        if (out.get("error") or {}).get("kind") == "invalid_answer"
    )
    differs = sum(
        letters(out.get("answer")) != letters(run[qid]["decision"].get("answer"))
        for qid, out in calls.items()
        if letters(out.get("answer"))
    )
    gold = {
        qid: tuple(record["decision"]["bundle"]["question"].get("gold_letters") or ()) for qid, record in run.items()
    }
    own_right = sum(letters(out.get("answer")) == gold[qid] for qid, out in calls.items())
    route_right = sum(correct(run[qid]) for qid in calls)
    with_verdict = sum(out.get("verdict") is not None for out in calls.values())
    right = {qid: correct(record) for qid, record in run.items()}
    n = len(run)
    every_route = Counter(str(record["decision"].get("route")) for record in run.values())
    lines = [
        f"{name}: {sum(right.values())}/{n} = {100 * sum(right.values()) / n:.1f}%",
        "  routes over all questions: " + ", ".join(f"{r} {c}" for r, c in every_route.most_common()),
        f"  verifier calls {asked}: {len(calls)} routed; routes "
        + ", ".join(f"{r} {c}" for r, c in routes.most_common()),
        f"  a route no candidate backs on {sum(unbacked.values())}: "
        + ", ".join(f"{r} {c}" for r, c in unbacked.most_common()),
        f"  kept the parametric answer on {routes['keep_parametric']} of {len(calls)} calls",
        f"  its own letter differs from its route's answer on {differs} of {len(calls)}",
        f"  on its calls: the route's answer right {route_right}, its own letter right {own_right}",
        f"  structured verdict filled on {with_verdict} of {len(calls)}",
    ]
    return lines, right


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--common", action="store_true", help="pair only the questions both runs hold")
    args = parser.parse_args(argv)
    before, after = records(args.before), records(args.after)
    if set(before) != set(after):
        if not args.common:
            print(
                f"the runs hold different questions ({len(before)} and {len(after)}); --common pairs the shared ones",
                file=sys.stderr,
            )
            return 2
        shared = set(before) & set(after)
        print(f"pairing the {len(shared)} questions both runs hold ({len(before)} before, {len(after)} after)")
        before = {q: r for q, r in before.items() if q in shared}
        after = {q: r for q, r in after.items() if q in shared}
    text_before, right_before = describe("before", before)
    text_after, right_after = describe("after", after)
    gained = sum(right_after[q] and not right_before[q] for q in before)
    lost = sum(right_before[q] and not right_after[q] for q in before)
    print("\n".join([*text_before, *text_after]))
    print(
        f"paired, after against before: gained {gained}, lost {lost}, McNemar p = {p_text(mcnemar_exact_p(gained, lost))}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
