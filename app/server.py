"""OpenAI-compatible HTTP API: one more client of the engine (an EngineClient), never a second engine.

`create_app(client, api_key, max_queue)` builds the FastAPI app; `ServerThread` runs it with uvicorn
on a thread (the GUI's toggle and the tests); `strata serve` (app/server_main.py) runs it headless.
Requests beyond the engine's slots wait in the engine's queue; beyond slots + max_queue the server
answers 503. A client that goes away (mid-stream or while waiting) has its request cancelled at once.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import threading
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from app import openai_types as T
from app.metrics import HttpStats, add_monitoring_routes
from app.reply_reader import ReplyReader, call_json, message
from app.server_errors import DEFAULT_MAX_BODY, ApiError, ClientGone, from_exception, install_error_handlers
from engine.messages import AddRequest, ErrorReply, RequestDone, TokenDelta
from engine.tool_parse import END as CALL_END, ToolCallParser

DEFAULT_MAX_QUEUE = 64
DEFAULT_HOST = "127.0.0.1"      # loopback: nothing listens beyond this machine unless asked
_ERR = {"model": T.ErrorResponse}
log = logging.getLogger("strata.server")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, api_key: str | None) -> str:
    """'' on a loopback address; else one line saying who can reach the server."""
    if is_loopback(host):
        return ""
    where = "every network interface" if host in ("0.0.0.0", "::", "") else host
    if api_key:
        return f"listening on {where}: other machines can reach this server (an API key is required)"
    return (f"listening on {where} without an API key: anyone who can reach this port can use the model "
            "(set an API key, or serve on 127.0.0.1)")


class _Run:
    """One request in the engine, as the HTTP side sees it."""

    def __init__(self, client, add: AddRequest, http: HttpStats):
        self.client, self.add, self.http = client, add, http
        self.id = add.request_id
        self.done: RequestDone | None = None
        self._handle = self._it = None
        self._closed = False
        http.in_flight += 1

    def start(self) -> None:
        try:
            self._handle = self.client.submit(self.add)
            self._it = self._handle.aiter().__aiter__()
        except Exception as e:
            raise from_exception(e) from e

    async def next(self):
        """The next PromptProgress/TokenDelta/RequestDone, or None after RequestDone."""
        if self.done is not None:
            return None
        try:
            ev = await self._it.__anext__()
        except StopAsyncIteration:          # the handle's iterator ends after RequestDone (kept in .done)
            ev = self._handle.done
            if ev is None:
                raise ApiError(500, "the engine ended the request without a final record", "server_error") from None
        except Exception as e:
            self.done = RequestDone(request_id=self.id, finish_reason="error", error=str(e))
            raise from_exception(e) from e
        if isinstance(ev, ErrorReply):
            self.done = RequestDone(request_id=self.id, finish_reason="error", error=ev.message)
            raise from_exception(ev)
        if isinstance(ev, RequestDone):
            self.done = ev
            if ev.finish_reason == "error":
                raise ApiError(500, ev.error or "the engine failed this request", "server_error")
        return ev

    async def collect(self) -> list:
        out = []
        while (ev := await self.next()) is not None:
            out.append(ev)
        return out

    def close(self) -> None:
        """Release the server's hold; cancel the request in the engine if it is still running."""
        if self._closed:
            return
        self._closed = True
        self.http.in_flight -= 1
        if self.done is None and self._handle is not None:
            self.http.add_disconnect()
            try:
                self._handle.cancel()
            except Exception:
                pass   # a dead engine has nothing left to cancel


async def _until_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _race(coro, request: Request):
    """Await `coro`, unless the client goes away first (then ClientGone)."""
    task, watch = asyncio.ensure_future(coro), asyncio.ensure_future(_until_disconnect(request))
    try:
        done, _ = await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        raise ClientGone()
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()


