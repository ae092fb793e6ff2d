"""Throughput of `clearmed eval` against a remote backbone: questions per minute at 1, 8 and 32 threads against a fake
OpenAI-compatible server that answers every call after a fixed latency, and clearmed's own overhead per question.

    python scripts/bench_throughput.py                                # latency 1 s, threads 1 8 32
    python scripts/bench_throughput.py --latency 0.5 --threads 1 4 16 --questions-per-thread 3

Everything real but the model: CLEAR (LM verifier, generated answers, pathways in parallel as on any remote backend),
the HTTP client DSPy's LM uses, the adapters, the run folder (one fsynced line per question). Evidence comes from the
toy in-memory corpus and web pages, so search latency is zero. The server runs in its own process (its work does not
share clearmed's interpreter) and answers each stage from a script.

- *overhead per question*: seconds per question against a server with no latency, one thread: everything but the
  LM's and the search's own latency (prompts, parsing, records, HTTP on localhost, the run folder).
- *ideal*: `threads` questions per question's critical path, where the critical path is the number of LM calls a
  question makes one after another (measured: the one-thread time at the latency, less the overhead, over the
  latency) times the latency. The issue's target: at 32 threads against a 1-second server, at least 80% of it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


# --------------------------------------------------------------------------------------------- the fake server


def serve(latency: float) -> None:
    """Answer chat completions by stage after `latency` seconds; print the port, then serve until killed."""
    from clearmed.testing import (
        QuietHTTPServer,
        ScriptedCall,
        format_chat_reply,
        identify_stage,
        label_all,
        pathway_replies,
        verifier_reply,
    )

    script: dict[str, Any] = {
        **pathway_replies("A", "A", "A"),
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real API servers do

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            messages = body.get("messages") or []
            system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
            user = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
            stage = identify_stage(system, user)
            reply = script.get(stage)
            if callable(reply):
                reply = reply(ScriptedCall(stage=stage, system=system, user=user))
            time.sleep(latency)
            text = format_chat_reply(reply) if isinstance(reply, dict) else f"no script for {stage}"
            payload = json.dumps(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "bench"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": len((system + user).split()), "completion_tokens": len(text.split())},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    class Server(QuietHTTPServer):
        request_queue_size = 256  # 32 questions x 3 pathways connect at once

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.05)


class FakeServer:
    """The server above in a child process."""

    def __init__(self, latency: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--latency", str(latency)], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.process.stdout.readline())}/v1"

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


# --------------------------------------------------------------------------------------------- the measurement


@dataclass(frozen=True)
class Measured:
    threads: int
    latency: float
    questions: int
    wall: float
    mean_question_s: float
    lm_calls: float

    @property
    def per_minute(self) -> float:
        return 60 * self.questions / self.wall


def measure(latency: float, threads: int, questions: int) -> Measured:
    import dspy

    from clearmed.backbones.factory import build_lm
    from clearmed.config import parse_config
    from clearmed.evaluation import EvalSpec, run_evaluation
    from clearmed.programs.clear import CLEAR
    from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch
    from clearmed.signatures.records.settings import ProgramSettings
    from clearmed.testing import LOCAL, QUESTION, WEB

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    with FakeServer(latency) as server, tempfile.TemporaryDirectory(prefix="clearmed-bench-") as folder:
        table = {"kind": "openai_compatible", "model": "bench", "api_base": server.url, "cache": False}
        config = parse_config({"backbones": {"main": {**table, "timeout": 60.0, "num_retries": 0}}}, source="bench")
        lm = build_lm(config.backbones["main"])
        program = CLEAR(
            InMemoryRetriever(LOCAL),
            InMemoryWebSearch(WEB),
            settings=ProgramSettings(json_fallback=False, parallel_pathways="auto"),
            role_lms={"main": lm},
        )
        items = [
            QUESTION.model_copy(update={"id": f"q{i}", "text": f"{QUESTION.text} (case {i})"}) for i in range(questions)
        ]
        spec = EvalSpec(program="clear", benchmark="bench", source="memory", questions=items, run_dir=Path(folder))
        started = time.perf_counter()
        records = run_evaluation(spec, config, program, num_threads=threads, show_progress=False)
        wall = time.perf_counter() - started
    assert len(records) == questions, f"{len(records)} of {questions} questions finished"
    bad = [r.question_id for r in records if r.decision.status != "answered" or r.degraded]
    assert not bad, f"questions not cleanly answered: {bad[:5]}"
    return Measured(
        threads=threads,
        latency=latency,
        questions=questions,
        wall=wall,
        mean_question_s=sum(r.seconds for r in records) / questions,
        lm_calls=sum(r.decision.lm_calls() for r in records) / questions,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the fake server takes per call")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--questions-per-thread", type=int, default=4, help="questions per thread (at least 8)")
    parser.add_argument("--question-lm-seconds", type=float, default=50.0, help="a realistic question's LM time")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return 0

    overhead = measure(0.0, 1, 16)
    one = measure(args.latency, 1, max(8, args.questions_per_thread))
    # The LM calls a question makes one after another: its one-thread time, less the overhead, over the latency.
    chain = max(1, round((one.mean_question_s - overhead.mean_question_s) / args.latency))
    rows = [one if threads == 1 else measure(args.latency, threads, max(8, args.questions_per_thread * threads))
            for threads in args.threads]  # fmt: skip
    print(
        f"clearmed overhead per question (server latency 0, 1 thread, 16 questions): "
        f"{overhead.mean_question_s * 1000:.0f} ms, {100 * overhead.mean_question_s / args.question_lm_seconds:.2f}% "
        f"of a {args.question_lm_seconds:g}-second question; {overhead.lm_calls:.1f} LM calls per question, "
        f"{chain} of them one after another"
    )
    print("\n| threads | questions | wall s | questions/min | ideal/min | % of ideal | s/question |")
    print("|---|---|---|---|---|---|---|")
    results = []
    for row in rows:
        ideal = 60 * row.threads / (chain * args.latency)
        share = row.per_minute / ideal
        print(
            f"| {row.threads} | {row.questions} | {row.wall:.1f} | {row.per_minute:.1f} | {ideal:.1f} "
            f"| {100 * share:.0f}% | {row.mean_question_s:.2f} |"
        )
        results.append({**row.__dict__, "per_minute": row.per_minute, "ideal_per_minute": ideal})
    print(f"\nload average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"overhead_s": overhead.mean_question_s, "chain": chain, "rows": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
