"""The fake batch server holds to OpenAI's documented limits and shapes, and answers each line as its synchronous
endpoint answers the same body. Spoken to with plain HTTP (not clearmed's client), so the fake is checked on its own."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
import requests

from tests.batch.fake_batch import FakeBatchOpenAI

KEY = "sk-fake-batch-key"
QUESTIONS = {"Which drug treats condition one?": "C", "Which nerve supplies muscle two?": "B"}
PARAMETRIC_SYSTEM = (
    "Your output fields are:\n1. `rationale` (str)\n2. `answer` (str)\nAll interactions will be structured"
)
VERIFIER_SYSTEM = "Your output fields are:\n1. `rationale`\n2. `answer`\n3. `route`\n4. `confidence`\nAll interactions will be structured"


def chat_body(question: str, *, model: str = "gpt-test", system: str = PARAMETRIC_SYSTEM) -> dict[str, Any]:
    user = f"[[ ## question ## ]]\n{question}\n\n[[ ## options ## ]]\nA. a\nB. b\nC. c"
    return {"model": model, "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}


def jsonl(lines: Sequence[Mapping[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def line(custom_id: str, body: Mapping[str, Any], url: str = "/v1/chat/completions") -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": dict(body)}


@pytest.fixture
def lm() -> Iterator[FakeBatchOpenAI]:
    with FakeBatchOpenAI(gold=QUESTIONS, api_key=KEY, max_requests=4, max_bytes=4_000) as server:
        yield server


def auth(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def upload(lm: FakeBatchOpenAI, content: bytes, *, purpose: str = "batch", key: str = KEY) -> requests.Response:
    files = {"file": ("batch.jsonl", content, "application/jsonl")}
    return requests.post(f"{lm.api_base}/files", files=files, data={"purpose": purpose}, headers=auth(key), timeout=10)


def create(lm: FakeBatchOpenAI, file_id: str, **fields: Any) -> requests.Response:
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h", **fields}
    return requests.post(f"{lm.api_base}/batches", json=body, headers=auth(), timeout=10)


def run(lm: FakeBatchOpenAI, content: bytes, **fields: Any) -> dict[str, Any]:
    """Upload, create, and poll the batch until it ends; its last state."""
    made = create(lm, upload(lm, content).json()["id"], **fields)
    assert made.status_code == 200, made.text
    batch = made.json()
    for _ in range(10):
        batch = requests.get(f"{lm.api_base}/batches/{batch['id']}", headers=auth(), timeout=10).json()
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return batch
    raise AssertionError(f"batch still {batch['status']}")


def file_lines(lm: FakeBatchOpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    reply = requests.get(f"{lm.api_base}/files/{file_id}/content", headers=auth(), timeout=10)
    return [json.loads(raw) for raw in reply.content.splitlines()]


def assert_openai_error(reply: requests.Response, status: int, param: str | None = None) -> str:
    """The reply is OpenAI's error body with this status (and param); its message."""
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if param is not None:
        assert error["param"] == param
    return str(error["message"])


def failed_codes(batch: Mapping[str, Any]) -> list[tuple[str, int | None]]:
    assert batch["status"] == "failed"
    assert batch["errors"]["object"] == "list"
    return [(error["code"], error["line"]) for error in batch["errors"]["data"]]


def test_a_valid_batch_walks_every_status_and_keeps_its_counts(lm: FakeBatchOpenAI) -> None:
    content = jsonl([line("a", chat_body("Which drug treats condition one?")), line("b", chat_body("x"))])
    batch = create(lm, upload(lm, content).json()["id"], metadata={"run": "r1"}).json()
    seen = [batch["status"]]
    while seen[-1] != "completed":
        batch = requests.get(f"{lm.api_base}/batches/{batch['id']}", headers=auth(), timeout=10).json()
        seen.append(batch["status"])
    assert seen == ["validating", "in_progress", "finalizing", "completed"]
    assert batch["request_counts"] == {"total": 2, "completed": 2, "failed": 0}
    assert batch["metadata"] == {"run": "r1"}
    assert batch["error_file_id"] is None
    assert lm.created_batches[0].custom_ids == ["a", "b"]
    assert lm.submitted == {"a": 1, "b": 1}


