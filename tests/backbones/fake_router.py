"""A fake LiteLLM proxy (its Router) on 127.0.0.1 in front of OpenAI-compatible replicas, for tests of serving across
machines. It does what LiteLLM's proxy documents and what clearmed meets of it:

- one ``model_name`` (the alias clients ask for) over several deployments; each request goes to the next deployment
  not in cooldown (round-robin: LiteLLM's default ``simple-shuffle`` is a weighted random pick, round-robin keeps the
  split here deterministic), with the deployment's own model name and key: the proxy's key never reaches a replica;
- a deployment answering 429 is put in cooldown (``cooldown_s``) and the request retried on another (``num_retries``);
  with every deployment cooling down, the proxy's own 429: ``No deployments available for selected model, Try again
  in N seconds``, with no ``Retry-After`` header (LiteLLM issue #27823); a 5xx is retried without a cooldown;
- errors in the OpenAI shape LiteLLM gives them: ``{"error": {"message", "type", "param", "code"}}``, the code the
  status as a string; a wrong proxy key is 401 ``auth_error``; an unknown model alias is 400;
- ``GET /v1/models`` lists the aliases only (``id``, ``object``, ``created``, ``owned_by``: no ``max_model_len``), or
  is hidden (``models="hidden"``: 404); routes it does not serve (``/props``, ``/tokenize``) are FastAPI's 404
  ``{"detail": "Not Found"}``;
- fields of the request it forwards as they came, OpenAI's and non-OpenAI ones alike (``continue_final_message``,
  ``add_generation_prompt``: LiteLLM passes a non-OpenAI param on to the provider in the body), except those named in
  ``drop_params`` (``drop_params`` / ``additional_drop_params`` in its config, or a deployment without log-probabilities:
  ``("logprobs", "top_logprobs")``).

`LogprobReplica` is the reliability suite's `FakeOpenAI` (the gold for every CLEAR stage) that also returns the first
token's ``top_logprobs`` when asked, as vLLM does, within vLLM's limit of 20.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import requests

from clearmed.testing import JsonHandler, QuietHTTPServer
from tests.reliability.fakes import FakeOpenAI

MAX_TOP_LOGPROBS = 20  # vLLM's default --max-logprobs


def litellm_error(status: int, message: str, kind: str = "None") -> dict[str, Any]:
    """An error as LiteLLM's proxy shapes it (``ProxyException``): the status as a string code, "None" strings."""
    return {"error": {"message": message, "type": kind, "param": "None", "code": str(status)}}


