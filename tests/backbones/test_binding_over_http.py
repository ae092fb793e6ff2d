"""Evidence binding on a server that returns log-probabilities (issue 56 item 5): a CLEAR question through
``/chat/completions`` as vLLM renders and answers it (top_logprobs of the first token, the assistant turn continued
after the answer marker), every answer scored, the disputed question's two passage-only passes sent and recorded, and
the binding term pooled from them, with no generated call."""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator
from typing import Any

import dspy
import pytest

from clearmed.signatures.records import Thresholds
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, JsonHandler, QuietHTTPServer, build_toy_program, label_all

from .conftest import logprob_completion, render_as_vllm

KEY = "sk-binding-0123456789"
ANSWER_OPEN = "<|im_start|>assistant\n[[ ## answer ## ]]\n"
# The next token's top log-probabilities by prompt: the parametric and local prompts lean A, the web's C; with the
# question removed, the local passages lean A harder (they name it whatever is asked), the web pages less on C.
TOPS = {
    "parametric": {"A": -0.5, "B": -1.9, "C": -1.9, "D": -2.5},
    "local": {"A": -0.4, "B": -2.3, "C": -2.3, "D": -2.3},
    "dynamic": {"C": -0.06, "A": -3.9, "B": -3.9, "D": -3.9},
    "local_binding": {"A": -0.1, "B": -3.5, "C": -3.2, "D": -3.5},
    "dynamic_binding": {"C": -0.36, "A": -2.3, "B": -2.3, "D": -2.3},
}
NO_QUESTION = re.compile(r"\[\[ ## question ## \]\]\s*\[\[ ## ")


class ScoringServer:
    """vLLM's chat completions for scoring: the chat rendered by the model's template under vLLM's rules (a request it
    cannot render -> 400), ``top_logprobs`` above 20 -> 400, and a first-token top list chosen by what the rendered
    prompt holds (which pathway's evidence, and whether its question field is empty); a prompt that does not end
    inside the open answer turn gets a new turn's token, as a model's would."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        owner = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self.send_json(401, {"error": "Unauthorized"})
                if not body.get("logprobs") or body.get("top_logprobs", 0) > 20 or body.get("max_tokens") != 1:
                    return self.send_json(400, {"object": "error", "message": "not a scoring request", "code": 400})
                prompt = render_as_vllm(
                    body["messages"],
                    add_generation_prompt=body.get("add_generation_prompt", True),
                    continue_final_message=body.get("continue_final_message", False),
                )
                kind = "parametric"
                if "[L1]" in prompt:
                    kind = "local"
                elif "[W1]" in prompt:
                    kind = "dynamic"
                if kind != "parametric" and NO_QUESTION.search(prompt):
                    kind += "_binding"
                top = TOPS[kind] if prompt.endswith(ANSWER_OPEN) else {"<|im_start|>": -0.01}
                owner.kinds.append(kind)
                self.send_json(200, logprob_completion(body["model"], top, prompt_tokens=300))

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[ScoringServer]:
    fake = ScoringServer()
    yield fake
    fake.close()


def _renormalised(top: dict[str, float]) -> dict[str, float]:
    z = sum(math.exp(v) for k, v in top.items() if k in "ABCD")
    return {k: math.exp(top[k]) / z for k in "ABCD"}


def test_a_disputed_question_is_bound_over_http(server: ScoringServer) -> None:
    settings = ProgramSettings(
        json_fallback=False,
        parallel_pathways="off",
        mcq_decoding="score",
        verifier_mode="calibrated",
        evidence_binding=True,
        enable_guard=False,
        enable_audit=False,
        enable_followup=False,
    )
    thresholds = Thresholds(
        calibrated_parametric_weight=1.0,
        calibrated_local_weight=0.0,
        calibrated_dynamic_weight=0.0,
        calibrated_local_binding=1.0,
        calibrated_dynamic_binding=1.0,
    )
    program, engine, _ = build_toy_program(
        {"source_quality": label_all("high")}, settings=settings, thresholds=thresholds
    )
    program.role_lms["main"] = dspy.LM(
        "openai/Qwen/Qwen2.5-1.5B-Instruct", api_base=server.api_base, api_key=KEY, cache=False, num_retries=0
    )
    decision = program(question=QUESTION).decision
    assert engine.calls == []  # nothing generated
    assert server.kinds == ["parametric", "local", "dynamic", "local_binding", "dynamic_binding"]
    by_pathway = {c.pathway: c for c in decision.bundle.candidates}
    assert by_pathway["local"].passage_only_scores.probs == pytest.approx(
        _renormalised(TOPS["local_binding"]), abs=1e-5
    )
    assert by_pathway["dynamic"].passage_only_scores.probs == pytest.approx(
        _renormalised(TOPS["dynamic_binding"]), abs=1e-5
    )
    # the pool: log p_parametric + sum over the evidence pathways of log p(o | q, P) - log p(o | P)
    s: dict[str, Any] = {
        o: math.log(_renormalised(TOPS["parametric"])[o])
        + sum(
            math.log(_renormalised(TOPS[k])[o]) - math.log(_renormalised(TOPS[f"{k}_binding"])[o])
            for k in ("local", "dynamic")
        )
        for o in "ABCD"
    }
    assert decision.answer.letters == (max(s, key=s.__getitem__),) == ("C",)
    assert decision.route == "accept_dynamic"
