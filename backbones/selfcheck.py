"""Run the llama.cpp engine once in a child process before this process trusts it with a model call.

A llama.cpp build can load a model and then die on its first real decode: a ``-march=native`` build on a
VM that advertises AMX but cannot execute it gets SIGILL inside ``ggml_backend_amx_mul_mat``. In-process
that kills ``clearmed`` with "Illegal instruction" and no hint. In a child it becomes one clear line
naming the cause and the reinstall command. A passing check is cached per (engine build, model file, CPU),
so it costs one model load (~2 s) once, and nothing afterwards; a home directory shared with another CPU (a
cluster, a migrated VM) sees a different key and checks again.

The same probe measures prompt and generation speed for ``clearmed doctor`` and the engine benchmark.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from clearmed.backbones.engine_build import REINSTALL_COMMAND, cpu_identity, default_cache_root

__all__ = [
    "ENGINE_CHECK_SKIP_ENV",
    "EngineCheckError",
    "EngineProbe",
    "engine_build_identity",
    "ensure_engine_works",
    "probe_engine",
]

ENGINE_CHECK_SKIP_ENV: Final = "CLEARMED_SKIP_ENGINE_CHECK"
CHECK_PROMPT_TOKENS: Final = 48
CHECK_GENERATED_TOKENS: Final = 4

# Runs in the child with nothing but llama_cpp: argv = model path, threads, prompt tokens, generated tokens.
# Exit 3 with {"load_error": ...} when the model does not load; a crash shows as a signal to the parent.
_CHILD: Final = r"""
import json, sys, time
model_path, threads, n_prompt, n_gen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
import llama_cpp
info = {"system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace"), "n_threads": threads}
started = time.perf_counter()
try:
    llm = llama_cpp.Llama(model_path=model_path, n_ctx=max(512, n_prompt + n_gen + 16), n_batch=512,
                          n_threads=threads, n_threads_batch=threads, flash_attn=True, verbose=False)
