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
    # The root package (its version) and the error base class import nothing of clearmed.
    ("records", ("clearmed.signatures", "clearmed.errors", "clearmed.__init__", "clearmed.__version__")),
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


def test_every_module_has_a_layer() -> None:
    for folder in PACKAGE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            layer_of(module_name(path))


def test_an_upward_import_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = ROOT / "metrics" / "_layer_probe.py"
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: [probe] if self == ROOT / "metrics" else [])
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: "from clearmed.programs.rules import agree\n")
    assert violations() == [
        "metrics/_layer_probe.py:1: clearmed.metrics._layer_probe (evidence, backbones, benchmarks, metrics) "
        "imports clearmed.programs.rules.agree (programs)"
    ]
