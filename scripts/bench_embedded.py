"""Benchmark the embedded llama.cpp backbone as the program uses it (through `build_lm` and `dspy.LM`).

Prints load time, prompt-processing and generation speed, peak RSS, and what llama.cpp's RAM prompt cache
(`prompt_cache_mb`) buys when calls alternate between long prompts, as CLEAR's pathways do.

Builds side by side: the engine of this interpreter (the portable build, `backbones/engine_build.py`) and any
other interpreter with another llama.cpp build installed, each in a child process, interleaved run by run so
that load from other processes hits every build alike; the CPU's instruction-set flags are printed first.

    python scripts/bench_embedded.py [--n-ctx 8192] [--threads N] [--prefix-words 450] [--repeats 3]
    python scripts/bench_embedded.py --builds-only --compare-build native=/tmp/native-venv/bin/python
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
from dspy.lm15 import Config, Message, Request

from clearmed.backbones.config import parse_backbone
from clearmed.backbones.engine_build import read_cpu_flags, system_info_features
from clearmed.backbones.factory import build_lm
from clearmed.backbones.llama_runtime import unload_models
from clearmed.backbones.model_files import resolve_model_path
from clearmed.backbones.selfcheck import probe_engine

ISA_FLAGS = ("avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl", "avx512vbmi", "avx512_vnni",
             "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")  # fmt: skip

SENTENCES = (
    "The patient presented with fever, cough and a maculopapular rash that began on the face.",
    "Koplik spots were seen on the buccal mucosa two days before the rash appeared.",
    "Laboratory tests showed leukopenia and a mildly raised C-reactive protein.",
    "Vaccination history was incomplete and a sibling had similar symptoms last week.",
    "Chest radiography revealed bilateral interstitial infiltrates without effusion.",
    "Vitamin A supplementation reduces mortality in children with severe disease.",
)


@dataclass(frozen=True)
class Call:
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    text: str


def passages(words: int, seed: str) -> str:
    """A long evidence block of roughly ``words`` words, distinct per ``seed`` from its first token."""
    out = [f"Evidence set {seed}."]
    i = 0
    while sum(len(s.split()) for s in out) < words:
        out.append(f"[{seed}-{i}] {SENTENCES[i % len(SENTENCES)]}")
        i += 1
    return " ".join(out)


def call(lm: dspy.LM, system: str, user: str, max_tokens: int) -> Call:
    request = Request(
        model=lm.model, system=system, messages=(Message.user(user),), config=Config(max_tokens=max_tokens)
    )
    started = time.perf_counter()
    response = lm(request)
    seconds = time.perf_counter() - started
    usage = response.usage
    return Call(seconds, int(usage.input_tokens or 0), int(usage.output_tokens or 0), response.text or "")


def make_lm(args: argparse.Namespace, prompt_cache_mb: int) -> dspy.LM:
    table = {
        "kind": "embedded",
        "model": "qwen2.5-coder-1.5b",
        "n_ctx": args.n_ctx,
        "prompt_cache_mb": prompt_cache_mb,
        "temperature": 0.0,
        "cache": False,  # DSPy's response cache would hide the model entirely
        "num_retries": 0,
    }
    if args.threads:
        table["n_threads"] = args.threads
    return build_lm(parse_backbone(table, source="bench"))


def speed(args: argparse.Namespace) -> None:
    lm = make_lm(args, prompt_cache_mb=args.cache_mb)
    started = time.perf_counter()
    shared = lm.engine.load()
    print(f"load: {time.perf_counter() - started:.2f} s (llama.cpp {shared.load_seconds:.2f} s)")
    print(f"settings: {lm.engine.load_args.model_dump()}")

    # Best and median of three: on a shared 2-core machine, any other busy process makes llama.cpp's
    # spinning threads wait on each other, so single runs swing by 2-10x.
    pp_runs = [
        call(lm, passages(args.prefix_words, uuid.uuid4().hex[:8]), "Answer with one word: ok?", 1)
        for _ in range(args.repeats)
    ]
    pp_rates = sorted(c.prompt_tokens / c.seconds for c in pp_runs)
    print(
        f"prompt processing: best {pp_rates[-1]:.1f} tok/s, median {statistics.median(pp_rates):.1f} "
        f"({pp_runs[0].prompt_tokens}-token cold prompts, {', '.join(f'{c.seconds:.2f}' for c in pp_runs)} s)"
    )
    gen_rates = []
    for _ in range(args.repeats):
        gen = call(
            lm,
            f"Session {uuid.uuid4().hex[:8]}. You are a clinical tutor.",
            "Explain in detail, step by step, how measles is diagnosed and managed.",
            args.gen_tokens,
        )
        gen_rates.append(gen.completion_tokens / (gen.seconds - gen.prompt_tokens / pp_rates[-1]))
    gen_rates.sort()
    print(
        f"generation: best {gen_rates[-1]:.1f} tok/s, median {statistics.median(gen_rates):.1f} "
        f"({gen.completion_tokens} tokens after a {gen.prompt_tokens}-token prompt)"
    )
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    unload_models()


def prefix_reuse(args: argparse.Namespace) -> None:
    """Seconds per call, RAM prompt cache off vs on, for: the same long prefix twice in a row; then
    another prefix; then back to the first (what alternating predictors do). The two models run
    interleaved, step by step, so load from other processes hits both columns alike."""
    off, on = make_lm(args, prompt_cache_mb=0), make_lm(args, prompt_cache_mb=512)
    off.engine.load()
    timers = _time_state_copies(on.engine.load().llm)
    question = "Which diagnosis is most likely? Answer in one word."
    print(f"prompt-prefix reuse, seconds per call (load average before: {os.getloadavg()[0]:.2f}):")
    best: dict[str, tuple[float, float]] = {}
    for round_ in range(1, args.repeats + 1):
        a = passages(args.prefix_words, "A" + uuid.uuid4().hex[:6])
        b = passages(args.prefix_words, "B" + uuid.uuid4().hex[:6])
        steps = [
            ("A cold", a, question),
            ("A again, new tail", a, question + " Consider measles first."),
            ("B cold", b, question),
            ("back to A, new tail", a, question + " Answer with one word."),
        ]
        for name, system, user in steps:
            c_off = call(off, system, user, 8)
            c_on = call(on, system, user, 8)
            same = "same answer" if c_off.text == c_on.text else f"DIFFERENT: {c_off.text!r} vs {c_on.text!r}"
            print(
                f"  [{round_}] {name:<22} {c_off.prompt_tokens:>5} tok   cache off {c_off.seconds:6.2f}   "
                f"RAM cache {c_on.seconds:6.2f}   ({same})"
            )
            prev = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(prev[0], c_off.seconds), min(prev[1], c_on.seconds))
    for name, (t_off, t_on) in best.items():
        print(f"  best {name:<22} cache off {t_off:6.2f}   RAM cache {t_on:6.2f}")
    for name, (count, seconds) in timers.items():
        print(f"  RAM cache cost: {name} x{count}, {seconds:.2f} s in total")
    print(f"  load average after: {os.getloadavg()[0]:.2f}")
    unload_models()


def _time_state_copies(llm: Any) -> dict[str, list[float]]:
    """Wrap the model's save_state/load_state (what the RAM cache costs per call) with timers."""
    timers: dict[str, list[float]] = {}
    for name in ("save_state", "load_state"):
        original = getattr(llm, name)
        timers[name] = [0, 0.0]

        def timed(*a: Any, _original: Any = original, _slot: list[float] = timers[name]) -> Any:
            started = time.perf_counter()
            try:
                return _original(*a)
            finally:
                _slot[0] += 1
                _slot[1] += time.perf_counter() - started

        setattr(llm, name, timed)
    return timers


