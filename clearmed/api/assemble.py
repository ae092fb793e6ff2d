"""Config -> a ready program: LMs per role, the local retriever, the web search and quality priors, recorded
pathways in the place of live ones, and a tune or compile artifact's prompts and thresholds loaded.

The only place that joins the packages together; everything below it is usable and testable alone. A run
(`clearmed.api.evaluate`) and one question (`clearmed ask`) build their program here alike.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import dspy
from dspy.utils.caching import default_cache_dir

from clearmed.backbones.factory import build_lm
from clearmed.config import ClearmedConfig
from clearmed.core.console import user_console
from clearmed.core.errors import UsageError
from clearmed.programs.baselines import PATHWAY_OF, SinglePathway
from clearmed.programs.catalog import PROGRAMS
from clearmed.programs.clear import CLEAR
from clearmed.retrieval.config import CorpusConfig, CorpusRetriever
from clearmed.retrieval.factory import build_retriever, build_web_search
from clearmed.signatures.records import PathwayName
from clearmed.signatures.records.settings import CLEAR_VARIANTS, clear_variant_settings

if TYPE_CHECKING:
    from clearmed.optimize.artifacts import ProgramArtifact
    from clearmed.recorded import RecordedPathway


def build_role_lms(config: ClearmedConfig, roles: tuple[str, ...] = ("main", "assessor")) -> dict[str, dspy.BaseLM]:
    """One LM per configured role; roles sharing an identical backbone table share one LM object."""
    built: dict[str, dspy.BaseLM] = {}
    for role in roles:
        backbone = config.backbones.get(role)
        if backbone is None:
            continue
        twin = next((r for r, lm in built.items() if config.backbones[r] == backbone), None)
        built[role] = built[twin] if twin else build_lm(backbone, role=role, source=config.source)
    return built


# The LM cache folder of a config that names none: $DSPY_CACHEDIR as the process started, else DSPy's default.
_PROCESS_LM_CACHE_DIR = default_cache_dir()


def configure_lm_cache(config: ClearmedConfig) -> None:
    """Point DSPy's LM cache at the config's folder (``[run] lm_cache_dir``, else the process's default), so each
    config's replies go to its own folder, each cell of a suite too. The folder used to be set once per process (the
    first config's won, for every later cell). A disk cache switched off (`dspy.configure_cache`, the tests) stays
    off; the memory cache keeps its setting and starts empty with a new folder."""
    wanted = os.fspath(config.run.lm_cache_dir.expanduser()) if config.run.lm_cache_dir else _PROCESS_LM_CACHE_DIR
    cache = vars(dspy).get("cache")  # not `dspy.cache`: reading it builds DSPy's default cache
    if cache is None:  # DSPy builds it on first use, in $DSPY_CACHEDIR
        os.environ["DSPY_CACHEDIR"] = wanted
        return
    current = getattr(cache, "disk_cache_dir", None)
    if not getattr(cache, "enable_disk_cache", False) or (
        current is not None and os.path.realpath(current) == os.path.realpath(wanted)
    ):
        return
    dspy.configure_cache(
        enable_disk_cache=True, enable_memory_cache=bool(cache.enable_memory_cache), disk_cache_dir=wanted
    )
    with contextlib.suppress(Exception):  # the previous folder's connections; nothing reads it any more
        cache.disk_cache.close()


def build_clear(config: ClearmedConfig, *, role_lms: dict[str, dspy.BaseLM] | None = None) -> CLEAR:
    program = build_program("clear", config, role_lms=role_lms)
    assert isinstance(program, CLEAR)
    return program


def build_program(
    name: str,
    config: ClearmedConfig,
    *,
    role_lms: dict[str, dspy.BaseLM] | None = None,
    pathways: Mapping[PathwayName, dspy.Module] | None = None,
    artifact: ProgramArtifact | str | Path | None = None,
) -> CLEAR | SinglePathway:
    """A program by name (see PROGRAMS), built from the config; evidence backends only where it needs them.

    `pathways` puts recorded (or absent) pathways in the place of live ones (`programs.pathways.recorded`); the
    local corpus is then not opened unless the local pathway runs live. `artifact` (a `clearmed compile` / `clearmed
    tune` folder, or one loaded) is loaded onto it: its thresholds into the config the program is built from, its
    prompts onto the built program (what did not transfer is said on stderr), so one question is one call."""
    if name not in PROGRAMS:
        raise UsageError(f"unknown program {name!r}; choose one of {', '.join(PROGRAMS)}")
    loaded, config = artifact_of(artifact, config)
    configure_lm_cache(config)
    lms = role_lms if role_lms is not None else build_role_lms(config)
    pathways = pathways or {}
    program = _build_live(name, config, lms, search_corpus="local" not in pathways)
    use_recorded_pathways(program, pathways)
    _load_artifact(program, loaded, config)
    return program


def _build_live(
    name: str, config: ClearmedConfig, lms: dict[str, dspy.BaseLM], *, search_corpus: bool
) -> CLEAR | SinglePathway:
    if name in CLEAR_VARIANTS:
        settings = clear_variant_settings(name, config.program)
        assert settings is not None
        program = CLEAR(
            build_retriever(config.corpus) if config.corpus is not None and search_corpus else None,
            build_web_search(config.search) if config.search is not None else None,
            settings=settings,
            thresholds=config.thresholds,
            quality_priors=config.quality_priors,
            role_lms=lms,
        )
        program.program_name = name
        return program
    corpus = local_corpus(name, config) if search_corpus else None
    return SinglePathway(
        name,  # type: ignore[arg-type]
        build_retriever(corpus) if corpus is not None else None,
        build_web_search(config.search) if name == "online" and config.search is not None else None,
        settings=config.program,
        quality_priors=config.quality_priors,
        role_lms=lms,
    )


# The MedRAG baselines search with the retriever they are named after; CLEAR's programs with the config's.
MEDRAG_RETRIEVERS: dict[str, CorpusRetriever] = {"medrag": "bm25", "medrag-medcpt": "medcpt"}


def local_corpus(name: str, config: ClearmedConfig) -> CorpusConfig | None:
    """The corpus a program's local pathway searches (None: it has none): CLEAR's searches the config's."""
    return config.corpus if name in CLEAR_VARIANTS else medrag_corpus(name, config)


def medrag_corpus(name: str, config: ClearmedConfig) -> CorpusConfig | None:
    """The corpus a MedRAG baseline searches: the config's, with the baseline's retriever (None: no local search)."""
    retriever = MEDRAG_RETRIEVERS.get(name)
    if retriever is None or config.corpus is None:
        return None
    if retriever != "bm25" and config.corpus.backend != "lucene":
        raise UsageError(
            f'{name} searches MedCPT indexes in MedRAG\'s layout: set [corpus] backend = "lucene", db_dir and corpora'
        )
    return config.corpus.model_copy(update={"retriever": retriever})


def use_recorded_pathways(program: CLEAR | SinglePathway, pathways: Mapping[PathwayName, dspy.Module]) -> None:
    """Put recorded (or absent) pathways in the place of the program's live ones (`programs.pathways.recorded`);
    the adjudication stays live. A baseline takes only its own pathway."""
    for pathway, module in pathways.items():
        if isinstance(program, CLEAR):
            setattr(program, pathway, module)
        elif PATHWAY_OF[program.program_name] == pathway:
            program.pathway = module
        else:
            raise UsageError(
                f"{program.program_name} runs the {PATHWAY_OF[program.program_name]} pathway "
                f"alone; --pathway {pathway}=... does not apply to it"
            )


def artifact_of(
    artifact: ProgramArtifact | str | Path | None, config: ClearmedConfig
) -> tuple[ProgramArtifact | None, ClearmedConfig]:
    """The `--program-artifact` (None: none given; a folder is loaded) and the config carrying its thresholds."""
    if artifact is None or isinstance(artifact, (str, Path)):
        if not artifact:
            return None, config
        from clearmed.optimize.artifacts import with_artifact

        return with_artifact(str(artifact), config)
    return artifact, config.model_copy(update={"thresholds": artifact.thresholds})


def _load_artifact(module: dspy.Module, artifact: ProgramArtifact | None, config: ClearmedConfig) -> None:
    """The artifact's prompts and thresholds onto a built module; what did not transfer is said on stderr."""
    if artifact is None:
        return
    from clearmed.optimize.artifacts import apply_artifact

    for warning in apply_artifact(module, artifact, config):
        user_console(stderr=True).print(f"[yellow]warning:[/] {warning}", highlight=False)


def program_with_artifact(
    program: object,
    config: ClearmedConfig,
    artifact: ProgramArtifact | None,
    recorded: Sequence[RecordedPathway] = (),
) -> dspy.Module:
    """The module to run: the program built by name with its recorded pathways, or the module given; with the
    artifact's prompts and thresholds loaded (what did not transfer is said on stderr). `clearmed ask` builds its
    program here too, so one question and a run load an artifact alike."""
    if isinstance(program, str):
        pathways = {r.pathway: r.module() for r in recorded}
        return build_program(program, config, pathways=pathways, artifact=artifact)
    if recorded:
        raise UsageError("--pathway replaces a pathway of a program built by name, not of a module you built")
    module = cast(dspy.Module, program)  # the API door checked it is a module
    _load_artifact(module, artifact, config)
    return module
