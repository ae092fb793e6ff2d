"""`check_config`: can this machine run the chosen config, and how fast? The door of `clearmed doctor`;
`DoctorRequest` holds one field per option of the command, `DoctorReport` what each check found.

Checks, in order: the llama.cpp build (version, system info, the CPU flags it was built for against this
CPU's), the embedded model file (path, size, sha256), the engine self-check in a child process with its
prompt and generation tokens/s, then the optional backends the config names (the Tavily key's presence,
OpenAI-compatible endpoints reachable, and whether they return log-probabilities and continue an assistant
message, which log-probability scoring needs, and each remote backbone's context window with where it came from: the
config, the server, or unknown, in which case the first overflow teaches it; for a Lucene corpus, which Java and
pyserini were found and every corpus's index: documents, size, whether it opens). Keys are never printed: only
whether they are set and whether the server accepted them. Healthy when everything the config needs works.

Each check says its lines as it makes them (`say`: the command prints them while the slow engine check runs) and
the report keeps them, so a script reads the same findings the command shows.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from functools import partial
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from clearmed.api.config_choice import request_config
from clearmed.backbones.config import EmbeddedBackbone, RemoteBackbone
from clearmed.backbones.context_window import Window, resolve_window
from clearmed.backbones.engine_build import (
    ENGINE_VERSION,
    REINSTALL_COMMAND,
    build_mismatch,
    cmake_args,
    expected_features,
    read_cpu_flags,
    system_info_features,
)
from clearmed.backbones.llama_runtime import llama_cpp_available
from clearmed.backbones.logprobs import EndpointCapabilities, probe_capabilities
from clearmed.backbones.model_files import ModelFileError, file_sha256, resolve_model_path
from clearmed.backbones.selfcheck import EngineProbe, probe_engine
from clearmed.config import ClearmedConfig
from clearmed.core.http import NoReply, request
from clearmed.retrieval.config import CorpusConfig

BENCH_PROMPT_TOKENS = 256
BENCH_GENERATED_TOKENS = 32

Say = Callable[[str], None]


class DoctorRequest(BaseModel):
    """One field per `clearmed doctor` option of the same name (`-c` is `config`, `--set` is `overrides`)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    config: ClearmedConfig | str | Path | None = None  # a packaged name, a TOML path or a run folder; None: embedded
    overrides: list[str] = []  # SECTION.KEY=VALUE, validated like the file
    no_bench: bool = False  # a short self-check instead of the speed test


class DoctorCheck(BaseModel):
    """One check: what it looked at (a backbone's role, "lucene" or "search"), whether it passed, what it said."""

    subject: str
    passed: bool
    lines: list[str]


class DoctorReport(BaseModel):
    """What `check_config` found: the config's source and each check in the order it ran."""

    config_source: str
    checks: list[DoctorCheck]

    @property
    def healthy(self) -> bool:
        """Everything the config needs works (a hosted model, which is not probed, counts as passed)."""
        return all(check.passed for check in self.checks)


def check_config(request: DoctorRequest, *, say: Say = lambda line: None) -> DoctorReport:
    """Every check the request's config needs, each line said as it is found (the engine check takes a while)."""
    config = request_config(request)
    say(f"config: {config.source}")
    checks: list[DoctorCheck] = []

    def check(subject: str, run: Callable[..., bool]) -> None:
        """Run one check (`run(say=...)`), its lines said as they come and kept in the report."""
        lines: list[str] = []

        def heard(line: str) -> None:
            lines.append(line)
            say(line)

        checks.append(DoctorCheck(subject=subject, passed=run(say=heard), lines=lines))

    for role, backbone in sorted(config.backbones.items()):
        if backbone.kind == "embedded":
            check(role, partial(check_embedded, role, backbone, bench=not request.no_bench))
        elif backbone.kind == "openai_compatible" and backbone.api_base:
            check(role, partial(check_endpoint, role, backbone))
        else:
            check(role, partial(_hosted, role, backbone))
    if config.corpus is not None and config.corpus.backend == "lucene":
        check("lucene", partial(check_lucene, config.corpus))
    search = config.search
    if search is not None and search.backend == "tavily":
        check("search", partial(check_tavily, search.tavily.api_key_env, search.tavily.api_base_url))
    return DoctorReport(config_source=config.source, checks=checks)


