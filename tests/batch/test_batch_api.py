"""The batch API's wire layer (`clearmed.backbones.batch_api`): lines split at the providers' limits, and the OpenAI
client against the fake batch server: a batch submitted, polled and read back by custom_id, and every way it can end
(expired half done, only failures, refused, retried, a refused key)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from clearmed.backbones import batch_openai
from clearmed.backbones.batch_anthropic import AnthropicBatchClient
from clearmed.backbones.batch_api import (
    ANTHROPIC_LIMITS,
    OPENAI_LIMITS,
    BatchLimits,
    BatchLine,
    BatchRejected,
    BatchState,
    BatchUnavailable,
    LineResult,
    batch_client_for,
    encoded_line,
    no_batch_reason,
    split_lines,
)
from clearmed.backbones.batch_openai import OpenAIBatchClient
from clearmed.backbones.config import parse_backbone
from clearmed.core import http as http_client
from clearmed.core.errors import FatalServiceError
from clearmed.core.sanitize import redact_secrets
from tests.batch.fake_anthropic import FakeBatchAnthropic
from tests.batch.fake_batch import FakeBatchOpenAI
from tests.batch.test_fake_batch import chat_body

KEY = "plain-words-as-a-key"  # not shaped like a key: only the client's own replacement hides it
GOLD = {f"Question number {i}?": "ABCD"[i % 4] for i in range(12)}


@pytest.fixture(autouse=True)
def waited(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waited: list[float] = []
    monkeypatch.setattr(http_client, "pause", waited.append)
    monkeypatch.setattr(batch_openai, "pause", waited.append)
    return waited


@pytest.fixture
def lm() -> Iterator[FakeBatchOpenAI]:
    with FakeBatchOpenAI(gold=GOLD, api_key=KEY, advance_per_poll=1) as server:
        yield server


def lines_for(lm: FakeBatchOpenAI, count: int, *, model: str = "gpt-test") -> list[BatchLine]:
    url = f"{lm.api_base}/chat/completions"
    return [
        BatchLine(custom_id=f"q{i:02d}", url=url, body=chat_body(f"Question number {i}?", model=model))
        for i in range(count)
    ]


def client(lm: FakeBatchOpenAI, *, key: str = KEY, retries: int = 2) -> OpenAIBatchClient:
    return OpenAIBatchClient(lm.api_base, key, timeout=10.0, num_retries=retries, service="test batch API")


def finished(api: OpenAIBatchClient, state: BatchState) -> BatchState:
    for _ in range(10):
        if state.terminal:
            return state
        state = api.status(state.id)
    raise AssertionError(f"batch still {state.status}")


def answer_of(body: dict[str, Any] | None) -> str:
    assert body is not None
    content = str(body["choices"][0]["message"]["content"])
    return content.split("[[ ## answer ## ]]\n")[1].split("\n")[0]


# --------------------------------------------------------------------------------------------- split_lines


def line(
    custom_id: str, *, model: str = "m", url: str = "https://api.openai.com/v1/chat/completions", pad: int = 0
) -> BatchLine:
    return BatchLine(custom_id=custom_id, url=url, body={"model": model, "messages": [], "pad": "x" * pad})


def ids(batches: list[list[BatchLine]]) -> list[list[str]]:
    return [[item.custom_id for item in batch] for batch in batches]


def test_split_cuts_at_max_requests_and_keeps_the_order() -> None:
    lines = [line(f"l{i}") for i in range(7)]
    assert ids(split_lines(lines, BatchLimits(max_requests=3, max_bytes=10**6))) == [
        ["l0", "l1", "l2"],
        ["l3", "l4", "l5"],
        ["l6"],
    ]
    assert len(split_lines(lines[:3], BatchLimits(max_requests=3, max_bytes=10**6))) == 1  # on the limit: one batch


def test_split_cuts_at_max_bytes_of_the_encoded_lines() -> None:
    lines = [line(f"l{i}", pad=100) for i in range(3)]
    size = len(encoded_line(lines[0], "openai"))
    assert all(len(encoded_line(item, "openai")) == size for item in lines)
    assert ids(split_lines(lines, BatchLimits(max_requests=100, max_bytes=2 * size))) == [["l0", "l1"], ["l2"]]
    assert ids(split_lines(lines, BatchLimits(max_requests=100, max_bytes=2 * size - 1))) == [["l0"], ["l1"], ["l2"]]


def test_the_counted_bytes_are_the_uploaded_file(lm: FakeBatchOpenAI) -> None:
    lines = lines_for(lm, 3)
    state = client(lm).submit(lines, metadata={})
    uploaded = lm.files[lm.batches[state.id].input_file_id][1]
    assert len(uploaded) == sum(len(encoded_line(item, "openai")) for item in lines)
    assert [json.loads(raw)["url"] for raw in uploaded.splitlines()] == ["/v1/chat/completions"] * 3


def test_split_groups_by_endpoint_and_model() -> None:
    other_url = "https://api.openai.com/v1/completions"
    lines = [line("a1"), line("b1", model="m2"), line("c1", url=other_url), line("a2"), line("b2", model="m2")]
    assert ids(split_lines(lines, OPENAI_LIMITS)) == [["a1", "a2"], ["b1", "b2"], ["c1"]]


def test_a_line_over_the_byte_limit_alone_is_refused_in_one_line() -> None:
    big = line("big", pad=500)
    size = len(encoded_line(big, "openai"))
    assert ids(split_lines([big], BatchLimits(max_requests=10, max_bytes=size))) == [["big"]]
    with pytest.raises(ValueError, match="big") as refused:
        split_lines([line("ok"), big], BatchLimits(max_requests=10, max_bytes=size - 1))
    assert "\n" not in str(refused.value)


def test_a_custom_id_twice_for_one_model_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        split_lines([line("a"), line("a")], OPENAI_LIMITS)
    assert len(split_lines([line("a"), line("a", model="m2")], OPENAI_LIMITS)) == 2  # other files: allowed


def test_anthropic_lines_count_their_json_envelope() -> None:
    lines = [line(f"l{i}", pad=50) for i in range(2)]
    requests = [{"custom_id": item.custom_id, "params": item.body} for item in lines]
    whole = len(json.dumps({"requests": requests}, separators=(",", ":")))
    assert len(split_lines(lines, BatchLimits(max_requests=9, max_bytes=whole, line_form="anthropic"))) == 1
    assert len(split_lines(lines, BatchLimits(max_requests=9, max_bytes=whole - 1, line_form="anthropic"))) == 2


def test_the_limits_are_the_documented_ones() -> None:
    # OpenAI: "up to 50,000 requests, and can be up to 200 MB in size" (API reference, batch create, input_file_id).
    assert (OPENAI_LIMITS.max_requests, OPENAI_LIMITS.max_bytes) == (50_000, 209_715_200)
    # Anthropic: "100,000 Message requests or 256 MB in size, whichever is reached first" (batch processing guide).
    assert (ANTHROPIC_LIMITS.max_requests, ANTHROPIC_LIMITS.max_bytes) == (100_000, 268_435_456)


def test_a_custom_id_takes_the_providers_common_form() -> None:
    assert BatchLine(custom_id="a" * 64, url="u", body={}).custom_id == "a" * 64
    for bad in ("a" * 65, "", "has space", "dot.ted"):
        with pytest.raises(ValueError, match="custom_id"):
            BatchLine(custom_id=bad, url="u", body={})


# --------------------------------------------------------------------------------------------- the OpenAI client


def test_a_batch_is_submitted_polled_and_read_back_by_custom_id(lm: FakeBatchOpenAI) -> None:
    api = client(lm)
    lines = lines_for(lm, 12)
    state = api.submit(lines, metadata={"run": "r1", "pass": "2"})
    assert (state.provider, state.status) == ("openai", "validating")
    assert lm.created_batches[0].metadata == {"run": "r1", "pass": "2"}
    seen = [state.status]
    while not state.terminal:
        state = api.status(state.id)
        seen.append(state.status)
    assert seen == ["validating", "in_progress", "finalizing", "completed"]
    assert state.request_counts.model_dump() == {"total": 12, "completed": 12, "failed": 0}
    results = api.results(state)
    assert [r.custom_id for r in results] != [item.custom_id for item in lines]  # the fake shuffled them
    by_id = {r.custom_id: r for r in results}
    assert sorted(by_id) == [item.custom_id for item in lines]
    for i, item in enumerate(lines):
        assert by_id[item.custom_id].ok
        assert answer_of(by_id[item.custom_id].body) == "ABCD"[i % 4]  # its own line's answer, not a neighbour's
    assert lm.submitted == dict.fromkeys((item.custom_id for item in lines), 1)
    assert lm.chat_requests == 0


def test_an_expired_batch_keeps_its_answered_half_and_marks_the_rest_to_resubmit(lm: FakeBatchOpenAI) -> None:
    lm.script("expire_half")
    api = client(lm)
    state = finished(api, api.submit(lines_for(lm, 6), metadata={}))
    assert state.status == "expired"
    by_id = {r.custom_id: r for r in api.results(state)}
    assert [cid for cid, r in sorted(by_id.items()) if r.ok] == ["q00", "q01", "q02"]
    rest = [by_id[cid] for cid in ("q03", "q04", "q05")]
    assert all(r.expired and not r.ok and r.status_code is None and r.error_code == "batch_expired" for r in rest)
    assert not any(by_id[cid].expired for cid in ("q00", "q01", "q02"))


def test_a_completed_batch_of_only_failures_has_every_line_failed_with_its_code(lm: FakeBatchOpenAI) -> None:
    lm.script("only_failures")
    api = client(lm)
    state = finished(api, api.submit(lines_for(lm, 3), metadata={}))
    assert (state.status, state.output_file_id) == ("completed", None)
    results = api.results(state)
    assert sorted(r.custom_id for r in results) == ["q00", "q01", "q02"]
    for r in results:
        assert (r.ok, r.expired, r.status_code, r.error_code) == (False, False, 500, "server_error")
        assert r.error_message
        assert "error while processing" in r.error_message


def test_a_failed_line_is_failed_and_the_others_ok(lm: FakeBatchOpenAI) -> None:
    lm.fail_lines(match="Question number 1?", status=429)
    api = client(lm)
    by_id = {r.custom_id: r for r in api.results(finished(api, api.submit(lines_for(lm, 3), metadata={})))}
    assert (by_id["q01"].ok, by_id["q01"].status_code, by_id["q01"].error_code) == (False, 429, "rate_limit_exceeded")
    assert by_id["q00"].ok
    assert by_id["q02"].ok


def test_a_batch_failed_in_validation_ends_failed_with_its_reasons(lm: FakeBatchOpenAI) -> None:
    lm.script("fail_validation")
    api = client(lm)
    state = finished(api, api.submit(lines_for(lm, 2), metadata={}))
    assert state.status == "failed"
    assert state.terminal
    assert state.errors == ["invalid_request: The batch was refused (scripted)."]
    assert api.results(state) == []


def test_a_validation_failure_names_each_line_in_one_line(lm: FakeBatchOpenAI) -> None:
    lines = lines_for(lm, 2)
    twice = [*lines, lines[0], lines[1]]  # split_lines refuses this; submit leaves it to the provider
    state = finished(client(lm), client(lm).submit(twice, metadata={}))
    assert state.status == "failed"
    assert [error.split(":")[0:2] for error in state.errors] == [
        ["line 3", " duplicate_custom_id"],
        ["line 4", " duplicate_custom_id"],
    ]
    assert all("\n" not in error for error in state.errors)
    with FakeBatchOpenAI(api_key=KEY, max_requests=2) as small:
        over = finished(client(small), client(small).submit(lines_for(small, 3), metadata={}))
        assert [error.split(":")[0] for error in over.errors] == ["too_many_requests"]


def test_a_file_refused_at_upload_is_rejected_in_one_line(lm: FakeBatchOpenAI) -> None:
    with FakeBatchOpenAI(api_key=KEY, max_bytes=100) as small:
        with pytest.raises(
            BatchRejected, match=r"OpenAI refused the batch file \(HTTP 400\): File is too large"
        ) as rejected:
            client(small).submit(lines_for(small, 1), metadata={})
        assert "\n" not in str(rejected.value)
        assert small.created_batches == []


def test_a_batch_refused_at_create_is_rejected_in_one_line(lm: FakeBatchOpenAI) -> None:
    with pytest.raises(BatchRejected, match=r"refused the batch \(HTTP 400\): Invalid 'metadata'") as rejected:
        client(lm).submit(lines_for(lm, 1), metadata={f"k{i}": "v" for i in range(17)})
    assert "\n" not in str(rejected.value)


def test_a_rate_limited_create_is_retried_then_made_once(lm: FakeBatchOpenAI, waited: list[float]) -> None:
    lm.fail_next("create", "429", times=2)
    state = client(lm, retries=2).submit(lines_for(lm, 2), metadata={})
    assert len(lm.created_batches) == 1
    assert lm.created_batches[0].id == state.id
    assert len(waited) == 2  # two waits by the backoff policy


def test_a_create_still_rate_limited_after_the_retries_is_unavailable(lm: FakeBatchOpenAI) -> None:
    lm.fail_next("create", "503", times=3)
    with pytest.raises(BatchUnavailable, match=r"HTTP 503 \(after 2 retries\)"):
        client(lm, retries=2).submit(lines_for(lm, 2), metadata={})
    assert lm.created_batches == []


@pytest.mark.parametrize("lost", ["lost_reply", "reset"])
def test_a_create_that_got_no_reply_makes_one_batch(lm: FakeBatchOpenAI, lost: str) -> None:
    lm.fail_next("create", lost)
    state = client(lm).submit(lines_for(lm, 2), metadata={})
    assert [made.id for made in lm.created_batches] == [state.id]  # "lost_reply": made once, found in the list


def test_a_refused_key_stops_the_run_without_showing_the_key(lm: FakeBatchOpenAI) -> None:
    wrong = "another-plain-words-key"
    assert wrong in redact_secrets(f"a {wrong} b")  # so only the client's own replacement can hide it
    with pytest.raises(FatalServiceError) as refused:
        client(lm, key=wrong).submit(lines_for(lm, 1), metadata={})
    assert refused.value.cause == "auth"
    assert refused.value.status == 401
    assert lm.batch_requests == 1  # not retried
    lm.fail_next("status", "echo_key_401")
    state = client(lm).submit(lines_for(lm, 1), metadata={})
    with pytest.raises(FatalServiceError) as echoed:
        client(lm).status(state.id)
    assert KEY not in str(echoed.value)
    assert "***" in str(echoed.value)


def test_an_exhausted_balance_stops_the_run_at_once(lm: FakeBatchOpenAI, waited: list[float]) -> None:
    lm.fail_next("upload", "insufficient_quota", times=5)
    with pytest.raises(FatalServiceError) as refused:
        client(lm).submit(lines_for(lm, 1), metadata={})
    assert refused.value.cause == "billing"
    assert waited == []


def test_cancel_keeps_the_batch_and_its_lines_are_to_resubmit(lm: FakeBatchOpenAI) -> None:
    api = client(lm)
    state = api.submit(lines_for(lm, 2), metadata={})
    assert api.cancel(state.id).status == "cancelling"
    ended = finished(api, api.status(state.id))
    assert ended.status == "cancelled"
    assert all(r.expired and r.error_code == "batch_cancelled" for r in api.results(ended))
    assert api.cancel(state.id).status == "cancelled"  # a batch that ended stays as it is


def test_results_wait_for_the_end(lm: FakeBatchOpenAI) -> None:
    api = client(lm)
    state = api.submit(lines_for(lm, 1), metadata={})
    with pytest.raises(ValueError, match="validating"):
        api.results(state)


def test_an_unknown_batch_is_rejected(lm: FakeBatchOpenAI) -> None:
    with pytest.raises(BatchRejected, match="HTTP 404"):
        client(lm).status("batch_nope")


def test_submit_takes_one_endpoint_and_one_model(lm: FakeBatchOpenAI) -> None:
    api = client(lm)
    with pytest.raises(ValueError, match="split_lines"):
        api.submit([*lines_for(lm, 1), *lines_for(lm, 2, model="other")[1:]], metadata={})
    with pytest.raises(ValueError, match="not an endpoint"):
        api.submit([line("a", url="https://elsewhere.example/v1/chat/completions")], metadata={})
    assert lm.batch_requests == 0


def test_the_client_handles_its_own_endpoints_only() -> None:
    api = OpenAIBatchClient("https://api.openai.com/v1/", "k")
    assert api.handles("https://api.openai.com/v1/chat/completions")
    assert api.handles("https://api.openai.com/v1/embeddings")
    assert not api.handles("https://api.openai.com/v1/models")
    assert not api.handles("http://127.0.0.1:8000/v1/chat/completions")


# --------------------------------------------------------------------------------------------- which backbones


def backbone(**table: Any) -> Any:
    return parse_backbone(table)


def test_hosted_openai_and_anthropic_have_a_client_at_their_base() -> None:
    openai = backbone(kind="hosted", model="openai/gpt-4o-mini", api_key_env="OPENAI_API_KEY")
    made = batch_client_for(openai, api_key="k")
    assert isinstance(made, OpenAIBatchClient)
    assert made.api_base == "https://api.openai.com/v1"
    assert made.provider == "openai"
    assert made.limits == OPENAI_LIMITS
    proxied = backbone(kind="hosted", model="openai/gpt-4o", api_key_env="K", api_base="http://127.0.0.1:9/v1")
    assert batch_client_for(proxied, api_key="k").api_base == "http://127.0.0.1:9/v1"  # type: ignore[union-attr]
    anthropic = backbone(kind="hosted", model="anthropic/claude-3-5-haiku-latest", api_key_env="ANTHROPIC_API_KEY")
    made_a = batch_client_for(anthropic, api_key="k")
    assert made_a is not None
    assert made_a.provider == "anthropic"
    assert made_a.limits == ANTHROPIC_LIMITS
    assert made_a.handles("https://api.anthropic.com/v1/messages")
    assert no_batch_reason("main", openai) is None
    assert no_batch_reason("judge", anthropic) is None


def test_a_backbone_without_a_batch_api_is_refused_in_one_line() -> None:
    server = backbone(kind="openai_compatible", model="qwen", api_base="http://127.0.0.1:8000/v1")
    embedded = backbone(kind="embedded", model="qwen2.5")
    other = backbone(kind="hosted", model="together_ai/llama", api_key_env="TOGETHER_KEY")
    for role, item in (("main", server), ("assessor", embedded), ("judge", other)):
        assert batch_client_for(item, api_key="k") is None
        reason = no_batch_reason(role, item)
        assert reason is not None
        assert "\n" not in reason
        assert "raise [run] num_threads for concurrency instead" in reason  # what to do instead, for every kind
        assert reason.startswith(f"backbone {role} (")
        assert "has no batch API: run without --batch" in reason
    assert "openai_compatible server http://127.0.0.1:8000/v1" in str(no_batch_reason("main", server))
    assert "embedded" in str(no_batch_reason("assessor", embedded))
    assert "together_ai/llama" in str(no_batch_reason("judge", other))


@pytest.mark.parametrize(
    ("code", "expired"),
    [
        ("batch_expired", True),  # OpenAI: the window ended first
        ("batch_cancelled", True),  # OpenAI: the batch was cancelled first
        ("expired", True),  # Anthropic's result types
        ("canceled", True),
        ("internal_error", False),  # a line that ran and failed, without a response: a failure, not a resubmit
        (None, False),
    ],
)
def test_only_lines_never_run_are_expired(code: str | None, expired: bool) -> None:
    assert LineResult(custom_id="a", error_code=code).expired is expired
    assert not LineResult(custom_id="a", error_code=code).ok


# --------------------------------------------------------------------------------------------- the Anthropic client


def messages_body(question: str, *, model: str = "claude-test") -> dict[str, Any]:
    chat = chat_body(question, model=model)
    system, user = chat["messages"][0]["content"], chat["messages"][1]
    return {"model": model, "max_tokens": 64, "system": system, "messages": [user]}


def anthropic_lines(lm: FakeBatchAnthropic, count: int) -> list[BatchLine]:
    url = f"{lm.api_base}/messages"
    return [
        BatchLine(custom_id=f"q{i:02d}", url=url, body=messages_body(f"Question number {i}?")) for i in range(count)
    ]


def anthropic(lm: FakeBatchAnthropic, *, key: str = KEY) -> AnthropicBatchClient:
    return AnthropicBatchClient(lm.api_base, key, timeout=10.0, num_retries=1, service="test Anthropic batches")


@pytest.fixture
def claude() -> Iterator[FakeBatchAnthropic]:
    with FakeBatchAnthropic(gold=GOLD, api_key=KEY) as server:
        yield server


def test_an_anthropic_batch_is_read_back_by_custom_id_as_its_endpoint_answers(claude: FakeBatchAnthropic) -> None:
    api = anthropic(claude)
    lines = anthropic_lines(claude, 8)
    state = api.submit(lines, metadata={"run": "r1"})
    assert (state.provider, state.status, state.output_file_id) == ("anthropic", "in_progress", None)
    state = api.status(state.id)
    assert state.status == "completed"
    assert state.request_counts.model_dump() == {"total": 8, "completed": 8, "failed": 0}
    results = api.results(state)
    assert [r.custom_id for r in results] != [item.custom_id for item in lines]  # shuffled
    by_id = {r.custom_id: r for r in results}
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    for i, item in enumerate(lines):
        sync = requests.post(f"{claude.api_base}/messages", json=item.body, headers=headers, timeout=10).json()
        assert by_id[item.custom_id].ok
        assert by_id[item.custom_id].body == sync
        assert f"[[ ## answer ## ]]\n{'ABCD'[i % 4]}" in sync["content"][0]["text"]
    assert claude.submitted == dict.fromkeys((item.custom_id for item in lines), 1)
    sent = [h for h in claude.headers_seen if "x-api-key" in h and "authorization" not in {k.lower() for k in h}]
    assert len(sent) == len(claude.headers_seen)  # the key in Anthropic's own header only


def test_an_expired_anthropic_batch_keeps_its_answered_half(claude: FakeBatchAnthropic) -> None:
    claude.script("expire_half")
    api = anthropic(claude)
    state = api.status(api.submit(anthropic_lines(claude, 4), metadata={}).id)
    assert state.status == "expired"
    assert state.request_counts.model_dump() == {"total": 4, "completed": 2, "failed": 0}  # expired: not failures
    by_id = {r.custom_id: r for r in api.results(state)}
    assert [cid for cid in sorted(by_id) if by_id[cid].ok] == ["q00", "q01"]
    assert all(by_id[cid].expired and by_id[cid].status_code is None for cid in ("q02", "q03"))


def test_an_errored_anthropic_request_is_failed_with_its_type_and_status(claude: FakeBatchAnthropic) -> None:
    claude.fail_lines(match="Question number 1?", error_type="api_error")
    api = anthropic(claude)
    state = api.status(api.submit(anthropic_lines(claude, 2), metadata={}).id)
    assert state.request_counts.model_dump() == {"total": 2, "completed": 1, "failed": 1}
    by_id = {r.custom_id: r for r in api.results(state)}
    failed = by_id["q01"]
    assert (failed.ok, failed.expired, failed.status_code, failed.error_code) == (False, False, 500, "api_error")
    assert by_id["q00"].ok


def test_an_anthropic_batch_is_counted_as_its_body_is_sent(claude: FakeBatchAnthropic) -> None:
    lines = anthropic_lines(claude, 3)
    size = 14 + sum(len(encoded_line(item, "anthropic")) for item in lines)
    assert len(split_lines(lines, BatchLimits(max_requests=9, max_bytes=size, line_form="anthropic"))) == 1
    with FakeBatchAnthropic(api_key=KEY, max_bytes=size) as exact:
        assert anthropic(exact).submit(anthropic_lines(exact, 3), metadata={}).status == "in_progress"
    with (
        FakeBatchAnthropic(api_key=KEY, max_bytes=size - 1) as under,
        pytest.raises(BatchRejected, match=r"Anthropic refused the batch \(HTTP 413\)"),
    ):
        anthropic(under).submit(anthropic_lines(under, 3), metadata={})


def test_a_refused_anthropic_batch_and_key(claude: FakeBatchAnthropic) -> None:
    twice = [*anthropic_lines(claude, 1), *anthropic_lines(claude, 1)]
    with pytest.raises(BatchRejected, match="already used") as rejected:
        anthropic(claude).submit(twice, metadata={})
    assert "\n" not in str(rejected.value)
    with pytest.raises(FatalServiceError) as refused:
        anthropic(claude, key="plain-wrong-words").submit(anthropic_lines(claude, 1), metadata={})
    assert refused.value.cause == "auth"
    assert "plain-wrong-words" not in str(refused.value)
    assert claude.created_batches == []


def test_a_cancelled_anthropic_batch_has_its_requests_to_resubmit(claude: FakeBatchAnthropic) -> None:
    api = anthropic(claude)
    state = api.submit(anthropic_lines(claude, 2), metadata={})
    assert api.cancel(state.id).status == "cancelling"
    ended = api.status(state.id)
    assert ended.status == "cancelled"
    assert all(r.expired and r.error_code == "canceled" for r in api.results(ended))


def test_the_anthropic_client_handles_the_messages_endpoint_only() -> None:
    api = AnthropicBatchClient("https://api.anthropic.com/v1/", "k")
    assert api.handles("https://api.anthropic.com/v1/messages")
    assert not api.handles("https://api.anthropic.com/v1/complete")
    assert not api.handles("https://api.openai.com/v1/chat/completions")
