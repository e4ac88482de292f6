"""The engine in this process behind the client library: what the command-line tools and tests use."""
from __future__ import annotations

from app.engine_client import EngineClient
from engine.inproc import InProcessEngine
from engine.messages import EngineConfig


def local_client(config: EngineConfig, on_progress=None, timeout: float | None = None) -> EngineClient:
    """An EngineClient over an in-process engine with `config` loaded (raises EngineFailure)."""
    client = EngineClient(InProcessEngine())
    try:
        client.load(config, on_progress=on_progress, timeout=timeout)
    except BaseException:
        client.close()
        raise
    return client