def test_each_line_is_answered_as_the_synchronous_endpoint_answers_its_body(lm: FakeBatchOpenAI) -> None:
    bodies = {
        "p1": chat_body("Which drug treats condition one?"),
        "p2": chat_body("Which nerve supplies muscle two?"),
        "v1": chat_body("Which drug treats condition one?", system=VERIFIER_SYSTEM),
    }
    batch = run(lm, jsonl([line(cid, body) for cid, body in bodies.items()]))
    answered = {item["custom_id"]: item["response"] for item in file_lines(lm, batch["output_file_id"])}
    for custom_id, body in bodies.items():
        sync = requests.post(f"{lm.api_base}/chat/completions", json=body, headers=auth(), timeout=10).json()
        assert answered[custom_id]["status_code"] == 200
        got = answered[custom_id]["body"]
        assert {k: v for k, v in got.items() if k != "created"} == {k: v for k, v in sync.items() if k != "created"}
    # The gold reached each line: a fake that answered every line alike would not pass this.
    contents = {cid: answered[cid]["body"]["choices"][0]["message"]["content"] for cid in bodies}
    assert "[[ ## answer ## ]]\nC" in contents["p1"]
    assert "[[ ## answer ## ]]\nB" in contents["p2"]
    assert "[[ ## route ## ]]" in contents["v1"]
    assert lm.chat_requests == len(bodies)  # the batch's lines are not synchronous requests


def test_output_lines_come_shuffled_and_each_once(lm: FakeBatchOpenAI) -> None:
    with FakeBatchOpenAI(max_requests=100) as big:
        ids = [f"q{i:02d}" for i in range(30)]
        batch = run(big, jsonl([line(cid, chat_body(f"question {cid}")) for cid in ids]))
        out = [item["custom_id"] for item in file_lines(big, batch["output_file_id"])]
    assert sorted(out) == ids
    assert out != ids


def test_a_custom_id_twice_fails_the_batch_in_validation(lm: FakeBatchOpenAI) -> None:
    content = jsonl([line("a", chat_body("x")), line("b", chat_body("y")), line("a", chat_body("z"))])
    batch = run(lm, content)
    assert failed_codes(batch) == [("duplicate_custom_id", 3)]
    assert batch["output_file_id"] is None
    assert batch["errors"]["data"][0]["param"] is None


def test_two_models_in_one_file_fail_the_batch_in_validation(lm: FakeBatchOpenAI) -> None:
    content = jsonl([line("a", chat_body("x", model="m1")), line("b", chat_body("y", model="m2"))])
    assert failed_codes(run(lm, content)) == [("mismatched_model", 2)]


def test_a_line_for_another_endpoint_or_method_fails_the_batch(lm: FakeBatchOpenAI) -> None:
    wrong_url = line("b", chat_body("y"), url="/v1/completions")
    wrong_method = {**line("c", chat_body("z")), "method": "GET"}
    content = jsonl([line("a", chat_body("x")), wrong_url, wrong_method])
    assert failed_codes(run(lm, content)) == [("mismatched_endpoint", 2), ("invalid_method", 3)]


def test_a_line_that_is_not_json_fails_the_batch(lm: FakeBatchOpenAI) -> None:
    content = jsonl([line("a", chat_body("x"))]) + b"{not json\n"
    assert failed_codes(run(lm, content)) == [("invalid_json_line", 2)]


