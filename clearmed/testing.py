"""Test doubles as library code: a scripted LM that answers each CLEAR stage from a table, and a toy world.

`ScriptedEngine` is a DSPy 3.4 engine. It recognises which stage is calling from the output fields named
in the system prompt (and, for the shared evidence-answer signature, from the passage ids it was shown),
and answers with the scripted fields in ChatAdapter format. A script value may be a dict of output
fields, a raw string (sent verbatim, e.g. to test unparseable output), an exception instance (raised),
or a callable of the call returning one of those. Every call is recorded for assertions.
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dspy
from dspy.lm15 import Message, Request, Response, TextPart, Usage

from clearmed.backbones.scoring import NextTokenScores, ScoringError
from clearmed.demo_bundle import demo_dir
from clearmed.programs.clear import CLEAR
from clearmed.programs.settings import ProgramSettings
from clearmed.retrieval.base import Retriever, WebSearch
from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch, web_passage
from clearmed.signatures.records import Passage, Provenance, Question, Thresholds


class QuietHTTPServer(ThreadingHTTPServer):
    """A threaded HTTP server for fake APIs in tests. Timeout cases hang up on purpose: a client that went away
    is expected, not an error to print into the test output."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class JsonHandler(BaseHTTPRequestHandler):
    """Base request handler of the fake APIs: JSON replies, and no request log in the test output."""

    def send_json(self, status: int, payload: object) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: object) -> None:
        pass


# Output-field signatures of each stage's DSPy signature: the most specific first.
_STAGE_BY_FIELDS: list[tuple[str, tuple[str, ...]]] = [
    ("verifier", ("route", "confidence")),
    ("judge", ("verdicts", "decision")),
    ("qpis_plan", ("subqueries",)),
    ("qpis_check", ("sufficient", "next_query")),
    ("guard", ("supports_challenger",)),
    ("audit", ("clearly_supports_challenger",)),
    ("agreement", ("parametric_equals_local",)),
    ("source_quality", ("quality_labels",)),
    ("followup_query", ("query",)),
    ("format_gate", ("letters",)),
    ("response", ("response",)),
    ("evidence_answer", ("cited_ids",)),
    ("parametric", ("rationale", "answer")),
]


@dataclass(frozen=True)
class ScriptedCall:
    stage: str
    system: str
    user: str


Reply = Mapping[str, object] | str | BaseException
ScriptValue = Reply | Callable[[ScriptedCall], Reply]


def _output_fields(system: str) -> str:
    marker = "Your output fields are:"
    start = system.find(marker)
    end = system.find("All interactions will be structured", start)
    return system[start:end] if start >= 0 else ""


def identify_stage(system: str, user: str) -> str:
    fields = _output_fields(system)
    # The web-query writer and the follow-up query both write a `query`; only the writer is told a length.
    if "`query`" in fields and "`max_characters`" in system:
        return "web_query"
    for stage, names in _STAGE_BY_FIELDS:
        if all(f"`{name}`" in fields for name in names):
            if stage in ("evidence_answer", "judge"):
                pathway = "local" if "[L1]" in user else "dynamic"
                return f"{pathway}_answer" if stage == "evidence_answer" else f"{pathway}_judge"
            return stage
    return "unknown"


def format_chat_reply(fields: Mapping[str, object]) -> str:
    parts = []
    for name, value in fields.items():
        text = value if isinstance(value, str) else json.dumps(value)
        parts.append(f"[[ ## {name} ## ]]\n{text}")
    parts.append("[[ ## completed ## ]]")
    return "\n\n".join(parts)


@dataclass
class ScriptedEngine:
    """Answers each stage from `script`; with `scores`, also scores options for those stages (as a backbone
    exposing log-probabilities would), raising `ScoringError` for a stage it has no distribution for."""

    script: dict[str, ScriptValue]
    calls: list[ScriptedCall] = field(default_factory=list)
    serializes_calls: bool = False
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    scored: list[str] = field(default_factory=list)
    scored_prompts: list[tuple[list[dict[str, str]], str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __getstate__(self) -> dict[str, object]:  # picklable with the program that holds it (save_program=True)
        return {name: value for name, value in self.__dict__.items() if name != "_lock"}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def score_next_token(
        self, messages: Sequence[dict[str, str]], assistant_prefix: str, candidates: Sequence[str]
    ) -> NextTokenScores:
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = "\n".join(m["content"] for m in messages if m["role"] == "user")
        # A scored prompt asks for `answer` alone; the evidence field (and its ids) tells the pathway.
        has_evidence = "## evidence ##" in user
        stage = ("local_answer" if "[L1]" in user else "dynamic_answer") if has_evidence else "parametric"
        dist = self.scores.get(stage)
        if dist is None:
            raise ScoringError(f"no scores scripted for stage {stage!r}")
        with self._lock:
            self.scored.append(stage)
            self.scored_prompts.append((list(messages), assistant_prefix))
        logprobs = {c: math.log(max(dist.get(c, 0.0), 1e-9)) for c in candidates}
        return NextTokenScores(logprobs=logprobs, prompt_tokens=max(1, len((system + user).split())))

    def complete(self, request: Request) -> Response:
        system = request.system if isinstance(request.system, str | None) else "".join(p.text for p in request.system)
        system = system or ""
        user = "\n".join(m.text or "" for m in request.messages if m.role == "user")
        stage = identify_stage(system, user)
        call = ScriptedCall(stage=stage, system=system, user=user)
        with self._lock:
            self.calls.append(call)
        value = self.script.get(stage)
        if value is None:
            raise KeyError(f"ScriptedEngine has no reply for stage {stage!r}")
        if callable(value) and not isinstance(value, BaseException):
            value = value(call)
        if isinstance(value, BaseException):
            raise value
        text = value if isinstance(value, str) else format_chat_reply(value)
        return Response(
            id=None,
            model="scripted",
            message=Message.assistant([TextPart(text)]),
            finish_reason="stop",
            usage=Usage(input_tokens=max(1, len((system + user).split())), output_tokens=max(1, len(text.split()))),
        )

    def close(self) -> None:
        return None

    def __deepcopy__(self, memo: dict[int, object]) -> ScriptedEngine:
        return self

    def stages(self) -> list[str]:
        return [call.stage for call in self.calls]


class _AsyncScriptedEngine:
    def __init__(self, sync: ScriptedEngine) -> None:
        self.sync = sync

    async def complete(self, request: Request) -> Response:
        return self.sync.complete(request)

    async def aclose(self) -> None:
        return None


def scripted_lm(
    script: dict[str, ScriptValue], *, model: str = "local/scripted", scores: dict[str, dict[str, float]] | None = None
) -> tuple[dspy.LM, ScriptedEngine]:
    """A non-caching dspy.LM answering from `script` (and scoring options from `scores`), and its engine."""
    engine = ScriptedEngine(script=dict(script), scores=dict(scores or {}))
    lm = dspy.LM(model, engine=engine, async_engine=_AsyncScriptedEngine(engine), cache=False, num_retries=0)
    return lm, engine


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
}
AUDIT_ALL_TRUE = {
    "rationale": "r",
    "clearly_supports_challenger": True,
    "aligned_with_question": True,
    "supports_exact_option": True,
    "default_not_better_supported": True,
    "no_unresolved_conflict": True,
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
