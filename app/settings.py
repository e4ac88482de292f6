"""Versioned app settings: one JSON file in the user data directory, with migrations.

The directory is `platformdirs.user_data_dir("strata-studio")`, or `$STRATA_STUDIO_HOME` when set
(tests use a tmp dir). The file carries `"version"`; an older file is backed up
(`settings.json.v<N>.bak`) and migrated step by step; a file from a newer app is left untouched
(read-only mode, defaults used); an unreadable file is moved aside and replaced by defaults.
No Qt here: the window stores its geometry as base64 strings through `window_state`.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import time
from pathlib import Path

import msgspec
import platformdirs

from engine.messages import EngineConfig, SamplingParams

SCHEMA_VERSION = 2
MAX_RECENT = 8
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."


def data_dir() -> Path:
    home = os.environ.get("STRATA_STUDIO_HOME")
    d = Path(home) if home else Path(platformdirs.user_data_dir("strata-studio"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _engine_defaults() -> dict:
    return msgspec.structs.asdict(EngineConfig())


def _sampling_defaults() -> dict:
    d = msgspec.structs.asdict(SamplingParams())
    d.update(temperature=0.7, top_p=0.95, max_tokens=512)
    return d


def defaults() -> dict:
    return {
        "version": SCHEMA_VERSION,
        "engine": _engine_defaults(),
        "recent_models": [],
        "new_chat": {"system_prompt": DEFAULT_SYSTEM_PROMPT, "sampling": _sampling_defaults()},
        "window": {"geometry": "", "state": "", "splitters": {}, "side_tab": 0},
        "theme": "system",
        "last_conversation": None,
    }


# ---------------------------------------------------------------- migrations

def _v1_to_v2(d: dict) -> dict:
    """v1 (first layout) was flat: model/devices/layer_split/... and geometry at the top level."""
    engine = _engine_defaults()
    for key in list(engine):
        if key in d:
            engine[key] = d.pop(key)
    out = {"version": 2, "engine": engine, "recent_models": list(d.pop("recent", []))}
    out["window"] = {"geometry": d.pop("geometry", ""), "state": "", "splitters": {}, "side_tab": 0}
    if "system_prompt" in d or "temperature" in d:
        s = _sampling_defaults()
        if "temperature" in d:
            s["temperature"] = float(d.pop("temperature"))
        out["new_chat"] = {"system_prompt": d.pop("system_prompt", DEFAULT_SYSTEM_PROMPT), "sampling": s}
    out.update({k: v for k, v in d.items() if k != "version"})
    return out


MIGRATIONS = {1: _v1_to_v2}  # from-version -> function returning the next version's dict


def migrate(d: dict) -> dict:
    v = int(d.get("version", 1))
    while v < SCHEMA_VERSION:
        d = MIGRATIONS[v](copy.deepcopy(d))
        nv = int(d["version"])
        assert nv > v, f"migration from v{v} did not advance the version"
        v = nv
    return d


def _fill(target: dict, base: dict) -> dict:
    """Add keys missing from `target` (recursively) with the values from `base`."""
    for k, v in base.items():
        if k not in target:
            target[k] = copy.deepcopy(v)
        elif isinstance(v, dict) and isinstance(target[k], dict) and k not in ("splitters",):
            _fill(target[k], v)
    return target


def _struct_from(d: dict, default):
    """A msgspec struct from a saved dict; a value of the wrong type keeps the default for that field."""
    cls, good = type(default), msgspec.structs.asdict(default)
    if not isinstance(d, dict):
        return default
    for k, v in d.items():
        if k in good:
            try:
                msgspec.convert({**good, k: v}, cls)
                good[k] = v
            except msgspec.ValidationError:
                pass
    return msgspec.convert(good, cls)


# ---------------------------------------------------------------- the settings object

class Settings:
    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path else data_dir() / "settings.json"
        self.read_only = False
        self.notes: list[str] = []   # what happened while loading (migrated, reset, ...)
        self.data = self._load()

    def _load(self) -> dict:
        if not self.path.exists():
            return defaults()
        try:
            raw = json.loads(self.path.read_text("utf-8"))
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            shutil.move(self.path, aside)
            self.notes.append(f"settings file unreadable ({e}); moved to {aside.name}, defaults used")
            return defaults()
        v = int(raw.get("version", 1))
        if v > SCHEMA_VERSION:
            self.read_only = True
            self.notes.append(f"settings file is version {v}, newer than this app ({SCHEMA_VERSION}); not saving")
            return defaults()
        if v < SCHEMA_VERSION:
            shutil.copy2(self.path, self.path.with_name(f"{self.path.name}.v{v}.bak"))
            raw = migrate(raw)
            self.notes.append(f"settings migrated from v{v} to v{SCHEMA_VERSION}")
        return _fill(raw, defaults())

    def save(self) -> None:
        if self.read_only:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=True), "utf-8")
        os.replace(tmp, self.path)

    # -- engine
    def engine_config(self) -> EngineConfig:
        return _struct_from(self.data["engine"], EngineConfig())

    def set_engine_config(self, cfg: EngineConfig) -> None:
        self.data["engine"] = msgspec.structs.asdict(cfg)
        if cfg.model not in ("", "default"):
            self.add_recent_model(cfg.model)

    @property
    def recent_models(self) -> list[str]:
        return list(self.data["recent_models"])

    def add_recent_model(self, path: str) -> None:
        r = [p for p in self.data["recent_models"] if p != path]
        self.data["recent_models"] = [path, *r][:MAX_RECENT]

    # -- new chats
    def new_chat_defaults(self) -> tuple[str, SamplingParams]:
        nc = self.data["new_chat"]
        return str(nc["system_prompt"]), _struct_from(nc["sampling"], SamplingParams(**_sampling_defaults()))

    def set_new_chat_defaults(self, system_prompt: str, sampling: SamplingParams) -> None:
        self.data["new_chat"] = {"system_prompt": system_prompt, "sampling": msgspec.structs.asdict(sampling)}

    # -- window layout (base64 strings from QByteArray.toBase64)
    @property
    def window(self) -> dict:
        return self.data["window"]