except Exception as exc:
    print(json.dumps({**info, "load_error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(3)
info["load_seconds"] = time.perf_counter() - started
text = b" The patient presented with fever, cough and a rash; Koplik spots were seen on the buccal mucosa."
tokens = llm.tokenize(b"Case:" + text * (n_prompt // 20 + 1))[:n_prompt]
started = time.perf_counter()
llm.eval(tokens)
info["prompt_tokens"], info["prompt_seconds"] = len(tokens), time.perf_counter() - started
import numpy as np
n_vocab = llm.n_vocab()
started = time.perf_counter()
for _ in range(n_gen):  # greedy decoding straight from the logits: the engine's speed, not the sampler's
    llm.eval([int(np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,)).argmax())])
info["generated_tokens"], info["generation_seconds"] = n_gen, time.perf_counter() - started
print(json.dumps(info))
"""

_SIGNAL_CAUSES: Final[dict[int, str]] = {
    signal.SIGILL: "this llama.cpp build uses CPU instructions this machine cannot execute (most often AMX or "
    "AVX-512 compiled in by a -march=native build on a CPU that advertises them)",
    signal.SIGSEGV: "llama.cpp crashed: a build made for another CPU, or a damaged model file",
    signal.SIGBUS: "llama.cpp crashed reading memory: a damaged or truncated model file",
}

ProbeOutcome = Literal["ok", "crashed", "load_failed", "timed_out", "failed"]


class EngineCheckError(RuntimeError):
    """The engine cannot run here; the message is one line: what failed, the likely cause, the fix."""


class EngineProbe(BaseModel):
    """What one child run of the engine showed."""

    model_config = ConfigDict(extra="forbid")

    outcome: ProbeOutcome
    detail: str = ""
    signal_name: str | None = None
    system_info: str = ""
    n_threads: int = 0
    load_seconds: float | None = None
    prompt_tokens: int = 0
    prompt_seconds: float | None = None
    generated_tokens: int = 0
    generation_seconds: float | None = None

    @property
    def prompt_tokens_per_second(self) -> float | None:
        return self.prompt_tokens / self.prompt_seconds if self.prompt_seconds else None

    @property
    def generation_tokens_per_second(self) -> float | None:
        return self.generated_tokens / self.generation_seconds if self.generation_seconds else None

    def failure_message(self, model_path: str) -> str:
        """One line for the user; only meaningful when ``outcome != "ok"``."""
        reinstall = f"rebuild it portably: {REINSTALL_COMMAND}"
        if self.outcome == "crashed":
            cause = _SIGNAL_CAUSES.get(_signal_number(self.signal_name), "llama.cpp crashed")
            return f"the llama.cpp engine died with {self.signal_name} on a short test prompt: {cause}; {reinstall}"
        if self.outcome == "load_failed":
            return (
                f"llama.cpp could not load the model file {model_path} ({self.detail}); delete it to have it "
                "reassembled and verified, or point backbones.main.model_path at a valid GGUF file"
            )
        if self.outcome == "timed_out":
            return f"the llama.cpp engine did not answer a short test prompt ({self.detail}); {reinstall}"
        return f"the llama.cpp engine failed its self-check ({self.detail}); {reinstall}"


def _signal_number(name: str | None) -> int:
    try:
        return int(signal.Signals[name]) if name else 0
    except KeyError:
        return 0


def _no_core_dump() -> None:  # pragma: no cover - runs in the child between fork and exec
    import resource  # POSIX only; Windows has no core dumps to suppress (and no preexec_fn)

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def probe_engine(
    model_path: str,
    *,
    n_threads: int,
    prompt_tokens: int = CHECK_PROMPT_TOKENS,
    generated_tokens: int = CHECK_GENERATED_TOKENS,
    python: str = sys.executable,
    child_argv: Sequence[str] | None = None,
    timeout: float = 600.0,
) -> EngineProbe:
    """Load ``model_path`` and decode a short prompt in a child process; never raises for a child's failure.

    ``child_argv`` replaces the child command (tests simulate crashes with it); ``python`` runs the real
    child under another interpreter (the engine benchmark compares two builds that way).
    """
    argv = list(child_argv) if child_argv is not None else [python, "-c", _CHILD]
    argv += [model_path, str(n_threads), str(prompt_tokens), str(generated_tokens)]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            preexec_fn=_no_core_dump if os.name == "posix" else None,
        )
    except subprocess.TimeoutExpired:
        return EngineProbe(outcome="timed_out", detail=f"no answer within {timeout:.0f} s")
    except OSError as exc:
        return EngineProbe(outcome="failed", detail=f"could not start {argv[0]}: {exc.strerror or exc}")
    report = _last_json_line(done.stdout)
    fields: dict[str, Any] = {k: v for k, v in report.items() if k in EngineProbe.model_fields and k != "outcome"}
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name if -done.returncode in signal.valid_signals() else None
        name = name or f"signal {-done.returncode}"
        return EngineProbe(outcome="crashed", signal_name=name, detail=f"killed by {name}", **fields)
    if "load_error" in report:
        return EngineProbe(outcome="load_failed", detail=str(report["load_error"]), **fields)
    if done.returncode != 0 or "prompt_seconds" not in report:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return EngineProbe(outcome="failed", detail=last[:300], **fields)
    return EngineProbe(outcome="ok", **fields)


def _last_json_line(stdout: str) -> dict[str, object]:
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        return value if isinstance(value, dict) else {}
    return {}


def engine_build_identity() -> str:
    """A fingerprint of the installed llama.cpp shared libraries (names, sizes, mtimes); "" if absent."""
    spec = importlib.util.find_spec("llama_cpp")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return ""
    lib_dir = Path(next(iter(spec.submodule_search_locations))) / "lib"
    digest = hashlib.sha256()
    for path in sorted(lib_dir.glob("*")):
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


def _check_key(model_path: str) -> str:
    """The engine build, the model file and the CPU: a pass on one CPU says nothing about another's."""
    stat = Path(model_path).stat()
    cpu = cpu_identity(platform.machine(), platform.system())
    raw = f"{engine_build_identity()}|{Path(model_path).resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{cpu}"
    return hashlib.sha256(raw.encode()).hexdigest()


_passed_in_process: set[str] = set()


def ensure_engine_works(
    model_path: str,
    *,
    n_threads: int,
    cache_dir: Path | None = None,
    child_argv: Sequence[str] | None = None,
) -> None:
    """Raise `EngineCheckError` unless the engine has been seen to decode with this build, model file and CPU.

    Passing results are remembered in ``<cache>/engine-checks/<key>.json`` (and in this process); failures
    are not, so a rebuilt engine, a replaced model file or another CPU is checked afresh.
    ``CLEARMED_SKIP_ENGINE_CHECK=1`` skips the check for those who know their build.
    """
    if os.environ.get(ENGINE_CHECK_SKIP_ENV) == "1":
        return
    key = _check_key(model_path)
    if key in _passed_in_process:
        return
    record = (cache_dir or default_cache_root()) / "engine-checks" / f"{key}.json"
    if record.is_file():
        _passed_in_process.add(key)
        return
    probe = probe_engine(model_path, n_threads=n_threads, child_argv=child_argv)
    if probe.outcome != "ok":
        raise EngineCheckError(probe.failure_message(model_path))
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(probe.model_dump_json(indent=2) + "\n", encoding="utf-8")
    _passed_in_process.add(key)