def _hosted(role: str, backbone: RemoteBackbone, *, say: Say) -> bool:
    """A hosted model is not probed (a call would be billed): its key's presence and its context window, said."""
    key_note = f", key {_key_state(backbone.api_key_env)}" if backbone.api_key_env else ""
    say(f"{role}: hosted model {backbone.model}{key_note} (not probed: a call would be billed)")
    report_window(role, resolve_window(backbone), say=say)
    return True


def check_embedded(role: str, backbone: EmbeddedBackbone, *, bench: bool, say: Say) -> bool:
    """Engine build, model file and a child-process run of both; False when the engine cannot answer here."""
    cpu = read_cpu_flags()
    wanted = expected_features(cmake_args(platform.machine(), platform.system(), cpu))
    amx = sorted(flag for flag in cpu if flag.startswith("amx"))
    say(f"cpu: {platform.machine()}, {os.cpu_count()} cores, AMX advertised: {', '.join(amx) or 'no'}")
    if not llama_cpp_available():
        say(f"{role}: llama-cpp-python is not installed; install it with: {REINSTALL_COMMAND}")
        return False
    try:
        model_path = resolve_model_path(backbone)
    except ModelFileError as err:
        say(f"{role}: model file unavailable: {err.detail}")
        return False
    size = model_path.stat().st_size
    say(f"{role}: model {model_path} ({size / 1e9:.2f} GB, sha256 {file_sha256(model_path)})")
    tokens = (BENCH_PROMPT_TOKENS, BENCH_GENERATED_TOKENS) if bench else (48, 4)
    probe = probe_engine(
        str(model_path), n_threads=backbone.threads, prompt_tokens=tokens[0], generated_tokens=tokens[1]
    )
    if probe.system_info:
        say(f"{role}: llama.cpp {ENGINE_VERSION}, {probe.n_threads} threads, {probe.system_info.strip()}")
        mismatch = build_mismatch(wanted, system_info_features(probe.system_info))
        if mismatch:
            say(f"{role}: the build differs from the portable one for this CPU: {', '.join(mismatch)}")
    if probe.outcome != "ok":
        say(f"{role}: engine check FAILED: {probe.failure_message(str(model_path))}")
        return False
    say(f"{role}: engine check passed: {_speed(probe)}")
    return True


def _speed(probe: EngineProbe) -> str:
    prompt, generation = probe.prompt_tokens_per_second, probe.generation_tokens_per_second
    return (
        f"load {probe.load_seconds or 0:.1f} s, prompt {prompt or 0:.1f} tok/s ({probe.prompt_tokens} tokens), "
        f"generation {generation or 0:.1f} tok/s ({probe.generated_tokens} tokens)"
    )


def _key_state(env_name: str | None) -> str:
    if not env_name:
        return "not needed"
    return f"{env_name} set" if os.environ.get(env_name, "").strip() else f"{env_name} NOT SET"


def _http_status(url: str, key: str | None, timeout: float = 5.0) -> int | str:
    """The HTTP status of a GET (an int), or why no answer came (a str); the key goes only in the header."""
    try:
        return request("GET", url, api_key=key, timeout=timeout, retried=frozenset()).status
    except NoReply as failed:
        return f"unreachable ({failed.why})"


