"""`clearmed eval --program clear` against a real OpenAI-compatible server: llama.cpp's (the embedded model, a
2,048-token context) behind a proxy that throttles, then refuses the key, then lets the run finish.

Real HTTP, a real chat template, real concurrency (two questions at once, their pathways in parallel): every question
finishes clean through the 429s, the retries are counted in the summary, and no prompt is left overflowing the context;
a 401 stops the run with one line and writes no record; with the key mended the same command resumes and finishes.

The config names no ``context_window``, as a user pointing clearmed at a server usually does (issue 37). llama-cpp-
python's server reports none (its ``/v1/models`` lists ids only; it has no ``/props``), so the window is learned from
its first context-length error: the verifier's prompt (four passages a pathway here) is longer than 2,048 tokens, the
server refuses it naming its window, and the stage is refitted (counted by the server's ``/extras/tokenize/count``)
and retried; every later prompt is fitted before it is sent. Slow:
the server loads the 1.1 GB model and runs it on CPU (5-20 minutes on two cores). Three MedQA questions over OpenStax and
MedQuAD when the shared data is here, else three demo questions over the demo bundle (a clean clone in CI).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.evaluation.degraded import step_errors
from clearmed.evaluation.store import DEGRADED
from clearmed.retrieval.corpus import CorpusError
from clearmed.retrieval.corpus_presets import shared_data_root
from clearmed.testing import demo_config_toml

from .llama_server import MODEL_ALIAS, LlamaServer, ThrottlingProxy, llama_server_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not llama_server_available(), reason="needs the `server` and `embedded` extras"),
]

# The shared-data setup of configs/embedded-shared.toml (OpenStax as the local corpus, MedQuAD's NIH pages as an
# offline web search, small k and word budgets), with the LM steps an API backbone runs: generated answers and the LM
# verifier, whose prompt is the longest. No input budget is set in [program], and no window in [backbones.main]: the
# verifier's evidence (passage_words, verifier_passages) is more than the 2,048-token window holds, so the server's
# error teaches the window and the prompt fit does the rest (the largest prompt is asserted below).
CONFIG = """
[backbones.main]
kind = "openai_compatible"
model = "{model}"
api_base = "{api_base}"
temperature = 0.0
timeout = 900.0
num_retries = 4
cache = false

{evidence}
[program]
local_k = 4
dynamic_k = 4
passage_words = 100
verifier_passages = 4
quality_snippet_words = 30
json_fallback = false
mcq_decoding = "generate"
verifier_mode = "lm"
source_quality = "priors"
max_tokens = {{ parametric = 80, local_answer = 90, dynamic_answer = 90, verifier = 160, followup_query = 40, guard = 140, audit = 120, format_gate = 16 }}

[run]
runs_dir = "{runs_dir}"
"""
SHARED_EVIDENCE = """
[corpus]
backend = "bm25s"
preset = "openstax"
index_dir = "~/.cache/clearmed/indexes/openstax"

[search]
backend = "offline"
preset = "medquad"
index_dir = "~/.cache/clearmed/indexes/medquad"
"""
DEMO_EVIDENCE = demo_config_toml(backbone=None)


def _has_shared_data() -> bool:
    try:
        return (shared_data_root() / "benchmarks" / "medqa").is_dir()
    except CorpusError:
        return False


N_CTX = 2048


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    with LlamaServer(n_ctx=N_CTX) as server:
        yield server


def test_clear_through_a_throttling_proxy_finishes_clean_stops_on_a_401_and_resumes(
    llama_server: LlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    shared = _has_shared_data()
    with ThrottlingProxy(llama_server.api_base, throttle_every=4, retry_after="1") as proxy:
        config = tmp_path / "remote.toml"
        evidence = SHARED_EVIDENCE if shared else DEMO_EVIDENCE
        text = CONFIG.format(model=MODEL_ALIAS, api_base=proxy.api_base, evidence=evidence, runs_dir=tmp_path / "runs")
        config.write_text(text, encoding="utf-8")
        benchmark = ["--benchmark", "medqa", "--source", "shared"] if shared else ["--benchmark", "demo"]
        argv = ["eval", "--program", "clear", *benchmark, "--limit", "3"]
        argv += ["-c", str(config), "--run-dir", str(run_dir), "--threads", "2"]

        # 1. Throttled: the 1st, 5th, 9th ... request is a 429 with Retry-After: 1. Two questions, both clean.
        proxy.mode = "throttle"
        assert main([*argv, "--stop-after", "2"]) == 0, capsys.readouterr().err
        capsys.readouterr()
        first = list(read_records(run_dir))
        assert len(first) == 2
        assert proxy.throttled >= 2
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["degraded"] == 0
        assert summary["spend"]["retries"] == proxy.throttled  # every 429 retried, and counted once
        throttled = proxy.throttled

        # 2. The key is revoked: the run stops with one line, exit 2, and writes nothing (no degraded record).
        proxy.mode = "unauthorized"
        assert main(argv) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.startswith("clearmed:")]
        assert len(lines) == 1, err
        assert "authentication failed (HTTP 401): Incorrect API key provided." in lines[0]
        assert "Traceback" not in err
        assert len(list(read_records(run_dir))) == 2
        assert not (run_dir / DEGRADED).exists()
        assert proxy.refused >= 1

        # 3. The key is mended: the same command resumes and finishes the run.
        proxy.mode = "pass"
        assert main(argv) == 0, capsys.readouterr().err
        records = sorted(read_records(run_dir), key=lambda r: r.index)
    assert len(records) == 3
    assert [r.question_id for r in records[:2]] == [r.question_id for r in sorted(first, key=lambda r: r.index)]
    assert all(r.decision.status == "answered" and not r.degraded for r in records)
    errors = [error for record in records for error in step_errors(record.decision)]
    assert not [e for e in errors if e.transient or e.kind in ("lm_error", "timeout")], errors
    overflow = ("ContextWindowExceeded", "context_length", "exceed context window")
    assert not [e for e in errors if any(mark in e.message for mark in overflow)]  # no prompt overflowed the window
    rows = [row for r in records for row in r.decision.usage if row.role != "tool"]
    largest = max(row.prompt_tokens for row in rows)
    assert 0 < largest < N_CTX
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["evaluated"], summary["degraded"]) == (3, 0)
    assert summary["spend"]["retries"] == throttled
    refits = sum(row.refits for row in rows)
    counted = sum(row.token_counter == "server" for row in rows)
    dropped = sum(row.passages_dropped for row in rows)
    print(
        f"largest prompt: {largest} tokens; retries {throttled}; refits after an overflow {refits}; prompts counted by "
        f"the server {counted}; passages dropped {dropped}; questions: {[r.seconds for r in records]} s"
    )
