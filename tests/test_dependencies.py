"""Every third-party package the code imports is declared in pyproject.toml, with a lower bound.

A package that arrives only as another package's dependency can vanish with that package's next release.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("signatures", "programs", "retrieval", "backbones", "benchmarks", "metrics", "optimize", "clearmed")
# Import name -> distribution name, where they differ.
DISTRIBUTION_OF = {
    "llama_cpp": "llama-cpp-python",
    "tavily": "tavily-python",
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "jinja2": "jinja2",
    "jnius": "pyjnius",
    "jnius_config": "pyjnius",
}
FIRST_PARTY = {"clearmed"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_top_level_names() -> dict[str, str]:
    """Top-level module name -> one file importing it, over every non-test source file."""
    found: dict[str, str] = {}
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return {
        name: where
        for name, where in found.items()
        if name not in sys.stdlib_module_names and name not in FIRST_PARTY and name != "__future__"
    }


def declared() -> dict[str, str]:
    """Declared distribution (canonical name) -> its requirement string, over dependencies and extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    table: dict[str, str] = {}
    for requirement in requirements:
        name = re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0]
        table[canonical(name)] = requirement
    return table


def test_every_direct_import_is_declared_with_a_lower_bound() -> None:
    table = declared()
    missing = []
    unbounded = []
    for module, where in sorted(imported_top_level_names().items()):
        distribution = canonical(DISTRIBUTION_OF.get(module, module))
        requirement = table.get(distribution)
        if requirement is None:
            missing.append(f"{module} (imported in {where})")
        elif not re.search(r">=|==|~=", requirement):
            unbounded.append(requirement)
    assert not missing, "imported but not declared in pyproject.toml: " + ", ".join(missing)
    assert not unbounded, "declared without a lower bound: " + ", ".join(unbounded)


def test_the_scan_sees_the_imports_that_used_to_be_undeclared() -> None:
    # Guards the scanner itself: these four were imported and undeclared before issue 13.
    names = imported_top_level_names()
    assert {"requests", "sqlalchemy", "pyarrow", "huggingface_hub"} <= set(names)
