"""The dependency order of docs/architecture.md, enforced: a module imports only its own layer and those below.

Every import counts, also one inside a function or under TYPE_CHECKING: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A package not listed here is an error, so a new one has to be placed.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # The root package (its version), the error types and the retry policy import nothing of clearmed.
    (
        "records",
        ("clearmed.signatures", "clearmed.errors", "clearmed.retries", "clearmed.__init__", "clearmed.__version__"),
    ),
    (
        "evidence, backbones, benchmarks, metrics",
        ("clearmed.retrieval", "clearmed.backbones", "clearmed.benchmarks", "clearmed.metrics"),
    ),
    ("programs", ("clearmed.programs",)),
    ("configs and run folders", ("clearmed.config", "clearmed.evaluation")),
    ("optimize", ("clearmed.optimize",)),
    (
        "command line",
        (
            "clearmed.cli",
            "clearmed.commands",
            "clearmed.assemble",
            "clearmed.render",
            "clearmed.demo_bundle",
            "clearmed.testing",
            "clearmed.synthetic_run",
        ),
    ),
]
# Folders installed as `clearmed.<name>` (pyproject's package-dir); `clearmed/` itself is `clearmed`.
PACKAGE_FOLDERS = ("signatures", "programs", "retrieval", "backbones", "benchmarks", "metrics", "optimize", "clearmed")


def layer_of(module: str) -> int:
    matches = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    if not matches:
        raise LookupError(f"{module} is in no layer; place it in tests/test_layers.py and docs/architecture.md")
    return max(matches)[1]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 2:
        parts.pop()
    if parts[0] != "clearmed":
        parts.insert(0, "clearmed")
    return ".".join(parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from clearmed.x import y` may name a submodule y: the finer name decides the layer.
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name == "clearmed" or name.startswith("clearmed.")]


def violations() -> list[str]:
    found: list[str] = []
    for folder in PACKAGE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            importer = module_name(path)
            level = layer_of(importer)
            for line, imported in imported_modules(path):
                target = layer_of(imported)
                if target > level:
                    found.append(
                        f"{path.relative_to(ROOT)}:{line}: {importer} ({LAYERS[level][0]}) imports "
                        f"{imported} ({LAYERS[target][0]})"
                    )
    return found


def test_no_module_imports_a_higher_layer() -> None:
    assert violations() == []


# The adjudication kernel runs in replay and tuning with no model: within the programs layer it may import only
# itself, the records and the program settings, never DSPy, retrieval or a backbone (nor a module that does).
KERNEL = "clearmed.programs.adjudication"
KERNEL_MAY_IMPORT = (KERNEL, "clearmed.signatures.records", "clearmed.programs.settings")
KERNEL_MAY_NOT_IMPORT = ("dspy", "litellm", "clearmed.retrieval", "clearmed.backbones")


def kernel_violations() -> list[str]:
    found: list[str] = []
    for path in sorted((ROOT / "programs" / "adjudication").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                forbidden = any(name == p or name.startswith(p + ".") for p in KERNEL_MAY_NOT_IMPORT)
                outside = name.startswith("clearmed.") and not any(
                    name == p or name.startswith(p + ".") for p in KERNEL_MAY_IMPORT
                )
                if forbidden or outside:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: the kernel imports {name}")
    return found


def test_the_kernel_imports_nothing_heavier_than_records() -> None:
    assert kernel_violations() == []


def test_a_heavy_import_in_the_kernel_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = ROOT / "programs" / "adjudication" / "_probe.py"
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: [probe])
    monkeypatch.setattr(
        Path, "read_text", lambda self, encoding=None: "import dspy\nfrom clearmed.programs.lm import x\n"
    )
    assert kernel_violations() == [
        "programs/adjudication/_probe.py:1: the kernel imports dspy",
        "programs/adjudication/_probe.py:2: the kernel imports clearmed.programs.lm",
    ]


def test_every_module_has_a_layer() -> None:
    for folder in PACKAGE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            layer_of(module_name(path))


def test_an_upward_import_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = ROOT / "metrics" / "_layer_probe.py"
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: [probe] if self == ROOT / "metrics" else [])
    monkeypatch.setattr(
        Path, "read_text", lambda self, encoding=None: "from clearmed.programs.adjudication.rules import agree\n"
    )
    assert violations() == [
        "metrics/_layer_probe.py:1: clearmed.metrics._layer_probe (evidence, backbones, benchmarks, metrics) "
        "imports clearmed.programs.adjudication.rules.agree (programs)"
    ]
