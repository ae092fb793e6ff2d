"""A canned LM that answers any signature: the scripted CLEAR stages, and a schema echo for everything else.

DSPy's DummyLM cannot drive prompt-proposing optimizers (MIPROv2's proposer, GEPA's reflection, SIMBA's
rule writer): their signatures are unknown to a script. `EchoEngine` answers the CLEAR stages named in its
script like `clearmed.testing.ScriptedEngine`, and any other call by echoing the output fields its system
prompt declares, with a placeholder of the declared type, in JSON when the prompt is a JSONAdapter prompt.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import dspy
from dspy.lm15 import Message, Request, Response, TextPart, Usage

from clearmed.testing import ScriptedCall, ScriptValue, format_chat_reply, identify_stage

_FIELD = re.compile(r"^\d+\. `(\w+)` \((.*)\):", re.MULTILINE)
_INSTRUCTION = "Weigh every source of evidence carefully and answer exactly in the requested format."


def declared_outputs(system: str) -> list[tuple[str, str]]:
    """(name, type) of each output field named under "Your output fields are:"."""
    start = system.find("Your output fields are:")
    if start < 0:
        return []
    end = system.find("All interactions will be structured", start)
    return _FIELD.findall(system[start : end if end > 0 else None])


def placeholder(name: str, type_text: str, overrides: Mapping[str, object]) -> object:
    if name in overrides:
        return overrides[name]
    if type_text.startswith("Literal["):
        options = re.findall(r"'([^']*)'", type_text)
        return options[0] if options else ""
    if type_text == "bool":
        return True
    if type_text == "int":
        return 1
    if type_text == "float":
        return 0.5
    if type_text.startswith(("list", "tuple")):
        return []
    if type_text.startswith("dict"):
        return {}
    return _INSTRUCTION if "instruction" in name else f"{name} (echo)"


@dataclass
class EchoEngine:
    """A DSPy engine: scripted replies for known stages, schema echoes for the rest; every call recorded."""

    script: dict[str, ScriptValue] = field(default_factory=dict)
    overrides: dict[str, object] = field(default_factory=dict)
    calls: list[ScriptedCall] = field(default_factory=list)
    serializes_calls: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _reply(self, call: ScriptedCall, json_mode: bool) -> str:
        value = self.script.get(call.stage)
        if value is None:
            fields = {name: placeholder(name, kind, self.overrides) for name, kind in declared_outputs(call.system)}
            return json.dumps(fields) if json_mode else format_chat_reply(fields)
        if callable(value) and not isinstance(value, BaseException):
            value = value(call)
        if isinstance(value, BaseException):
            raise value
        return value if isinstance(value, str) else format_chat_reply(value)

    def complete(self, request: Request) -> Response:
        system = request.system if isinstance(request.system, str | None) else "".join(p.text for p in request.system)
        system = system or ""
        # The last user turn is the live question; earlier ones are demos.
        users = [m.text or "" for m in request.messages if m.role == "user"]
        user = "\n".join(users)
        call = ScriptedCall(stage=identify_stage(system, user), system=system, user=user)
        with self._lock:
            self.calls.append(call)
        json_mode = "Outputs will be a JSON object" in system or "Respond with a JSON object" in (users[-1:] or [""])[0]
        text = self._reply(call, json_mode)
        return Response(
            id=None,
            model="echo",
            message=Message.assistant([TextPart(text)]),
            finish_reason="stop",
            usage=Usage(input_tokens=max(1, len((system + user).split())), output_tokens=max(1, len(text.split()))),
        )

    def close(self) -> None:
        return None

    def __deepcopy__(self, memo: dict[int, object]) -> EchoEngine:
        return self  # optimizers deep-copy programs; the call record must stay one

    def stages(self) -> list[str]:
        return [call.stage for call in self.calls]


class _AsyncEchoEngine:
    def __init__(self, sync: EchoEngine) -> None:
        self.sync = sync

    async def complete(self, request: Request) -> Response:
        return self.sync.complete(request)

    async def aclose(self) -> None:
        return None

    def __deepcopy__(self, memo: dict[int, object]) -> _AsyncEchoEngine:
        return self


def echo_lm(
    script: dict[str, ScriptValue] | None = None,
    *,
    overrides: dict[str, object] | None = None,
    model: str = "local/echo",
) -> tuple[dspy.LM, EchoEngine]:
    """A non-caching dspy.LM backed by an `EchoEngine`, and the engine (for call assertions)."""
    engine = EchoEngine(script=dict(script or {}), overrides=dict(overrides or {}))
    lm = dspy.LM(model, engine=engine, async_engine=_AsyncEchoEngine(engine), cache=False, num_retries=0)
    return lm, engine
