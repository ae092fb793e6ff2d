"""Next-token scoring: the probability a model gives each candidate continuation, in one forward pass.

A small model asked to *write* an option letter loses most of what it knows (it favours "B", wraps the
letter in prose, or reasons itself out of its first guess); the distribution of its next token after the
prompt's own answer marker keeps it. Backbones that expose token log-probabilities implement `TokenScorer`:

- the embedded llama.cpp engine (`LlamaCppEngine.score_next_token`), from the logits directly;
- OpenAI-compatible servers that open (or continue) the assistant turn and return ``top_logprobs`` (vLLM,
  SGLang), through `OpenAICompatibleScorer`.

A candidate is given in its lowest case ("A", "yes") and is read in every spelling a next token may take
(`spellings`): Qwen2's vocabulary has separate ``yes``, ``Yes``, `` Yes`` and ``YES`` tokens, and a chat model
answers "Yes". Non-finite log-probabilities (a NaN, or no candidate with any probability) are a `ScoringError`, never
a distribution of NaNs.

Hosted chat models without log-probabilities have no scorer: callers generate instead. `token_scorer` finds an LM's
scorer and traces its passes as the LM's calls (`TracedScorer`), so DSPy's callbacks see every call a program makes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
from dspy.utils.callback import with_callbacks
from pydantic import BaseModel, ConfigDict, Field, model_validator

from clearmed.backbones.batch_calls import served_reply
from clearmed.core.errors import FatalServiceError
from clearmed.core.http import RETRIED_STATUS, NoReply, Reply, after_retries, fatal_cause, request

__all__ = [
    "MAX_TOP_LOGPROBS",
    "EndpointCapabilities",
    "NextTokenScores",
    "OpenAICompatibleScorer",
    "ScoringError",
    "TokenScorer",
    "TracedScorer",
    "candidate_logprobs",
    "probe_capabilities",
    "spellings",
    "token_scorer",
]

ChatMessage = dict[str, str]
# vLLM's default --max-logprobs; a larger top_logprobs is refused with HTTP 400.
MAX_TOP_LOGPROBS: Final = 20
# Log-probability assumed for a candidate absent from a server's top list: below everything it did list.
_ABSENT_MARGIN: Final = 2.0


class ScoringError(RuntimeError):
    """The backbone could not score (no log-probabilities, a server error); callers fall back to generation.
    ``transient``: a failure that was retried and could pass on another day (a rate limit, a server error, a timeout,
    a 200 with no reply in it), as against a server that cannot score this at all."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class NextTokenScores(BaseModel):
    """Log-probabilities (over the whole vocabulary) of each candidate's first token, and what it cost.

    Built only from usable scores: a NaN or +inf, or no candidate with a finite log-probability (nothing to
    renormalise), raises `ScoringError` here, so the caller generates instead of recording NaNs. A single
    candidate at -inf is fine: the model gave it no probability."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    logprobs: dict[str, float]
    prompt_tokens: int = Field(default=0, ge=0)
    seconds: float = Field(default=0.0, ge=0.0)

    @model_validator(mode="after")
    def _finite(self) -> NextTokenScores:
        # ScoringError is not a ValueError, so pydantic raises it as is rather than as a ValidationError.
        broken = {k: v for k, v in self.logprobs.items() if math.isnan(v) or v == math.inf}
        if broken:
            raise ScoringError(f"non-finite log-probabilities: {_listing(broken)}")
        if not any(math.isfinite(v) for v in self.logprobs.values()):
            raise ScoringError(f"no candidate has a finite log-probability: {_listing(self.logprobs) or 'none'}")
        return self

    @property
    def mass(self) -> float:
        """Probability the model put on the candidates at all (low: it wanted to write something else)."""
        return float(sum(math.exp(v) for v in self.logprobs.values()))

    def distribution(self) -> dict[str, float]:
        """The candidates' probabilities renormalised to sum to one."""
        values = np.array(list(self.logprobs.values()), dtype=float)
        weights = np.exp(values - values.max())
        weights /= weights.sum()
        return {key: float(w) for key, w in zip(self.logprobs, weights, strict=True)}


@runtime_checkable
class TokenScorer(Protocol):
    def score_next_token(
        self, messages: Sequence[ChatMessage], assistant_prefix: str, candidates: Sequence[str]
    ) -> NextTokenScores: ...


def _listing(logprobs: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v}" for k, v in list(logprobs.items())[:8])


