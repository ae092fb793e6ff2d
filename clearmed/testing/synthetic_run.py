"""A synthetic stored run for tuning: many CLEAR decisions from the scripted toy world, varied per question.

Each question ("Case N.") draws its own conflict pattern, gold answer, web quality labels, verifier route and
confidence, and guard/audit outcomes from a seeded generator, so the adjudication rules branch differently
across questions and threshold changes move accuracy and cost. The decisions are real CLEAR decisions (the
program runs on a scripted LM), written to a real run folder, so replay sees exactly what a stored eval has.
Used by the tuning tests and `scripts/bench_tune.py`; a test double, so it lives beside `clearmed.testing`.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from clearmed.config import ClearmedConfig, parse_config
from clearmed.evaluation import EvalRecord, EvalSpec, run_evaluation
from clearmed.evaluation.shard import take_shard
from clearmed.programs.clear import CLEAR
from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch, web_passage
from clearmed.signatures.records import PATHWAYS, ROUTE_TABLE, Question, Route, Thresholds
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import GUARD_ALL_TRUE, LOCAL, QUESTION, ScriptedCall, ScriptedEngine, scripted_lm

SYNTHETIC_CONFIG: ClearmedConfig = parse_config(
    {"backbones": {"main": {"kind": "openai_compatible", "model": "scripted", "api_base": "http://127.0.0.1:9/v1"}}},
    source="synthetic.toml",
)

# Initial results match the question's words; follow-up results match only the scripted follow-up query.
_PAGES = [
    web_passage("s1", "https://www.niddk.nih.gov/thyroid", "Thyroid", "weight gain cold intolerance", "2024-05-01"),
    web_passage("s2", "https://www.healthline.com/thyroid", "Thyroid", "weight gain and cold intolerance", None),
    web_passage("s3", "https://thyroid-blog.example.com/a", "My story", "cold intolerance weight gain", "2012-01-01"),
    web_passage("s4", "https://www.cdc.gov/guideline", "Guideline", "thyroid evidence review", "2023-01-01"),
    web_passage("s5", "https://www.reddit.com/r/thyroid", "Forum", "thyroid evidence anyone else", None),
]
_CASE = re.compile(r"Case (\d+)\.")
_LETTERS = ("A", "B", "C", "D")


def _case_of(call: ScriptedCall) -> int:
    found = _CASE.search(call.user)
    return int(found.group(1)) if found else 0


class _Plan:
    """Everything scripted for one question, drawn from a generator seeded by (seed, case)."""

    def __init__(self, seed: int, case: int) -> None:
        rng = random.Random(seed * 1_000_003 + case)
        a, b, c = rng.sample(_LETTERS, 3)
        pattern = rng.choices(["unanimous", "pl", "ld", "pd", "split"], weights=[25, 35, 15, 10, 15])[0]
        self.answers = {
            "unanimous": (a, a, a),
            "pl": (a, a, b),
            "ld": (b, a, a),
            "pd": (a, b, a),
            "split": (a, b, c),
        }[pattern]
        parametric, local, dynamic = self.answers
        web_right = rng.random() < (0.45 if pattern in ("pl", "split") else 0.2)
        self.gold = dynamic if web_right else rng.choice([parametric, local])
        if pattern == "unanimous":
            self.gold = a if rng.random() < 0.9 else rng.choice([x for x in _LETTERS if x != a])
        routes_of: dict[str, list[Route]] = {
            "unanimous": ["consensus"],
            "pl": ["consensus", "consensus", "accept_dynamic", "needs_more_search"],
            "ld": ["consensus", "keep_local"],
            "pd": ["consensus", "keep_local", "needs_more_search"],
            "split": ["keep_local", "accept_dynamic", "keep_parametric", "needs_more_search"],
        }
        routes = routes_of[pattern]
        self.route = rng.choice(routes)
        self.second_route: Route = rng.choice([r for r in routes if r != "needs_more_search"] or ["keep_local"])
        # A verifier that is right tends to be more confident (reports break accuracy down by confidence).
        confident = web_right == (self.route == "accept_dynamic")
        self.confidence = rng.choices(["low", "medium", "high"], weights=[1, 2, 4] if confident else [4, 2, 1])[0]
        self.guard_ok = web_right if rng.random() < 0.8 else not web_right
        self.audit_ok = web_right if rng.random() < 0.75 else not web_right
        self.labels = {page.id: rng.choice(["high", "medium", "low"]) for page in _PAGES}
        self.rng = rng

    def verifier(self, call: ScriptedCall) -> dict[str, object]:
        route = self.second_route if "[F1." in call.user else self.route
        source = ROUTE_TABLE[route].answer_from
        answer = PATHWAYS.index(source) if source in PATHWAYS else 0
        return {
            "answer": self.answers[answer],
            "route": route,
            "confidence": self.confidence,
            "rationale": "weighed the evidence",
        }


def synthetic_program(seed: int = 0, thresholds: Thresholds | None = None) -> tuple[CLEAR, ScriptedEngine]:
    """One scripted CLEAR program that answers every synthetic question by its own plan, and its engine."""
    plans: dict[int, _Plan] = {}

    def plan(call: ScriptedCall) -> _Plan:
        case = _case_of(call)
        if case not in plans:
            plans[case] = _Plan(seed, case)
        return plans[case]

    def quality(call: ScriptedCall) -> dict[str, object]:
        ids = sorted(set(re.findall(r"^\[((?:W|F)[\d.]+)\]", call.user, flags=re.MULTILINE)))
        labels = plan(call).labels
        # Result ids are positional (W1.., F1.1..); label by the page behind each id, found by its URL line.
        urls = dict(re.findall(r"^\[((?:W|F)[\d.]+)\] ([^\s;]+)", call.user, flags=re.MULTILINE))
        by_url = {page.provenance.url: page.id for page in _PAGES}
        return {"quality_labels": {i: labels.get(by_url.get(urls.get(i, ""), ""), "low") for i in ids}}

    def guard(call: ScriptedCall) -> dict[str, object]:
        return {**GUARD_ALL_TRUE, "no_unresolved_conflict": plan(call).guard_ok}

    def audit(call: ScriptedCall) -> dict[str, object]:
        ok = plan(call).audit_ok
        return {
            "rationale": "r",
            "clearly_supports_challenger": ok,
            "aligned_with_question": True,
            "supports_exact_option": True,
            "default_not_better_supported": True,
            "no_unresolved_conflict": True,
            "recommend_override": ok,
        }

    def answer(index: int, cited: bool):
        def reply(call: ScriptedCall) -> dict[str, object]:
            extra = {"cited_ids": ["L1" if index == 1 else "W1"]} if cited else {}
            return {"rationale": "because", **extra, "answer": plan(call).answers[index]}

        return reply

    lm, engine = scripted_lm(
        {
            "parametric": answer(0, cited=False),
            "local_answer": answer(1, cited=True),
            "dynamic_answer": answer(2, cited=True),
            "source_quality": quality,
            "followup_quality": quality,
            "verifier": lambda call: plan(call).verifier(call),
            "followup_query": {"query": "thyroid evidence guideline review"},
            "guard": guard,
            "audit": audit,
        }
    )
    program = CLEAR(
        InMemoryRetriever(LOCAL),
        InMemoryWebSearch(_PAGES),
        settings=ProgramSettings(json_fallback=False, parallel_pathways="off", dynamic_k=3),
        thresholds=thresholds,
        role_lms={"main": lm},
    )
    return program, engine


def synthetic_questions(n: int, seed: int = 0) -> list[Question]:
    questions = []
    for case in range(n):
        gold = _Plan(seed, case).gold
        text = f"Case {case}. {QUESTION.text}"
        questions.append(QUESTION.model_copy(update={"id": f"synth-{case:04d}", "text": text, "gold_letters": [gold]}))
    return questions


def write_synthetic_run(
    run_dir: Path,
    n: int = 300,
    *,
    seed: int = 0,
    thresholds: Thresholds | None = None,
    model: str = "scripted",
    shard: tuple[int, int] | None = None,
) -> list[EvalRecord]:
    """Evaluate the scripted program on `n` synthetic questions into a run folder (resumable like any run). `model`
    is the name the config snapshot gives the main backbone; `shard` (K, N) makes the folder shard K of N of the run."""
    questions = synthetic_questions(n, seed)
    run_shard = None
    if shard is not None:
        questions, run_shard = take_shard(questions, [q.id for q in questions], *shard)
    spec = EvalSpec(
        program="clear",
        benchmark="synthetic",
        source=f"synthetic seed {seed}",
        questions=questions,
        run_dir=run_dir,
        seed=seed,
        shard=run_shard,
    )
    main = SYNTHETIC_CONFIG.backbones["main"].model_copy(update={"model": model})
    config = SYNTHETIC_CONFIG.model_copy(
        update={"thresholds": thresholds or Thresholds(), "backbones": {**SYNTHETIC_CONFIG.backbones, "main": main}}
    )
    program, _ = synthetic_program(seed, thresholds)
    return run_evaluation(spec, config, program, show_progress=False)


def write_synthetic_suite(out: Path, n: int = 6) -> dict[str, Path]:
    """A suite's folder as `clearmed suite` lays it out (OUT/<config>/<benchmark>/<program>-n<N>-s<seed>): model-a's
    run as two shards (sibling folders, -shard1of2 and -shard2of2) and their merge, model-b's run in one process with
    seed 1 (so it answers otherwise). Returns each model's run folder."""
    from clearmed.evaluation.merge import join_shard_folders

    merged = out / "model-a" / "synthetic" / f"clear-n{n}-s0"
    shards = [merged.with_name(f"{merged.name}-shard{index}of2") for index in (1, 2)]
    for index, folder in enumerate(shards, start=1):
        write_synthetic_run(folder, n, model="model-a", shard=(index, 2))
    join_shard_folders(shards, merged)
    single = out / "model-b" / "synthetic" / f"clear-n{n}-s1"
    write_synthetic_run(single, n, seed=1, model="model-b")
    return {"model-a": merged, "model-b": single}
