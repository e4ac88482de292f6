"""A real engine worker on the default model and a server in front of it, one pair per test module."""
from __future__ import annotations

import pytest

from app.engine_client import connect_worker
from app.server import ServerThread
from engine.messages import EngineConfig

SERVER_CONFIG = EngineConfig(model="default", parallel=2)


@pytest.fixture(scope="module")
def engine():
    c = connect_worker(SERVER_CONFIG, timeout=120)
    yield c
    c.close()


@pytest.fixture(scope="module")
def server(engine):
    s = ServerThread(engine, "127.0.0.1", 0)
    s.start()
    yield s
    s.stop()