def builds(args: argparse.Namespace) -> None:
    """Prompt and generation tokens/s of each llama.cpp build, in child processes, interleaved."""
    flags = read_cpu_flags()
    print(f"CPU flags (ISA subset): {' '.join(f for f in ISA_FLAGS if f in flags) or 'unknown'}")
    model = str(resolve_model_path(parse_backbone({"kind": "embedded", "model": "qwen2.5-coder-1.5b"}, source="bench")))
    threads = args.threads or os.cpu_count() or 1
    engines = {"this build": sys.executable, **dict(item.split("=", 1) for item in args.compare_build)}
    runs: dict[str, list[Any]] = {name: [] for name in engines}
    for _ in range(args.repeats):
        for name, python in engines.items():
            probe = probe_engine(model, n_threads=threads, prompt_tokens=args.build_prompt_tokens,
                                 generated_tokens=args.gen_tokens, python=python)  # fmt: skip
            if probe.outcome != "ok":
                raise SystemExit(f"{name}: {probe.failure_message(model)}")
            runs[name].append(probe)
    print(f"llama.cpp builds, {threads} threads, {args.build_prompt_tokens}-token prompt, {args.gen_tokens} generated, "
          f"best of {args.repeats} (median):")  # fmt: skip
    first_pp = None
    for name, probes in runs.items():
        pp = sorted(p.prompt_tokens_per_second for p in probes)
        gen = sorted(p.generation_tokens_per_second for p in probes)
        first_pp = first_pp or pp[-1]
        features = [k for k, v in system_info_features(probes[0].system_info).items() if v]
        print(f"  {name:<12} prompt {pp[-1]:6.1f} tok/s ({statistics.median(pp):6.1f})   generation {gen[-1]:5.1f} tok/s "
              f"({statistics.median(gen):5.1f})   prompt ratio to this build {pp[-1] / first_pp:.3f}")  # fmt: skip
        print(f"  {'':<12} built with: {' '.join(features)}")
    print(f"  load average after: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=0, help="0 = every core")
    parser.add_argument("--prefix-words", type=int, default=450, help="evidence prefix (450 words ~ 1,000 tokens)")
    parser.add_argument("--gen-tokens", type=int, default=100)
    parser.add_argument("--cache-mb", type=int, default=512, help="prompt_cache_mb for the speed runs")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (best is reported)")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--builds-only", action="store_true", help="only compare llama.cpp builds")
    parser.add_argument("--compare-build", action="append", default=[], metavar="NAME=PYTHON",
                        help="another interpreter whose llama.cpp build to measure beside this one")  # fmt: skip
    parser.add_argument("--build-prompt-tokens", type=int, default=512)
    args = parser.parse_args()
    logging.getLogger("dspy.clients.lm").setLevel(logging.ERROR)  # max_tokens=1 probes are "truncated"

    print(f"cores: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
    builds(args)
    if args.builds_only:
        return
    if not args.skip_speed:
        speed(args)
    prefix_reuse(args)
    print(f"peak RSS (whole run): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
