"""Throughput of `clearmed eval` against a remote backbone: questions per minute at 1, 8 and 32 threads against a fake
OpenAI-compatible server that answers every call after a fixed latency, and clearmed's own overhead per question.

    python scripts/bench_throughput.py                                # latency 1 s, threads 1 8 32
    python scripts/bench_throughput.py --latency 0.5 --threads 1 4 16 --questions-per-thread 3

Everything real but the model, through the one door of a run, `clearmed.evaluate(EvalRequest(...))` with the
questions given as a list: the config loaded, CLEAR built by name (LM verifier, generated answers, pathways in
parallel as on any remote backend), the HTTP client DSPy's LM uses, the adapters, the run folder (one fsynced line per
question) and its finish (summary.json and .md, leakage.json, plots, the HTML report). Evidence comes from the demo
bundle's textbook (the in-memory corpus) and web pages (offline search), searched in process. The server runs in its
own process (its work does not share clearmed's interpreter) and answers each stage from a script.

- *overhead per question*: against a server with no latency, one thread: everything but the LM's own latency
  (prompts, parsing, records, search, HTTP on localhost, the run folder). Said twice: the questions' own seconds
  (what the run records per question), and the whole `evaluate` call over the questions (the program's build and
  the folder's finish added).
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
    wall: float  # the whole `evaluate` call: config, program build, the questions, the folder's finish
    mean_question_s: float  # the questions' own seconds, as the run records them
    lm_calls: float

    @property
    def per_minute(self) -> float:
        return 60 * self.questions / self.wall


def bench_config(server_url: str) -> str:
    """The config of a measurement: the fake server as the one backbone (no cache, no retry), the demo bundle's
    evidence in process, and CLEAR's settings for a remote backend."""
    from clearmed.testing import demo_config_toml

    backbone = (
        f'kind = "openai_compatible"\nmodel = "bench"\napi_base = "{server_url}"\ncache = false\n'
        "timeout = 60.0\nnum_retries = 0"
    )
    return demo_config_toml(backbone=backbone, program='json_fallback = false\nparallel_pathways = "auto"')


def measure(latency: float, threads: int, questions: int) -> Measured:
    import clearmed
    from clearmed.api.questions import question_of  # a plain dict as the run's question, as `evaluate` reads a list

    items = [
        {
            "id": f"q{i}",
            "question": f"Which condition causes weight gain and cold intolerance? (case {i})",
            "options": ["Hypothyroidism", "Hyperthyroidism", "Addison disease", "Cushing syndrome"],
            "answer": "A",
        }
        for i in range(questions)
    ]
    with FakeServer(latency) as server, tempfile.TemporaryDirectory(prefix="clearmed-bench-") as folder:
        config = Path(folder) / "bench.toml"
        config.write_text(bench_config(server.url), encoding="utf-8")
        request = clearmed.EvalRequest(
            program="clear",
            benchmark="bench",
            questions=[question_of(item, position) for position, item in enumerate(items)],
            config=config,
            run_dir=Path(folder) / "run",
            threads=threads,
            show_progress=False,
            quiet=True,
        )
        started = time.perf_counter()
        summary = clearmed.evaluate(request)
        wall = time.perf_counter() - started
    assert summary.evaluated == questions, f"{summary.evaluated} of {questions} questions finished"
    assert summary.status_counts == {"answered": questions}, f"questions not answered: {summary.status_counts}"
    assert not summary.degraded, f"{summary.degraded} questions degraded: {summary.degraded_stages}"
    return Measured(
        threads=threads,
        latency=latency,
        questions=questions,
        wall=wall,
        mean_question_s=summary.cost.mean_seconds,
        lm_calls=summary.cost.mean_lm_calls,
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
    whole = overhead.wall / overhead.questions
    print(
        f"clearmed overhead per question (server latency 0, 1 thread, 16 questions): "
        f"{overhead.mean_question_s * 1000:.0f} ms in the question, {whole * 1000:.0f} ms of the whole evaluate call "
        f"(program build and folder finish included), {100 * whole / args.question_lm_seconds:.2f}% "
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
            json.dumps(
                {"overhead_s": overhead.mean_question_s, "overhead_call_s": whole, "chain": chain, "rows": results},
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