class FakeLiteLLMRouter:
    def __init__(
        self,
        replicas: Sequence[str],
        *,
        model_name: str = "clear-backbone",
        served_model: str = "m",
        master_key: str | None = "sk-proxy-master-0123",
        replica_key: str = "replica-key",
        num_retries: int = 2,
        cooldown_s: float = 5.0,
        models: Literal["list", "hidden"] = "list",
        drop_params: tuple[str, ...] = (),
    ) -> None:
        self.replicas = list(replicas)
        self.model_name, self.served_model = model_name, served_model
        self.master_key, self.replica_key = master_key, replica_key
        self.num_retries, self.cooldown_s = num_retries, cooldown_s
        self.models, self.drop_params = models, drop_params
        self.forwarded: Counter[str] = Counter()  # requests sent to each replica
        self.cooldowns: Counter[str] = Counter()  # times each replica was put in cooldown
        self.answered: Counter[int] = Counter()  # the statuses the router answered with
        self._cooling: dict[str, float] = {}
        self._next = itertools.cycle(range(len(self.replicas)))
        self._lock = threading.Lock()
        owner = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                owner._get(self)

            def do_POST(self) -> None:
                owner._post(self)

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeLiteLLMRouter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------- serving

    def _send(self, handler: JsonHandler, status: int, payload: object) -> None:
        with self._lock:
            self.answered[status] += 1
        handler.send_json(status, payload)

    def _authorized(self, handler: JsonHandler) -> bool:
        if self.master_key is None or handler.headers.get("Authorization") == f"Bearer {self.master_key}":
            return True
        message = "Authentication Error, Invalid proxy server token passed. Received API Key = sk-...***"
        self._send(handler, 401, litellm_error(401, message, "auth_error"))
        return False

    def _get(self, handler: JsonHandler) -> None:
        if handler.path.rstrip("/") not in ("/v1/models", "/models") or self.models == "hidden":
            return self._send(handler, 404, {"detail": "Not Found"})
        if self._authorized(handler):
            entry = {"id": self.model_name, "object": "model", "created": 1677610602, "owned_by": "openai"}
            self._send(handler, 200, {"data": [entry], "object": "list"})

    def _post(self, handler: JsonHandler) -> None:
        body = json.loads(handler.rfile.read(int(handler.headers.get("Content-Length") or 0)) or b"{}")
        if handler.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            return self._send(handler, 404, {"detail": "Not Found"})
        if not self._authorized(handler):
            return None
        if body.get("model") != self.model_name:
            message = (
                f"Invalid model name passed in model={body.get('model')}. Call `/v1/models` to view available models"
            )
            return self._send(handler, 400, litellm_error(400, message))
        forwarded = {k: v for k, v in body.items() if k not in self.drop_params} | {"model": self.served_model}
        status, payload = self._route(forwarded)
        self._send(handler, status, payload)

    def _pick(self) -> str | None:
        """The next replica not cooling down, round-robin; None when every one is."""
        with self._lock:
            now = time.monotonic()
            for _ in self.replicas:
                replica = self.replicas[next(self._next)]
                if self._cooling.get(replica, 0.0) <= now:
                    return replica
        return None

    def _route(self, body: Mapping[str, Any]) -> tuple[int, object]:
        """The first reply of a deployment that is not a 429 or a 5xx, retried on the next deployment otherwise."""
        last: tuple[int, object] = (500, litellm_error(500, "litellm.APIError: no deployment was tried"))
        for _ in range(self.num_retries + 1):
            replica = self._pick()
            if replica is None:
                message = (
                    f"No deployments available for selected model, Try again in {self.cooldown_s:g} seconds. "
                    f"Passed model={self.model_name}. pre-call-checks=False, cooldown_list={sorted(self._cooling)}"
                )
                return 429, litellm_error(429, message)
            with self._lock:
                self.forwarded[replica] += 1
            try:
                reply = requests.post(
                    f"{replica}/chat/completions",
                    json=body,
                    headers={"Authorization": f"Bearer {self.replica_key}"},
                    timeout=30,
                )
            except requests.RequestException as exc:  # a replica down: LiteLLM's APIConnectionError, cooled down
                self._cool(replica)
                last = 500, litellm_error(500, f"litellm.APIConnectionError: {type(exc).__name__}")
                continue
            payload = reply.json() if reply.content else {}
            if reply.status_code == 200:
                return 200, payload
            last = (
                reply.status_code,
                litellm_error(reply.status_code, f"litellm.APIError: OpenAIException - {_message(payload)}"),
            )
            if reply.status_code == 429:
                self._cool(replica)
            elif reply.status_code < 500:  # a request the deployment refuses: no other one would take it
                return last
        return last

    def _cool(self, replica: str) -> None:
        with self._lock:
            self._cooling[replica] = time.monotonic() + self.cooldown_s
            self.cooldowns[replica] += 1


def _message(payload: object) -> str:
    error = payload.get("error", payload) if isinstance(payload, dict) else payload
    return str(error.get("message", error) if isinstance(error, dict) else error)


class LogprobReplica(FakeOpenAI):
    """`FakeOpenAI` that returns the first token's ``top_logprobs`` when asked (the gold letter most likely), and
    refuses more than vLLM's 20 with vLLM's 400."""

    def _reply(self, handler: Any, body: dict[str, Any], auth: str, stage: str) -> None:
        if int(body.get("top_logprobs") or 0) > MAX_TOP_LOGPROBS:
            message = f"Requested sample logprobs of {body['top_logprobs']}, which is greater than max allowed: 20"
            error = {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}
            return handler._send(400, {"Content-Type": "application/json"}, json.dumps(error).encode())
        return super()._reply(handler, body, auth, stage)

    def _completion(self, body: Mapping[str, Any], stage: str) -> dict[str, Any]:
        reply = super()._completion(body, stage)
        if body.get("logprobs"):
            user = "\n".join(str(m.get("content") or "") for m in body.get("messages") or [] if m.get("role") == "user")
            gold = self._gold_for(user)[0]
            top = [{"token": letter, "logprob": -0.05 if letter == gold else -4.0} for letter in "ABCD"]
            first = {"token": gold, "logprob": -0.05, "top_logprobs": top[: int(body.get("top_logprobs") or 0)]}
            reply["choices"][0]["logprobs"] = {"content": [first]}
            reply["choices"][0]["message"]["content"] = gold
        return reply