def spellings(candidate: str) -> tuple[str, ...]:
    """The next-token texts that write ``candidate``: as given, Capitalised and in capitals, each also after a space.

    A candidate is given in its lowest case: "yes" is read as yes/Yes/YES (and " Yes" ...), a letter "A" as "A" and
    " A" only (never the article "a")."""
    forms = dict.fromkeys((candidate, candidate.capitalize(), candidate.upper()))
    return tuple(f"{space}{form}" for form in forms for space in ("", " "))


def candidate_logprobs(
    log_probs: Mapping[int, float] | np.ndarray, token_variants: Mapping[str, Sequence[int]]
) -> dict[str, float]:
    """Each candidate's log-probability: the sum over its token variants ("A" and " A" are different tokens)."""
    out: dict[str, float] = {}
    for candidate, ids in token_variants.items():
        values = [float(log_probs[i]) for i in dict.fromkeys(ids)]
        out[candidate] = float(np.logaddexp.reduce(values)) if values else -math.inf
    return out


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - float(np.max(logits))
    return shifted - math.log(float(np.exp(shifted).sum()))


class OpenAICompatibleScorer:
    """Scoring through ``/chat/completions`` on a server that renders the chat with the model's template.

    vLLM's (and SGLang's) documented rule decides where the next token is read:

    - with an assistant prefix: the prefix as a final assistant message, ``continue_final_message: true`` and
      ``add_generation_prompt: false``; the template's end of turn is cut, so the prompt ends inside the open turn;
    - without one: no assistant message and ``add_generation_prompt: true``. (An empty final message would be
      rendered as a *closed* turn, ``<|im_start|>assistant\n<|im_end|>\n``, and the token read after it.)

    The server returns the first generated token's ``top_logprobs``. A candidate outside the top list gets a
    log-probability just below the smallest one listed; when none is listed at all there is nothing to read (a
    uniform guess would be a silent wrong answer), so that is a `ScoringError`.

    Failures follow the LM client's policy (`backbones.failures`): a rate limit, a server error, a timeout (the
    ``timeout`` bounds each attempt in total, as for a call: `deadlines.bounded_call`) or a 200 without a reply is retried
    ``num_retries`` times with clearmed's backoff, each retry counted as an LM retry, then raised as a transient
    `ScoringError`; a refused key, an exhausted balance or a missing model is a `FatalServiceError` naming ``service``;
    any other refusal is a `ScoringError` at once.
    """

    def __init__(
        self,
        api_base: str,
        model: str,
        api_key: str | None,
        *,
        timeout: float = 60.0,
        num_retries: int = 3,
        service: str = "",
    ) -> None:
        self.url = api_base.rstrip("/") + "/chat/completions"
        self.model = model
        self._api_key = api_key
        self.timeout = timeout
        self.num_retries = num_retries
        self.service = service or f"scoring backbone {model} at {api_base}"

    def score_next_token(
        self, messages: Sequence[ChatMessage], assistant_prefix: str, candidates: Sequence[str]
    ) -> NextTokenScores:
        turn: dict[str, Any]
        if assistant_prefix.strip():
            turn = {
                "messages": [*messages, {"role": "assistant", "content": assistant_prefix}],
                "continue_final_message": True,
                "add_generation_prompt": False,
            }
        elif assistant_prefix:  # the template rule strips it, finds it at the very end, and the turn stays closed
            raise ScoringError("a whitespace-only assistant prefix cannot be continued on an OpenAI-compatible server")
        else:
            turn = {"messages": list(messages), "continue_final_message": False, "add_generation_prompt": True}
        body: dict[str, Any] = {
            "model": self.model,
            **turn,
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": True,
            "top_logprobs": MAX_TOP_LOGPROBS,
        }
        started = time.perf_counter()
        payload = self._post(body)
        try:
            top = payload["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            listed = {str(item["token"]): float(item["logprob"]) for item in top}
            usage = payload.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            raise ScoringError("the server's reply has no top_logprobs for the first token") from None
        if any(math.isnan(v) or v == math.inf for v in listed.values()):
            raise ScoringError(f"the server returned non-finite log-probabilities: {_listing(listed)}")
        found = {c: [listed[v] for v in spellings(c) if v in listed] for c in candidates}
        if not any(found.values()):
            raise ScoringError(
                f"none of {', '.join(candidates)} is among the server's top {len(listed)} next tokens "
                f"({', '.join(map(repr, list(listed)[:5]))} ...)"
            )
        floor = min((v for v in listed.values() if math.isfinite(v)), default=-math.inf) - _ABSENT_MARGIN
        logprobs = {c: float(np.logaddexp.reduce(variants)) if variants else floor for c, variants in found.items()}
        return NextTokenScores(
            logprobs=logprobs,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            seconds=time.perf_counter() - started,
        )

    def _post(self, body: dict[str, Any]) -> Any:
        """The reply's JSON, by the failure policy above (`clearmed.core.http.request`); in a batch run, the reply its
        batch line gave (`batch_calls.served_reply`: a line not answered yet defers the question)."""
        served = served_reply(self.url, body)
        if served is not None:
            return self._payload(Reply(served[0], served[1], json.dumps(served[1]), {}))
        try:
            reply = request(
                "POST",
                self.url,
                api_key=self._api_key,
                timeout=self.timeout,
                body=body,
                retries=self.num_retries,
                want_json=True,
                bounded=True,
                service=self.service,
                final=lambda reply: fatal_cause(reply) is not None,  # no retry mends a refused key or balance
            )
        except NoReply as failed:
            raise ScoringError(
                f"scoring request failed: {failed.why}{after_retries(failed.retries)}", transient=True
            ) from None
        return self._payload(reply)

    def _payload(self, reply: Reply) -> Any:
        """A reply's JSON, or the failure it is by the policy above."""
        if reply.status == 200 and reply.payload is not None:
            return reply.payload
        if reply.status == 200:
            why = "the server's 200 reply is not JSON (a proxy's page, or a cut-off body)"
            raise ScoringError(why + after_retries(reply.retries), transient=True)
        text = reply.error_text()
        if self._api_key:
            text = text.replace(self._api_key, "***")
        cause = fatal_cause(reply)
        if cause is not None:
            raise FatalServiceError(self.service, cause, text, status=reply.status)
        why = f"scoring request answered HTTP {reply.status}: {text}"
        if reply.status not in RETRIED_STATUS:
            raise ScoringError(why)
        raise ScoringError(why + after_retries(reply.retries), transient=True)


def token_scorer(lm: Any) -> TracedScorer | None:
    """The scorer behind a `dspy.LM`, its passes traced as the LM's calls (`TracedScorer`), or None when its backend
    exposes no log-probabilities."""
    inner = _backend_scorer(lm)
    return TracedScorer(lm, inner) if inner is not None else None


def _backend_scorer(lm: Any) -> TokenScorer | None:
    engine = getattr(lm, "engine", None)
    if isinstance(engine, TokenScorer):
        return engine
    kwargs = getattr(lm, "kwargs", {}) or {}
    model = str(getattr(lm, "model", ""))
    if model.startswith("openai/") and kwargs.get("api_base"):
        key = kwargs.get("api_key")
        retries = getattr(lm, "max_retries", getattr(lm, "num_retries", 3))
        return OpenAICompatibleScorer(
            str(kwargs["api_base"]),
            model.removeprefix("openai/"),
            None if key in (None, "none") else str(key),
            timeout=float(kwargs.get("timeout") or 60.0),
            num_retries=retries if isinstance(retries, int) else 3,
            service=str(getattr(lm, "service", "") or ""),
        )
    return None


class TracedScorer:
    """``scorer``'s passes, each seen by DSPy's callbacks as a call of ``lm``: `dspy.utils.callback.with_callbacks`
    wraps it as it wraps `dspy.LM.__call__`, so the callbacks of ``dspy.settings.callbacks`` and of the LM's own
    ``callbacks`` (a `BaseCallback`, ``mlflow.dspy.autolog()``) trace a scored answer as they trace a generated one.

    ``on_lm_start`` gets the LM and DSPy's input shape: ``prompt`` (None), ``messages`` (the chat, the assistant prefix
    as its final turn) and ``kwargs`` (``max_tokens`` 1, ``logprobs``, the ``candidates``); ``on_lm_end`` a list of one
    completion, the most probable candidate as its ``text`` with every candidate's ``logprobs`` and ``cache_hit``
    (False here), or the exception. A pass served from clearmed's scoring cache is reported the same way by
    `announce_cached`, marked ``cache_hit: True`` (issue 58: a warm cache hid scored calls from the callbacks while
    cached generated calls still reached them, so a tracer's count depended on the decoding mode)."""

    def __init__(self, lm: Any, scorer: TokenScorer) -> None:
        self.lm = lm
        self.scorer = scorer

    def score_next_token(
        self, messages: Sequence[ChatMessage], assistant_prefix: str, candidates: Sequence[str]
    ) -> NextTokenScores:
        scorer, chat = self.scorer, list(messages)
        scored: list[NextTokenScores] = []

        def run() -> dict[str, float]:
            result = scorer.score_next_token(chat, assistant_prefix, candidates)
            scored.append(result)
            return dict(result.logprobs)

        self._traced(chat, assistant_prefix, candidates, run, cache_hit=False)
        return scored[0]

    def announce_cached(
        self,
        messages: Sequence[ChatMessage],
        assistant_prefix: str,
        candidates: Sequence[str],
        logprobs: Mapping[str, float],
    ) -> None:
        """Report a pass the scoring cache answered (nothing reached the backend) as the call it stands for."""
        self._traced(list(messages), assistant_prefix, candidates, lambda: dict(logprobs), cache_hit=True)

    def _traced(
        self,
        chat: list[ChatMessage],
        assistant_prefix: str,
        candidates: Sequence[str],
        run: Callable[[], dict[str, float]],
        *,
        cache_hit: bool,
    ) -> None:
        # Named and shaped as `dspy.LM.__call__` (``self``, ``prompt``, ``messages``, ``**kwargs``): `with_callbacks`
        # reports its arguments but ``self`` as the call's inputs.
        @with_callbacks
        def __call__(self: Any, prompt: Any = None, messages: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
            logprobs = run()
            best = max(logprobs, key=logprobs.__getitem__)
            return [{"text": best, "logprobs": logprobs, "cache_hit": cache_hit}]

        shown = [*chat, {"role": "assistant", "content": assistant_prefix}] if assistant_prefix else chat
        __call__(self.lm, messages=shown, max_tokens=1, logprobs=True, candidates=list(candidates))


class EndpointCapabilities(BaseModel):
    """What an OpenAI-compatible endpoint does of what `OpenAICompatibleScorer` needs; a note says why not (or, when
    the endpoint could not be asked, the value is None)."""

    model_config = ConfigDict(extra="forbid")

    logprobs: bool | None
    logprobs_note: str = ""
    continues_message: bool | None
    continue_note: str = ""


_PROBE_QUESTION: Final = [{"role": "user", "content": "Answer with one letter: A or B?"}]


def probe_capabilities(
    api_base: str, model: str, api_key: str | None, *, timeout: float = 30.0
) -> EndpointCapabilities:
    """Two one-token requests: does the endpoint return ``top_logprobs`` (``logprobs: true, top_logprobs: 5``), and
    does it take a final assistant message to continue (``continue_final_message: true, add_generation_prompt:
    false``, vLLM's and SGLang's fields)? A server that ignores unknown fields (OpenAI, llama.cpp's server) also
    answers the second with 200, so "accepted" means "not refused"; the first is checked in the reply itself."""
    url = api_base.rstrip("/") + "/chat/completions"
    base: dict[str, Any] = {"model": model, "max_tokens": 1, "temperature": 0.0}

    def ask(body: dict[str, Any]) -> Reply | str:
        try:  # one request each, no retries: a report of what the endpoint does now
            return request("POST", url, api_key=api_key, timeout=timeout, body={**base, **body}, retried=frozenset())
        except NoReply as failed:
            return f"request failed: {failed.why}"

    answer = ask({"messages": _PROBE_QUESTION, "logprobs": True, "top_logprobs": 5})
    logprobs, logprobs_note = _refusal(answer)
    if logprobs is True and isinstance(answer, Reply):  # answered: is the list there?
        try:
            top = answer.payload["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            logprobs, logprobs_note = bool(top), f"{len(top)} top tokens" if top else "an empty top_logprobs list"
        except (KeyError, IndexError, TypeError):
            logprobs, logprobs_note = False, "the reply has no top_logprobs"
    turn = [*_PROBE_QUESTION, {"role": "assistant", "content": "The answer is"}]
    continues, continue_note = _refusal(
        ask({"messages": turn, "continue_final_message": True, "add_generation_prompt": False})
    )
    if api_key:  # a server may quote the request's key in its error text; the notes are printed
        logprobs_note, continue_note = (note.replace(api_key, "***") for note in (logprobs_note, continue_note))
    return EndpointCapabilities(
        logprobs=logprobs, logprobs_note=logprobs_note, continues_message=continues, continue_note=continue_note
    )


def _refusal(answer: Reply | str) -> tuple[bool | None, str]:
    """(True, "") for an HTTP 200; (False, why) for a refusal; (None, why) when the request itself failed."""
    if isinstance(answer, str):
        return None, answer
    if answer.status != 200:
        return False, f"HTTP {answer.status}: {answer.error_text()}"
    return True, ""
