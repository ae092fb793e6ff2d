"""The structure of docs/architecture.md, enforced.

The layers are import-linter contracts in pyproject.toml ([tool.importlinter]); CI runs `lint-imports`, and so does
this suite. What import-linter does not check is here: seen with the remapped folders (`programs/`, `signatures/`,
...) under `clearmed/`, no two folders import each other and the folders form no circle; no two modules of
programs/, retrieval/ and backbones/ share a file name; and the kernel and replay tuning load no DSPy.

Every import counts, also one inside a function or under TYPE_CHECKING: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
# Installed name -> folder in the checkout (pyproject's package-dir): `clearmed.programs` is `programs/`.
PACKAGE_DIRS: dict[str, str] = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]


def module_files() -> dict[str, Path]:
    """Every module of the package by its installed name."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            found.setdefault(name, path)  # `clearmed/` itself would list the remapped folders twice otherwise
    return found


# The package face, clearmed/__init__.py: a room of its own above every floor. It re-exports the Python API from
# the top (lazily) and the version from the ground, and no module of the package imports it.
FACE = "clearmed"
FACE_ROOM = "clearmed/__init__.py"


def folder_of(module: str, modules: dict[str, Path]) -> str:
    """The folder a module's file is in, named as if the remapped folders were under `clearmed/` (the face apart)."""
    if module == FACE:
        return FACE_ROOM
    path = modules[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return package.replace(".", "/")


def imported_modules(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `path` imports, lazily or not (`from a import b` counts as `a.b` when b is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def folder_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        here = folder_of(module, modules)
        for target in imported_modules(path, modules):
            there = folder_of(target, modules)
            if there != here:
                graph.setdefault(here, set()).add(there)
    return graph


def mutual_pairs(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, set()))


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of folders, if there is one."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_two_folders_import_each_other_and_no_circle() -> None:
    graph = folder_graph(module_files())
    assert mutual_pairs(graph) == []
    assert circle(graph) is None


def test_no_module_imports_the_package_face() -> None:
    modules = module_files()
    importers = [name for name, path in modules.items() if name != FACE and FACE in imported_modules(path, modules)]
    assert importers == []  # the version is clearmed.core.version; the API's names come from their own modules


def test_a_circle_of_folders_is_caught() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circle(graph) == ["a", "b", "c", "a"]
    assert mutual_pairs({"a": {"b"}, "b": {"a"}}) == [("a", "b")]
    assert circle({"a": {"b"}, "b": set()}) is None


def test_folders_are_named_as_under_clearmed() -> None:
    modules = module_files()
    assert folder_of("clearmed.programs.adjudication.rules", modules) == "clearmed/programs/adjudication"
    assert folder_of("clearmed.programs.adjudication", modules) == "clearmed/programs/adjudication"
    assert folder_of("clearmed.config", modules) == "clearmed"
    assert folder_of("clearmed", modules) == FACE_ROOM
    assert "clearmed/cli" in folder_graph(modules)


def test_no_two_modules_of_programs_retrieval_and_backbones_share_a_name() -> None:
    # Each part's own config.py and factory.py are the one exception: they are that part's config and factory.
    names = Counter(
        path.name
        for folder in ("programs", "retrieval", "backbones")
        for path in (ROOT / folder).rglob("*.py")
        if path.name not in {"__init__.py", "config.py", "factory.py"}
    )
    assert [name for name, count in names.items() if count > 1] == []


def _lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    executable = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if executable is None:
        pytest.skip("import-linter is not installed (the dev extra installs it)")
    # Run outside the checkout: import-linter puts the working directory first on sys.path, and the checkout's
    # `clearmed/` is not the installed package (the remapped folders are beside it).
    return subprocess.run([executable, str(config)], cwd=config.parent, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_hold(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text(PYPROJECT.read_text(encoding="utf-8"), encoding="utf-8")
    result = _lint_imports(config)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout or " broken" not in result.stdout


def test_a_contract_that_the_imports_break_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "clearmed"\n\n[[tool.importlinter.contracts]]\n'
        'name = "upside down"\ntype = "layers"\nlayers = ["clearmed.core", "clearmed.cli"]\n',
        encoding="utf-8",
    )
    result = _lint_imports(config)
    assert result.returncode == 1
    assert "upside down BROKEN" in result.stdout


@pytest.mark.parametrize("module", ["clearmed.optimize.tuning", "clearmed.programs.adjudication"])
def test_replay_tuning_and_the_kernel_load_no_dspy(module: str) -> None:
    probe = f"import sys, {module}; sys.exit(int(any(m == 'dspy' or m.startswith('dspy.') for m in sys.modules)))"
    assert subprocess.run([sys.executable, "-c", probe], cwd=ROOT.parent, timeout=120).returncode == 0


def _markdown_literals(path: Path) -> list[str]:
    """The string literals (f-string parts too) of a module that draw a markdown table rule or a section heading."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and ("|---" in node.value or any(line.startswith("### ") for line in node.value.split("\n")))
    ]


def test_evaluation_writes_no_markdown() -> None:
    """evaluation/ (the harness) and numbers/ draw nothing; their tables and sections are report/'s
    (`report.markdown`). The import contract keeps matplotlib and Jinja2 out; this keeps the markdown writers out."""
    rooms = (["clearmed", "evaluation"], ["clearmed", "numbers"])
    files = {name: path for name, path in module_files().items() if name.split(".")[:2] in rooms}
    assert {"clearmed.evaluation.summary", "clearmed.numbers.compare"} <= set(files)
    drawn = {name: found for name, path in files.items() if (found := _markdown_literals(path))}
    assert drawn == {}
    assert _markdown_literals(module_files()["clearmed.report.markdown"])  # the probe sees the tables where they are


# Package faces (docs/architecture.md "Package faces"): one convention for every `__init__.py`. Its docstring names
# each public module and subfolder of its package, so a reader learns the package from it; what it offers (a name
# it imports from its own package or defines) is exactly its `__all__`, and a face without `__all__` offers nothing.
def package_faces() -> dict[str, Path]:
    return {name: path for name, path in module_files().items() if path.name == "__init__.py"}


def _offered(tree: ast.Module, package: str) -> set[str]:
    """The public names a face's top level imports from its own package or defines (not those it only uses)."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and (node.level or node.module.startswith(f"{package}.")):
            found |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            found.add(node.name)
    return {name for name in found if not name.startswith("_") or name == "__version__"}


def _declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


def face_problems(package: str, path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree)
    if not docstring:
        return [f"{package}: no docstring"]
    problems = []
    for part in sorted(path.parent.iterdir()):
        name = part.stem if part.suffix == ".py" else part.name
        is_module = part.suffix == ".py" or (part / "__init__.py").is_file()
        if is_module and not name.startswith("_") and not re.search(rf"\b{re.escape(name)}\b", docstring):
            problems.append(f"{package}: the docstring does not name {part.name}")
    offered, declared = _offered(tree, package), _declared_all(tree)
    if declared is None and offered:
        problems.append(f"{package}: offers {sorted(offered)} with no __all__")
    elif declared is not None and sorted(offered - set(declared)):
        problems.append(f"{package}: offers {sorted(offered - set(declared))} outside __all__")
    return problems


def test_every_package_face_follows_the_one_convention() -> None:
    assert [problem for package, path in package_faces().items() for problem in face_problems(package, path)] == []


@pytest.mark.parametrize("package", sorted(package_faces()))
def test_every_name_in_a_faces_all_is_there(package: str) -> None:
    module = importlib.import_module(package)
    assert [name for name in getattr(module, "__all__", []) if not hasattr(module, name)] == []


def test_a_face_that_breaks_the_convention_is_caught(tmp_path: Path) -> None:
    (tmp_path / "widgets.py").write_text("", encoding="utf-8")
    face = tmp_path / "__init__.py"
    face.write_text('"""The widgets."""\nfrom clearmed.pkg.widgets import Widget\n', encoding="utf-8")
    assert face_problems("clearmed.pkg", face) == [
        "clearmed.pkg: offers ['Widget'] with no __all__",
    ]
    face.write_text(
        '"""The widgets."""\nfrom .widgets import Gadget, Widget\n\n__all__ = ["Widget"]\n', encoding="utf-8"
    )
    assert face_problems("clearmed.pkg", face) == ["clearmed.pkg: offers ['Gadget'] outside __all__"]
    face.write_text('"""Gadgets."""\n', encoding="utf-8")
    assert face_problems("clearmed.pkg", face) == ["clearmed.pkg: the docstring does not name widgets.py"]
    face.write_text("import json\n", encoding="utf-8")
    assert face_problems("clearmed.pkg", face) == ["clearmed.pkg: no docstring"]


# One meaning per name: no two modules define the same public function or class. Commands' `register`, the
# benchmark modules' `parse_row` and an entry point's `main` are one protocol, not two meanings; the pairs below are
# the twins not yet renamed (a ratchet: this list only shrinks).
PROTOCOL_NAMES = frozenset({"register", "parse_row", "main"})
NOT_YET_RENAMED = frozenset({"build_index", "context_window", "domain_of", "read_jsonl", "read_parquet"})


def twin_names() -> dict[str, list[str]]:
    defined: dict[str, list[str]] = {}
    for module, path in module_files().items():
        if module.startswith("clearmed.testing"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(module)
    return {name: modules for name, modules in defined.items() if len(modules) > 1 and name not in PROTOCOL_NAMES}


def test_no_two_modules_define_one_public_name() -> None:
    twins = twin_names()
    assert {name: twins[name] for name in twins if name not in NOT_YET_RENAMED} == {}
    assert sorted(NOT_YET_RENAMED - set(twins)) == [], "renamed: take it off NOT_YET_RENAMED"
