"""A loaded in-process engine for the command-line tools (generate, bench, batch-test)."""
from __future__ import annotations

from engine.errors import ConfigError, EngineError, ModelFileError, OutOfMemoryError, RequestError
from engine.inproc import InProcessEngine
from engine.messages import AddRequest, EngineConfig, ErrorReply, LoadModel, Ready, RequestDone, TokenDelta

_KINDS = {"model_file": ModelFileError, "config": ConfigError, "oom": OutOfMemoryError, "request": RequestError}


def raise_reply(reply: ErrorReply):
    cls = _KINDS.get(reply.kind, EngineError)
    err = cls.__new__(cls)
    Exception.__init__(err, reply.message)
    raise err


class LocalEngine:
    def __init__(self, config: EngineConfig, on_progress=None):
        self.engine = InProcessEngine()
        self.engine.send(LoadModel(config=config))
        self.ready: Ready | None = None
        while self.ready is None:
            msg = self.engine.recv(timeout=600)
            if isinstance(msg, ErrorReply):
                self.engine.close()
                raise_reply(msg)
            if isinstance(msg, Ready):
                self.ready = msg
            elif on_progress is not None and msg is not None:
                on_progress(msg)

    def submit(self, req: AddRequest) -> None:
        self.engine.send(req)

    def events(self, timeout: float = 600):
        """Every message until the engine falls silent for `timeout` seconds."""
        while (msg := self.engine.recv(timeout=timeout)) is not None:
            yield msg

    def generate(self, req: AddRequest, on_text=None) -> tuple[str, list[int], RequestDone]:
        self.submit(req)
        text, ids = [], []
        for msg in self.events():
            if isinstance(msg, TokenDelta) and msg.request_id == req.request_id:
                text.append(msg.text)
                ids += msg.token_ids
                if on_text and msg.text:
                    on_text(msg.text)
            elif isinstance(msg, ErrorReply) and msg.request_id == req.request_id:
                raise_reply(msg)
            elif isinstance(msg, RequestDone) and msg.request_id == req.request_id:
                return "".join(text), ids, msg
        raise EngineError("the engine stopped answering")

    def close(self) -> None:
        self.engine.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
