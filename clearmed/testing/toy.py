"""A toy world: one MCQ with three local passages and two web pages, the helpers that script each stage's reply,
and demo config files: enough to drive every branch of the program in tests without a model."""

from __future__ import annotations

import re
from collections.abc import Callable

import dspy

from clearmed.demo import demo_dir
from clearmed.programs.clear import CLEAR
from clearmed.retrieval.base import Retriever, WebSearch
from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch, web_passage
from clearmed.signatures.records import Passage, Provenance, Question, Thresholds
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing.scripted import ScriptedCall, ScriptedEngine, ScriptValue, scripted_lm

# --------------------------------------------------------------------------------------------- a toy world
# One MCQ with three local passages and two web pages, and helpers to script each stage's reply: enough to
# drive every branch of the program in tests without a model.

QUESTION = Question(
    id="toy-1",
    text="Which condition causes weight gain and cold intolerance?",
    options={"A": "Hypothyroidism", "B": "Hyperthyroidism", "C": "Addison disease", "D": "Cushing syndrome"},
    gold_letters=["A"],
)

LOCAL = [
    Passage(
        id=f"book-{i}",
        title="Thyroid",
        text=f"Hypothyroidism causes weight gain and cold intolerance (section {i}).",
        pathway="local",
        provenance=Provenance(kind="corpus", corpus="toy-textbook"),
    )
    for i in range(3)
]
WEB = [
    web_passage(
        "p1", "https://www.niddk.nih.gov/thyroid", "Hypothyroidism", "weight gain cold intolerance", "2024-05-01"
    ),
    web_passage("p2", "https://thyroid-blog.example.com/a", "My story", "weight gain and cold intolerance", None),
]
# A page only a targeted follow-up finds (it shares no word with the question): the override guard grants on
# new evidence alone, so a toy follow-up that asks about hypothyroidism must have something new to find.
FOLLOWUP_WEB = [
    web_passage(
        "p3",
        "https://medlineplus.gov/hypothyroidism.html",
        "Hypothyroidism | MedlinePlus",
        "In hypothyroidism the TSH level is high, free T4 low.",
        "2024-09-01",
    ),
]


def label_all(label: str) -> Callable[[ScriptedCall], dict[str, object]]:
    """A source-quality reply labelling every result id shown in the prompt."""

    def reply(call: ScriptedCall) -> dict[str, object]:
        ids = sorted(set(re.findall(r"^\[((?:W|F)[\d.]+)\]", call.user, flags=re.MULTILINE)))
        return {"quality_labels": {i: label for i in ids}}

    return reply


def pathway_replies(parametric: str, local: str, dynamic: str) -> dict[str, ScriptValue]:
    return {
        "parametric": {"rationale": "from memory", "answer": parametric},
        "local_answer": {"rationale": "the textbook says so", "cited_ids": ["L1"], "answer": local},
        "dynamic_answer": {"rationale": "the web says so", "cited_ids": ["W1"], "answer": dynamic},
    }


def verifier_reply(route: str, answer: str = "A", confidence: str = "medium") -> dict[str, object]:
    return {"rationale": "weighed the evidence", "answer": answer, "route": route, "confidence": confidence}


GUARD_ALL_TRUE = {
    "rationale": "strong",
    "supports_challenger": True,
    "default_not_better_supported": True,
    "aligned_with_question": True,
    "supports_exact_option": True,
    "no_unresolved_conflict": True,
    "recommend_override": True,
}
AUDIT_ALL_TRUE = {
    "rationale": "r",
    "clearly_supports_challenger": True,
    "aligned_with_question": True,
    "supports_exact_option": True,
    "default_not_better_supported": True,
    "no_unresolved_conflict": True,
    "recommend_override": True,
}


# The toy program with scored pathways and the calibrated verifier (scores come from `build_toy_program(scores=...)`).
SCORED_CALIBRATED = ProgramSettings(
    json_fallback=False, parallel_pathways="off", mcq_decoding="score", verifier_mode="calibrated"
)


def build_toy_program(
    script: dict[str, ScriptValue],
    *,
    question: Question = QUESTION,
    thresholds: Thresholds | None = None,
    settings: ProgramSettings | None = None,
    retriever: Retriever | None = None,
    web: WebSearch | None = None,
    assessor: dict[str, ScriptValue] | None = None,
    scores: dict[str, dict[str, float]] | None = None,
) -> tuple[CLEAR, ScriptedEngine, ScriptedEngine | None]:
    lm, engine = scripted_lm(script, scores=scores)
    role_lms: dict[str, dspy.BaseLM] = {"main": lm}
    assessor_engine = None
    if assessor is not None:
        assessor_lm, assessor_engine = scripted_lm(assessor, model="local/assessor")
        role_lms["assessor"] = assessor_lm
    program = CLEAR(
        retriever if retriever is not None else InMemoryRetriever(LOCAL),
        web if web is not None else InMemoryWebSearch([*WEB, *FOLLOWUP_WEB]),
        settings=settings or ProgramSettings(json_fallback=False, parallel_pathways="off"),
        thresholds=thresholds,
        role_lms=role_lms,
    )
    return program, engine, assessor_engine


# ------------------------------------------------------------------------------------------ config files
# The config most command-line tests run: a main backbone nobody answers (the tests put a scripted LM in its place),
# the demo textbook as the corpus and the demo web pages offline.
UNREACHABLE_BACKBONE = 'kind = "openai_compatible"\nmodel = "m"\napi_base = "http://127.0.0.1:9/v1"'


def demo_config_toml(*, backbone: str | None = UNREACHABLE_BACKBONE, **sections: str | None) -> str:
    """A config's TOML text: ``[backbones.main]`` from ``backbone``, then ``[corpus]`` and ``[search]`` on the demo
    bundle, then any other tables by name (``program=``, ``run=``), each given its body. A section given as None
    (or ``backbone=None``) is left out; a given ``corpus`` or ``search`` replaces the demo one."""
    demo = demo_dir()
    tables: dict[str, str | None] = {
        "backbones.main": backbone,
        "corpus": f'backend = "memory"\npath = "{demo / "textbook.jsonl"}"\n'
        'fields = { id = "id", title = "title", text = "text" }',
        "search": f'backend = "offline"\npages = "{demo / "web_pages.jsonl"}"\n'
        'fields = { id = "id", title = "title", text = "text", url = "url", date = "published" }',
    }
    tables.update(sections)
    return "".join(f"\n[{name}]\n{body.strip()}\n" for name, body in tables.items() if body is not None)
