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
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import dspy
from dspy.lm15 import Message, Request, Response, TextPart, Usage

from clearmed.backbones.logprobs import NextTokenScores, ScoringError

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


# An evidence prompt whose question field is empty (evidence binding's passage-only pass).
_NO_QUESTION = re.compile(r"\[\[ ## question ## \]\]\s*\[\[ ## ")


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
        if has_evidence and _NO_QUESTION.search(user):  # the binding pass: the question field left empty
            stage = stage.replace("_answer", "_binding")
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