def test_max_requests_lines_pass_and_one_more_fails_the_batch(lm: FakeBatchOpenAI) -> None:
    four = [line(f"q{i}", {"model": "m", "messages": []}) for i in range(4)]  # max_requests=4 in the fixture
    assert run(lm, jsonl(four))["status"] == "completed"
    five = [*four, line("q4", {"model": "m", "messages": []})]
    assert failed_codes(run(lm, jsonl(five))) == [("too_many_requests", None)]


def test_a_batch_file_over_max_bytes_is_refused_at_upload(lm: FakeBatchOpenAI) -> None:
    body = jsonl([line("a", chat_body("x"))])
    exact = body + b" " * (4_000 - len(body))  # max_bytes=4,000 in the fixture
    assert upload(lm, exact).status_code == 200
    message = assert_openai_error(upload(lm, exact + b" "), 400, "file")
    assert "4000" in message
    assert upload(lm, exact + b" ", purpose="user_data").status_code == 200  # the limit is the batch file's


def test_a_file_not_uploaded_for_batches_is_refused(lm: FakeBatchOpenAI) -> None:
    assert_openai_error(upload(lm, b"{}\n", purpose="training"), 400, "purpose")
    other = upload(lm, jsonl([line("a", chat_body("x"))]), purpose="fine-tune").json()["id"]
    assert_openai_error(create(lm, other), 400, "input_file_id")
    assert_openai_error(create(lm, "file-nope"), 404)
    assert lm.created_batches == []


def test_only_the_24h_window_and_the_batch_endpoints_are_taken(lm: FakeBatchOpenAI) -> None:
    file_id = upload(lm, jsonl([line("a", chat_body("x"))])).json()["id"]
    assert_openai_error(create(lm, file_id, completion_window="48h"), 400, "completion_window")
    assert_openai_error(create(lm, file_id, endpoint="/v1/models"), 400, "endpoint")
    for endpoint in ("/v1/responses", "/v1/embeddings", "/v1/completions"):
        assert create(lm, file_id, endpoint=endpoint).status_code == 200


def test_metadata_holds_16_pairs_of_64_and_512_characters_at_most(lm: FakeBatchOpenAI) -> None:
    file_id = upload(lm, jsonl([line("a", chat_body("x"))])).json()["id"]
    sixteen = {f"k{i}": "v" for i in range(16)}
    assert create(lm, file_id, metadata=sixteen).status_code == 200
    assert_openai_error(create(lm, file_id, metadata={**sixteen, "k16": "v"}), 400, "metadata")
    assert create(lm, file_id, metadata={"k" * 64: "v" * 512}).status_code == 200
    assert_openai_error(create(lm, file_id, metadata={"k" * 65: "v"}), 400, "metadata")
    assert_openai_error(create(lm, file_id, metadata={"k": "v" * 513}), 400, "metadata")


def test_another_key_is_refused_with_openais_401_everywhere(lm: FakeBatchOpenAI) -> None:
    file_id = upload(lm, jsonl([line("a", chat_body("x"))])).json()["id"]
    batch_id = create(lm, file_id).json()["id"]
    wrong = auth("sk-someone-else")
    replies = [
        upload(lm, b"{}\n", key="sk-someone-else"),
        requests.post(f"{lm.api_base}/batches", json={"input_file_id": file_id}, headers=wrong, timeout=10),
        requests.get(f"{lm.api_base}/batches/{batch_id}", headers=wrong, timeout=10),
        requests.get(f"{lm.api_base}/batches", headers=wrong, timeout=10),
        requests.get(f"{lm.api_base}/files/{file_id}/content", headers=wrong, timeout=10),
        requests.post(f"{lm.api_base}/batches/{batch_id}/cancel", headers=wrong, timeout=10),
    ]
    for reply in replies:
        assert_openai_error(reply, 401)
        assert reply.json()["error"]["code"] == "invalid_api_key"
    assert len(lm.created_batches) == 1