def check_endpoint(role: str, backbone: RemoteBackbone, *, say: Say) -> bool:
    """GET <api_base>/models: 200 reachable and accepted; 401/403 reachable, key refused."""
    key = os.environ.get(backbone.api_key_env, "").strip() if backbone.api_key_env else None
    url = f"{str(backbone.api_base).rstrip('/')}/models"
    status = _http_status(url, key or None)
    key_note = f", key {_key_state(backbone.api_key_env)}" if backbone.api_key_env else ""
    if status == 200:
        say(f"{role}: {backbone.model} at {backbone.api_base}: reachable{key_note}")
        report_capabilities(role, probe_capabilities(str(backbone.api_base), backbone.model, key or None), say=say)
        report_window(role, resolve_window(backbone, api_key=key or None), say=say)
        return True
    if isinstance(status, int):
        say(f"{role}: {backbone.model} at {backbone.api_base}: answered HTTP {status}{key_note}")
    else:
        say(f"{role}: {backbone.model} at {backbone.api_base}: {status}{key_note}")
    return False


def report_capabilities(role: str, found: EndpointCapabilities, *, say: Say) -> None:
    """What log-probability scoring (``mcq_decoding = "score"``) needs of the endpoint; informational, since a
    backbone without it generates instead (and the run's summary counts scored against generated answers)."""
    logprobs = {True: "yes", False: "no", None: "unknown"}[found.logprobs]
    continues = {True: "accepted", False: "refused", None: "unknown"}[found.continues_message]
    say(f"{role}: log-probabilities: {logprobs}" + (f" ({found.logprobs_note})" if found.logprobs_note else ""))
    say(
        f"{role}: continued assistant message: {continues}"
        + (f" ({found.continue_note})" if found.continue_note else "")
    )


def report_window(role: str, window: Window, *, say: Say) -> None:
    """The backbone's context window and where it came from (`backbones.context_window`); informational: an unknown
    window is learned from the first context-length error, and the stage that met it is refitted and retried."""
    source = {"config": "config", "engine": "engine", "server": "server", "map": "LiteLLM's model map"}.get(
        window.source, window.source
    )
    if window.tokens is not None:
        detail = f": {window.detail}" if window.source == "server" and window.detail else ""
        say(f"{role}: context window {window.tokens:,} tokens ({source}{detail})")
    else:
        why = f" ({window.detail})" if window.detail else ""
        say(f"{role}: context window unknown{why}: the first overflow will teach it")


def check_tavily(api_key_env: str, api_base_url: str | None, *, say: Say) -> bool:
    """Whether the key is set and Tavily's host answers (a GET costs no search credit)."""
    base = api_base_url or "https://api.tavily.com"
    status = _http_status(base, None)
    reach = f"HTTP {status}" if isinstance(status, int) else status
    has_key = bool(os.environ.get(api_key_env, "").strip())
    say(f"search: tavily at {base}: {'reachable' if isinstance(status, int) else reach}, key {_key_state(api_key_env)}")
    return has_key and isinstance(status, int)


def check_lucene(corpus: CorpusConfig, *, say: Say) -> bool:
    """Java and pyserini for the Lucene backend, then each corpus's index; False when any cannot be searched."""
    from clearmed.api.index_info import density_questions
    from clearmed.report.index_lines import lucene_summary
    from clearmed.retrieval.lucene import describe_index
    from clearmed.retrieval.lucene_java import LuceneSetupError, anserini_jar, find_java, pyserini_version

    try:
        java = find_java()
    except LuceneSetupError as err:
        say(f"lucene: {err}")
        return False
    for note in java.passed_over:
        say(f"lucene: passed over {note}")
    say(f"lucene: {java.describe()}")
    try:
        jar = anserini_jar()
    except LuceneSetupError as err:
        say(f"lucene: {err}")
        return False
    say(f"lucene: pyserini {pyserini_version()} ({jar.name})")
    assert corpus.db_dir is not None
    healthy = True
    for name in corpus.lucene_corpora():
        # Shards, and the mean Σdf/N of a few demo questions: the density that sets a query's cost.
        report = describe_index(corpus.db_dir, name, queries=density_questions()).model_dump(mode="json")
        say(f"corpus {name}: {lucene_summary(report)}")
        healthy &= bool(report["opens"])
    return healthy
