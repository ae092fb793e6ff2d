"""Realistic run folders without a model: CLEAR over shared MedQA questions, the OpenStax corpus and the offline
MedQuAD web search (the `embedded-shared` config), with a scripted LM standing in for the embedded model.

    python scripts/scripted_medqa_run.py OUT [--limit 50] [--seed 0]

Writes OUT/clear-n<N>-s<seed> and OUT/clear-heuristic-n<N>-s<seed> (the deterministic verifier in place of the
LM verifier), two runs of one benchmark for the report's comparison view. Everything but the model is real:
the questions, the retrieval, the evidence screen, the adjudication rules, the run folder. The scripted model
answers each pathway right with a fixed probability per question (parametric 55%, local 45%, web 50%), labels
web pages by their domain, and routes as a plausible verifier would; the numbers mean nothing, the trails look
like a real run's. The evidence indexes and the search cache go to a scratch folder (the shared caches are only
read), so nothing another process measures is touched.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
from pathlib import Path

import clearmed
from clearmed.api.assemble import build_program
from clearmed.api.questions import shared_source
from clearmed.config import load_config
from clearmed.evaluation import read_records
from clearmed.signatures.records import Question
from clearmed.testing import ScriptedCall, scripted_lm

HIGH_DOMAINS = ("nih.gov", "cancer.gov", "cdc.gov", "medlineplus.gov")


class Plan:
    """What the scripted model does on one question, drawn from a generator seeded by the question id."""

    def __init__(self, question: Question, seed: int) -> None:
        rng = random.Random(f"{seed}:{question.id}")
        gold = (question.gold_letters or ["A"])[0]
        wrong = [letter for letter in question.letters if letter != gold]

        def answer(p_right: float) -> str:
            return gold if rng.random() < p_right else rng.choice(wrong)

        self.question = question
        self.parametric, self.local, self.dynamic = answer(0.55), answer(0.45), answer(0.5)
        self.confidence = rng.choice(["low", "medium", "medium", "high"])
        self.guard_ok = rng.random() < 0.5
        self.audit_ok = rng.random() < 0.35
        self.rng = rng

    def option(self, letter: str) -> str:
        return (self.question.options or {}).get(letter, letter)

    def route(self) -> tuple[str, str]:
        p, l_, d = self.parametric, self.local, self.dynamic
        if p == l_:
            return ("consensus", p) if d == p or self.rng.random() < 0.7 else ("accept_dynamic", d)
        if l_ == d:
            return "consensus", l_
        if p == d:
            return ("consensus", p) if self.rng.random() < 0.6 else ("keep_local", l_)
        return self.rng.choice([("keep_local", l_), ("keep_parametric", p), ("accept_dynamic", d)])


def script(plans: list[Plan]) -> dict[str, object]:
    def plan_of(call: ScriptedCall) -> Plan:
        return next((plan for plan in plans if plan.question.text[:120] in call.user), plans[0])

    def pathway(name: str):  # type: ignore[no-untyped-def]
        def reply(call: ScriptedCall) -> dict[str, object]:
            plan = plan_of(call)
            letter = getattr(plan, name)
            cited = re.findall(r"^\[((?:L|W)\d+)\]", call.user, flags=re.MULTILINE)[:2]
            why = {
                "parametric": f"The presentation is most consistent with {plan.option(letter)}.",
                "local": f"The textbook passages describe findings that fit {plan.option(letter)}.",
                "dynamic": f"The NIH pages link these findings to {plan.option(letter)}.",
            }[name]
            fields: dict[str, object] = {"rationale": why}
            if name != "parametric":
                fields["cited_ids"] = cited
            return {**fields, "answer": letter}

        return reply

    def quality(call: ScriptedCall) -> dict[str, object]:
        labels = {}
        for pid, url in re.findall(r"^\[((?:W|F)[\d.]+)\] ([^\s;]+)", call.user, flags=re.MULTILINE):
            # Authoritative domains mostly high, but a page off the question's topic is rated down.
            draw = random.Random(f"{url}:{call.user[:200]}").random()
            trusted = any(domain in url for domain in HIGH_DOMAINS)
            labels[pid] = "high" if trusted and draw < 0.55 else ("medium" if draw < 0.85 else "low")
        for pid in re.findall(r"^\[((?:W|F)[\d.]+)\]", call.user, flags=re.MULTILINE):
            labels.setdefault(pid, "low")
        return {"quality_labels": labels}

    def verifier(call: ScriptedCall) -> dict[str, object]:
        plan = plan_of(call)
        route, letter = plan.route()
        return {
            "rationale": f"Weighing the pathways, {plan.option(letter)} is the best supported answer.",
            "answer": letter,
            "route": route,
            "confidence": plan.confidence,
        }

    def followup(call: ScriptedCall) -> dict[str, object]:
        plan = plan_of(call)
        return {"query": f"{plan.option(plan.dynamic)} {plan.option(plan.parametric)} diagnosis"}

    def guard(call: ScriptedCall) -> dict[str, object]:
        ok = plan_of(call).guard_ok
        return {
            "rationale": f"The follow-up pages {'support' if ok else 'do not clearly support'} the web answer.",
            "supports_challenger": ok,
            "default_not_better_supported": ok,
            "aligned_with_question": True,
            "supports_exact_option": True,
            "no_unresolved_conflict": ok,
            "recommend_override": ok,
        }

    def audit(call: ScriptedCall) -> dict[str, object]:
        ok = plan_of(call).audit_ok
        return {
            "rationale": f"The follow-up evidence {'clearly supports' if ok else 'does not clearly support'} the challenger.",
            "clearly_supports_challenger": ok,
            "aligned_with_question": True,
            "supports_exact_option": ok,
            "default_not_better_supported": ok,
            "no_unresolved_conflict": ok,
            "recommend_override": ok,
        }

    return {
        "parametric": pathway("parametric"),
        "local_answer": pathway("local"),
        "dynamic_answer": pathway("dynamic"),
        "source_quality": quality,
        "followup_quality": quality,
        "verifier": verifier,
        "followup_query": followup,
        "guard": guard,
        "audit": audit,
        "format_gate": lambda call: {"letters": plan_of(call).parametric},
    }


def write_runs(out: Path, limit: int, seed: int) -> list[Path]:
    from clearmed.benchmarks import load_benchmark

    bench = load_benchmark("medqa", source=shared_source("medqa"), limit=limit, seed=seed)
    scratch = Path(tempfile.mkdtemp(prefix="clearmed-scripted-"))
    config = load_config("embedded-shared")
    assert config.search is not None
    # The shared caches are read, never written: a scratch index for the web collection and a scratch cache.
    config = config.model_copy(
        update={
            "search": config.search.model_copy(
                update={"index_dir": scratch / "medquad", "cache_path": scratch / "search-cache.sqlite"}
            )
        }
    )
    folders = []
    for name in ("clear", "clear-heuristic"):
        plans = [Plan(q, seed) for q in bench.questions]
        lm, _ = scripted_lm(script(plans), model="local/scripted-medqa")
        program = build_program(name, config, role_lms={"main": lm})
        folder = out / f"{name}-n{limit}-s{seed}"
        # Through the one door of a run, as `clearmed eval` runs (a module built here, so the scripted LM answers).
        clearmed.evaluate(
            program, bench.questions, name="medqa", config=config, run_dir=folder, seed=seed, show_progress=False
        )
        records = list(read_records(folder))
        print(f"{folder}: {len(records)} questions")
        folders.append(folder)
    return folders


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    write_runs(args.out, args.limit, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
