"""Engine error types. Each carries a one-line message meant for the user."""
from __future__ import annotations

from pathlib import Path


class EngineError(Exception):
    """Base class: `str(e)` is one line that says what is wrong and, where possible, what to change."""


class ModelFileError(EngineError):
    """A model file that cannot be used: missing, truncated, not GGUF, unknown architecture or quant."""

    def __init__(self, path: str | Path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class ConfigError(EngineError):
    """A bad engine configuration (layer split, devices, slots, groups, context)."""


class OutOfMemoryError(EngineError):
    """A stage does not fit its device's memory."""


class RequestError(EngineError):
    """A request the engine cannot take (context overflow, bad sampling values)."""