class _EngineStream(StreamingResponse):
    """SSE response that always releases its run: when done, on error and when the client leaves."""

    def __init__(self, gen, run: _Run):
        super().__init__(gen, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._run = run

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._run.close()
            await self.body_iterator.aclose()


def _sse_event(chunk: str) -> dict:
    """OpenAPI schema of one SSE event of a streamed reply (before OpenAPI 3.2 `schema` describes each
    event): its `data` is a JSON chunk, an error body if the engine fails mid-stream, or `[DONE]` last."""
    ref = lambda name: {"$ref": f"#/components/schemas/{name}"}  # noqa: E731
    return {"type": "object", "required": ["data"], "properties": {
        "data": {"anyOf": [
            {"const": "[DONE]"},
            {"type": "string", "contentMediaType": "application/json",
             "contentSchema": {"anyOf": [ref(chunk), ref("ErrorResponse")]}}]},
        "event": {"type": "string"}, "id": {"type": "string"}}}


def _data(obj) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'), ensure_ascii=False)}\n\n"


def _usage(d: RequestDone) -> dict:
    return {"prompt_tokens": d.prompt_tokens, "completion_tokens": d.completion_tokens,
            "total_tokens": d.prompt_tokens + d.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": d.cached_tokens}}


def _timings(d: RequestDone) -> dict:
    return {k: getattr(d, k) for k in T.StrataTimings.model_fields}


def _finish_reason(d: RequestDone, calls: int) -> str:
    return "tool_calls" if calls and d.finish_reason == "stop" else d.finish_reason


async def _sse(run: _Run, first, base: dict, chat: bool, include_usage: bool, reader: ReplyReader | None):
    calls = 0

    def chunk(delta: dict | None, finish: str | None = None) -> str:
        if chat:
            choice = {"index": 0, "delta": delta or {}, "finish_reason": finish, "logprobs": None}
        else:
            choice = {"index": 0, "text": (delta or {}).get("content", ""), "finish_reason": finish, "logprobs": None}
        return _data({**base, "choices": [choice]})

    def chunks(parts: list):
        nonlocal calls
        for kind, p in parts:
            if kind == "call":
                yield chunk({"tool_calls": [{"index": calls, **call_json(p)}]})
                calls += 1
            else:
                yield chunk({"reasoning_content" if kind == "reasoning" else "content": p})

    if chat:
        yield chunk({"role": "assistant", "content": ""})
    ev = first
    try:
        while ev is not None:
            if isinstance(ev, TokenDelta) and ev.text:
                for c in chunks(reader.feed(ev.text) if reader else [("content", ev.text)]):
                    yield c
            ev = await run.next()
    except ApiError as e:
        yield _data(e.body())
        yield "data: [DONE]\n\n"
        return
    for c in chunks(reader.finish() if reader else []):
        yield c
    yield chunk(None, _finish_reason(run.done, calls))
    if include_usage:
        yield _data({**base, "choices": [], "usage": _usage(run.done), "strata": _timings(run.done)})
    yield "data: [DONE]\n\n"


def _chat_fields(body: T.ChatCompletionRequest, model, sampling) -> tuple[dict, ReplyReader | None]:
    """A chat request's AddRequest fields (functions offered, a forced call's opening; `sampling` gets the
    grammar the reply is held to) and how its reply is read (None: as plain text)."""
    fmt = model.tool_format
    plan = T.tool_plan(body, fmt)
    parser = ToolCallParser(fmt, plan.fields["tools"], plan.fields.get("assistant_prefix", "")) if plan.parse else None
    if plan.single and fmt != "llama3":         # the first call's end stops the reply
        sampling.stop.append(CALL_END)
    sampling.grammar = plan.grammar
    inside = T.reasoning_start(body, model.reasoning, plan)
    reader = ReplyReader(inside, parser) if parser or inside is not None else None
    return {"messages": T.chat_messages(body), **plan.fields}, reader


def create_app(client, api_key: str | None = None, max_queue: int = DEFAULT_MAX_QUEUE,
               max_body: int = DEFAULT_MAX_BODY) -> FastAPI:
    """The HTTP app over `client` (an EngineClient, loaded or loading). `api_key` guards all but /health;
    a request body over `max_body` bytes gets 413."""
    app = FastAPI(title="Strata Studio", version="0.1.0", summary="OpenAI-compatible API of the Strata engine")
    http = HttpStats()
    app.state.client, app.state.http, app.state.max_queue, app.state.load_error = client, http, max_queue, None
    install_error_handlers(app, api_key, http, max_body)

    def ready():
        r = client.ready
        if r is None:
            raise ApiError(503, app.state.load_error or "the model is loading; retry when /health says ok",
                           "server_error", code="loading", headers={"Retry-After": "1"})
        return r

    def model_id(r) -> str:
        return r.config.model_name or r.model.name

    def admit(r) -> None:
        max_queue = app.state.max_queue                    # may be changed while serving
        limit = r.config.parallel + max_queue
        if http.in_flight >= limit:
            http.rejected += 1
            raise ApiError(503, f"server busy: {http.in_flight} requests in flight, the limit is {limit} "
                           f"({r.config.parallel} slots + a queue of {max_queue}); retry later",
                           "server_error", code="queue_full", headers={"Retry-After": "1"})

    async def complete(request: Request, body, chat: bool):
        r = ready()
        reader = None
        try:
            sampling = T.sampling_params(body, r.config.ctx)
            if chat:
                fields, reader = _chat_fields(body, r.model, sampling)
            else:
                fields = T.completion_prompt(body)
        except T.Unsupported as e:
            raise ApiError(400, str(e), param=e.param) from None
        admit(r)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        run = _Run(client, AddRequest(request_id=rid, sampling=sampling, **fields), http)
        base = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": model_id(r)}
        try:
            run.start()
            first = await _race(run.next(), request)
            if body.stream:
                include_usage = bool(body.stream_options and body.stream_options.include_usage)
                return _EngineStream(_sse(run, first, base, chat, include_usage, reader), run)
            events = [first] + await _race(run.collect(), request)
        except BaseException:
            run.close()
            raise
        run.close()
        text = "".join(e.text for e in events if isinstance(e, TokenDelta))
        d = run.done
        if chat:
            msg, calls = message(reader.feed(text) + reader.finish()) if reader else \
                ({"role": "assistant", "content": text}, 0)
            choice = {"index": 0, "message": msg}
        else:
            choice, calls = {"index": 0, "text": text}, 0
        obj = {**base, "object": "chat.completion" if chat else "text_completion",
               "choices": [{**choice, "finish_reason": _finish_reason(d, calls), "logprobs": None}],
               "usage": _usage(d), "strata": _timings(d)}
        return JSONResponse(obj)

    stream_doc = {"description": "JSON, or with stream=true an SSE stream of `data:` chunks ending `data: [DONE]`"}

    @app.post("/v1/chat/completions", response_model=None, tags=["openai"],
              responses={200: {"model": T.ChatCompletion, **stream_doc, "content": {"text/event-stream": {
                  "schema": _sse_event("ChatCompletionChunk")}}}, 400: _ERR, 503: _ERR})
    async def chat_completions(body: T.ChatCompletionRequest, request: Request):
        return await complete(request, body, chat=True)

    @app.post("/v1/completions", response_model=None, tags=["openai"],
              responses={200: {"model": T.Completion, **stream_doc, "content": {"text/event-stream": {
                  "schema": _sse_event("Completion")}}}, 400: _ERR, 503: _ERR})
    async def completions(body: T.CompletionRequest, request: Request):
        return await complete(request, body, chat=False)

    @app.get("/v1/models", response_model=T.ModelList, tags=["openai"], responses={503: _ERR})
    async def models():
        r = ready()
        c, m = r.config, r.model
        meta = {"arch": m.arch, "n_layers": m.n_layers, "ctx": c.ctx, "parallel": c.parallel,
                "stages": len(c.stages), "dtype": c.dtype, "mtp_layers": c.mtp_layers, "file_bytes": m.file_bytes,
                "tool_format": m.tool_format, "reasoning": m.reasoning}
        return {"object": "list", "data": [{"id": model_id(r), "object": "model", "created": int(time.time()),
                                            "owned_by": "strata", "meta": meta}]}

    add_monitoring_routes(app, client, http, lambda: app.state.max_queue)
    return app


class ServerThread:
    """The HTTP server on a background thread: `start()` returns once it listens, `stop()` joins it.

    For the GUI toggle: `ServerThread(client, "127.0.0.1", 8080, api_key).start()` -> url to show.
    Port 0 takes a free port (see `.port` / `.url` after start). A host that is not loopback is logged
    as a warning on start (`.exposure` holds the line; the GUI and `strata serve` show it too).
    """

    def __init__(self, client, host: str = DEFAULT_HOST, port: int = 8080, api_key: str | None = None,
                 max_queue: int = DEFAULT_MAX_QUEUE, log_level: str = "warning", max_body: int = DEFAULT_MAX_BODY,
                 log_exposure: bool = True):
        self.host, self.port, self.api_key, self.log_exposure = host, port, api_key, log_exposure
        self.app = create_app(client, api_key=api_key, max_queue=max_queue, max_body=max_body)
        self.exposure = exposure_warning(host, api_key)      # '' on loopback
        self._log_level = log_level
        self._server = self._thread = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> str:
        """Bind (OSError if the port is taken) and serve; returns the url."""
        import uvicorn

        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        if self.exposure and self.log_exposure:
            log.warning("strata server: %s", self.exposure)
        config = uvicorn.Config(self.app, log_level=self._log_level, lifespan="off", timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="strata-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server did not start on {self.url}")
            time.sleep(0.01)
        return self.url

    def stop(self, timeout: float = 5.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(timeout)
        self._thread = None
