"""Settings: defaults, save/load, migration from v1, newer and unreadable files."""
from __future__ import annotations

import json

from app.settings import MAX_RECENT, SCHEMA_VERSION, Settings, data_dir
from engine.messages import EngineConfig, SamplingParams


def test_home_env_overrides_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_STUDIO_HOME", str(tmp_path / "h"))
    assert data_dir() == tmp_path / "h"
    assert Settings().path == tmp_path / "h" / "settings.json"


def test_defaults_and_roundtrip(tmp_path):
    s = Settings(tmp_path / "settings.json")
    assert s.engine_config() == EngineConfig()
    cfg = EngineConfig(model="/m/a.gguf", devices="cpu,cpu", layer_split="15", parallel=2, batch_groups="2")
    s.set_engine_config(cfg)
    s.set_new_chat_defaults("sys", SamplingParams(temperature=0.2, seed=7))
    s.window["geometry"] = "AAAA"
    s.save()
    t = Settings(tmp_path / "settings.json")
    assert t.engine_config() == cfg
    assert t.recent_models == ["/m/a.gguf"]
    assert t.new_chat_defaults() == ("sys", SamplingParams(temperature=0.2, seed=7))
    assert t.window["geometry"] == "AAAA"
    assert json.loads((tmp_path / "settings.json").read_text())["version"] == SCHEMA_VERSION


def test_recent_models_unique_and_bounded(tmp_path):
    s = Settings(tmp_path / "settings.json")
    for i in range(MAX_RECENT + 3):
        s.add_recent_model(f"/m/{i}.gguf")
    s.add_recent_model("/m/5.gguf")
    assert s.recent_models[0] == "/m/5.gguf"
    assert len(s.recent_models) == MAX_RECENT and len(set(s.recent_models)) == MAX_RECENT


def test_migrates_v1_with_backup(tmp_path):
    p = tmp_path / "settings.json"
    p.write_text(json.dumps({"version": 1, "model": "/x.gguf", "devices": "cpu,cpu", "parallel": 4,
                             "recent": ["/x.gguf"], "geometry": "QUJD", "temperature": 0.3}))
    s = Settings(p)
    assert (tmp_path / "settings.json.v1.bak").exists()
    assert s.engine_config() == EngineConfig(model="/x.gguf", devices="cpu,cpu", parallel=4)
    assert s.recent_models == ["/x.gguf"] and s.window["geometry"] == "QUJD"
    assert s.new_chat_defaults()[1].temperature == 0.3
    assert any("migrated" in n for n in s.notes)
    s.save()
    assert json.loads(p.read_text())["version"] == SCHEMA_VERSION


def test_newer_file_is_not_overwritten(tmp_path):
    p = tmp_path / "settings.json"
    p.write_text(json.dumps({"version": SCHEMA_VERSION + 1, "future": True}))
    s = Settings(p)
    assert s.read_only
    s.save()
    assert json.loads(p.read_text()) == {"version": SCHEMA_VERSION + 1, "future": True}


def test_unreadable_file_is_moved_aside(tmp_path):
    p = tmp_path / "settings.json"
    p.write_text("{not json")
    s = Settings(p)
    assert s.engine_config() == EngineConfig()
    assert list(tmp_path.glob("settings.json.corrupt-*"))
    assert not p.exists()


def test_missing_keys_filled_and_bad_engine_values_fall_back(tmp_path):
    p = tmp_path / "settings.json"
    p.write_text(json.dumps({"version": SCHEMA_VERSION, "engine": {"parallel": "lots"}}))
    s = Settings(p)
    assert s.engine_config() == EngineConfig()
    assert "splitters" in s.window