def test_expire_half_answers_the_first_half_and_expires_the_rest(lm: FakeBatchOpenAI) -> None:
    lm.script("expire_half")
    ids = ["q0", "q1", "q2", "q3"]
    batch = run(lm, jsonl([line(cid, chat_body(cid)) for cid in ids]))
    assert batch["status"] == "expired"
    assert batch["request_counts"] == {"total": 4, "completed": 2, "failed": 2}
    assert sorted(item["custom_id"] for item in file_lines(lm, batch["output_file_id"])) == ["q0", "q1"]
    errors = file_lines(lm, batch["error_file_id"])
    assert sorted(item["custom_id"] for item in errors) == ["q2", "q3"]
    assert all(item["response"] is None and item["error"]["code"] == "batch_expired" for item in errors)


def test_only_failures_completes_with_no_output_file(lm: FakeBatchOpenAI) -> None:
    lm.script("only_failures")
    batch = run(lm, jsonl([line("a", chat_body("x")), line("b", chat_body("y"))]))
    assert batch["status"] == "completed"
    assert batch["output_file_id"] is None
    assert batch["request_counts"] == {"total": 2, "completed": 0, "failed": 2}
    errors = file_lines(lm, batch["error_file_id"])
    assert {item["response"]["status_code"] for item in errors} == {500}
    assert all(item["response"]["body"]["error"]["type"] == "server_error" for item in errors)


def test_fail_validation_and_cancelled_scripts(lm: FakeBatchOpenAI) -> None:
    lm.script("fail_validation")
    lm.script("cancelled")
    content = jsonl([line("a", chat_body("x")), line("b", chat_body("y"))])
    assert failed_codes(run(lm, content)) == [("invalid_request", None)]
    cancelled = run(lm, content)
    assert cancelled["status"] == "cancelled"
    assert [item["custom_id"] for item in file_lines(lm, cancelled["output_file_id"])] == ["a"]
    assert [item["error"]["code"] for item in file_lines(lm, cancelled["error_file_id"])] == ["batch_cancelled"]
    assert run(lm, content)["status"] == "completed"  # scripts are for one batch each


def test_fail_lines_answers_the_matching_lines_with_the_status_in_the_error_file(lm: FakeBatchOpenAI) -> None:
    lm.fail_lines(match="(case 7)", status=429, times=1)
    content = jsonl([line("a", chat_body("x (case 7)")), line("b", chat_body("y")), line("c", chat_body("(case 7)"))])
    batch = run(lm, content)
    assert batch["request_counts"] == {"total": 3, "completed": 2, "failed": 1}
    (failed,) = file_lines(lm, batch["error_file_id"])
    assert failed["custom_id"] == "a"
    assert failed["response"]["status_code"] == 429
    assert failed["response"]["body"]["error"]["code"] == "rate_limit_exceeded"


def test_cancel_stops_a_running_batch_and_refuses_one_that_ended(lm: FakeBatchOpenAI) -> None:
    content = jsonl([line("a", chat_body("x"))])
    batch = create(lm, upload(lm, content).json()["id"]).json()
    cancelling = requests.post(f"{lm.api_base}/batches/{batch['id']}/cancel", headers=auth(), timeout=10).json()
    assert cancelling["status"] == "cancelling"
    ended = requests.get(f"{lm.api_base}/batches/{batch['id']}", headers=auth(), timeout=10).json()
    assert ended["status"] == "cancelled"
    assert [item["error"]["code"] for item in file_lines(lm, ended["error_file_id"])] == ["batch_cancelled"]
    again = requests.post(f"{lm.api_base}/batches/{batch['id']}/cancel", headers=auth(), timeout=10)
    assert "cancelled" in assert_openai_error(again, 400)


def test_batch_requests_are_counted_apart_from_chat_requests(lm: FakeBatchOpenAI) -> None:
    run(lm, jsonl([line("a", chat_body("x"))]))
    assert lm.batch_requests == 2 + 3  # upload, create, then a GET for each of in_progress, finalizing, completed
    assert lm.chat_requests == 0
