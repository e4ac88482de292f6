"""The in-app switch for the OpenAI-compatible server: the GUI's engine (whichever client the bridge
holds now, also after a restart) served on an address the user picks. Imports no Qt and no torch."""
from __future__ import annotations


class _CurrentClient:
    """Forwards to the bridge's client of the moment, so a restarted engine keeps being served."""

    def __init__(self, bridge):
        self._bridge = bridge

    def __getattr__(self, name):
        client = self._bridge.client
        if client is None:
            raise AttributeError(name)
        return getattr(client, name)


class ApiServerControl:
    def __init__(self, bridge):
        self._client = _CurrentClient(bridge)
        self._server = None

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.running

    @property
    def url(self) -> str:
        return self._server.url + "/v1" if self.running else ""

    def start(self, host: str = "127.0.0.1", port: int = 8080, api_key: str | None = None) -> str:
        """Serve (OSError if the address is taken); returns the base URL agents use."""
        from app.server import ServerThread

        self.stop()
        server = ServerThread(self._client, host, port, api_key=api_key or None)
        server.start()
        self._server = server
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
