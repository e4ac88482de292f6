"""The HTTP server's edges: OpenAI-shaped errors, the API-key guard, and the OpenAPI schema fix-up.

Every error leaves as {"error": {"message", "type", "param", "code"}}. FastAPI's 422 for a body
that fails validation becomes a 400 whose message names the field ("temperature: Input should be
a valid number"); the OpenAPI schema is rewritten to say so (400, not 422; 401 when a key is set).
"""
from __future__ import annotations

import hmac

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import openai_types as T
from engine.messages import ErrorReply

# ErrorReply.kind -> HTTP status
_STATUS = {"dead": 503, "request": 400, "oom": 503, "config": 503, "model_file": 503, "protocol": 500, "internal": 500}
KNOWN_PATHS = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/slots", "/metrics"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


class ClientGone(Exception):
    """The client disconnected before its reply was complete (its request is cancelled)."""


def error_response(status: int, message: str, type: str, param: str | None = None, code: str | None = None,
                   headers: dict | None = None) -> JSONResponse:
    return ApiError(status, message, type, param, code, headers).response()


def from_exception(e) -> ApiError:
    """An engine ErrorReply, an EngineFailure carrying one, or a dead engine, as an ApiError."""
    if isinstance(e, ApiError):
        return e
    reply = e if isinstance(e, ErrorReply) else getattr(e, "reply", None)
    if isinstance(reply, ErrorReply):
        status = _STATUS.get(reply.kind, 500)
        if reply.kind == "request":
            code = "context_length_exceeded" if "context" in reply.message.lower() else "invalid_request"
            return ApiError(400, reply.message, "invalid_request_error", code=code)
        return ApiError(status, reply.message, "server_error", code=reply.kind)
    return ApiError(503, f"the engine is not available: {e}", "server_error", code="engine_unavailable")


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "bytes"}


def _is_union_tag(x) -> bool:
    return isinstance(x, str) and ("[" in x or x in _TYPE_TAGS or x[:1].isupper())


def describe_validation(errors: list[dict]) -> tuple[str, str | None]:
    """(message, param) for pydantic errors: the most specific field, union alternatives joined."""
    def path(e):
        loc = [x for x in e.get("loc", ()) if not _is_union_tag(x)]
        return loc[1:] if loc[:1] == ["body"] else loc

    if not errors:
        return "malformed request", None
    e0 = errors[0]
    if e0.get("type") == "json_invalid":
        why = (e0.get("ctx") or {}).get("error", "not valid JSON")
        where = path(e0)
        return f"the request body is not valid JSON: {why}" + (f" (at character {where[0]})" if where else ""), None
    best = max(errors, key=lambda e: len(path(e)))
    p = path(best)
    msgs = list(dict.fromkeys(e["msg"] for e in errors if path(e) == p))
    if not p:
        if best.get("type") == "missing":
            return "the request body is missing: send a JSON object", None
        return f"the request body must be a JSON object ({msgs[0]})", None
    param = ".".join(str(x) for x in p)
    return f"{param}: {', or: '.join(msgs)}", param


DEFAULT_MAX_BODY = 8 << 20     # bytes in one request body (a 128k-token prompt is about 0.5 MB of text)


class BodyTooLarge(StarletteHTTPException):
    def __init__(self, limit: int):
        super().__init__(413, f"the request body is larger than {limit:,} bytes (the server's limit)")


class Guard:
    """Pure ASGI middleware (streams and disconnects pass straight through): the API-key check for every
    path but /health (compared in constant time), the request-body size limit (413: by Content-Length
    before anything is read, else counted as the body arrives), and the per-endpoint response count
    for /metrics."""

    def __init__(self, app, api_key: str | None, http, max_body: int = DEFAULT_MAX_BODY):
        self.app, self.http, self.max_body = app, http, max_body
        self.key = api_key.encode() if api_key else None

    def _authorized(self, scope) -> bool:
        for k, v in scope.get("headers", ()):
            if k == b"authorization":
                scheme, _, token = v.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.key)
        return False

    def _declared_length(self, scope) -> int | None:
        for k, v in scope.get("headers", ()):
            if k == b"content-length":
                try:
                    return int(v)
                except ValueError:
                    return None
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        endpoint = path if path in KNOWN_PATHS else "other"
        if self.key and path != "/health" and not self._authorized(scope):
            self.http.count(endpoint, 401)
            resp = error_response(401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'",
                                  "authentication_error", code="invalid_api_key",
                                  headers={"WWW-Authenticate": "Bearer"})
            return await resp(scope, receive, send)
        declared = self._declared_length(scope)
        if declared is not None and declared > self.max_body:
            self.http.count(endpoint, 413)
            e = BodyTooLarge(self.max_body)
            resp = error_response(413, e.detail, "invalid_request_error", code="request_too_large",
                                  headers={"Connection": "close"})
            return await resp(scope, receive, send)
        status = [500]
        received = [0]

        async def send_counted(msg):
            if msg["type"] == "http.response.start":
                status[0] = msg["status"]
            await send(msg)

        async def receive_limited():
            msg = await receive()
            if msg["type"] == "http.request":
                received[0] += len(msg.get("body", b""))
                if received[0] > self.max_body:      # a chunked body: FastAPI answers the HTTPException
                    raise BodyTooLarge(self.max_body)
            return msg

        try:
            await self.app(scope, receive_limited, send_counted)
        finally:
            self.http.count(endpoint, status[0])


def install_error_handlers(app: FastAPI, api_key: str | None, http, max_body: int = DEFAULT_MAX_BODY) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request, e: ApiError):
        return e.response()

    @app.exception_handler(ClientGone)
    async def _gone(request, e):
        return JSONResponse({"error": {"message": "client disconnected", "type": "client_closed_request",
                                       "param": None, "code": None}}, status_code=499)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, e: RequestValidationError):
        message, param = describe_validation(list(e.errors()))
        return error_response(400, message, "invalid_request_error", param=param, code="invalid_value")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request, e: StarletteHTTPException):
        if e.status_code == 404:
            message = f"unknown route: {request.method} {request.url.path}"
        elif e.status_code == 405:
            message = f"method {request.method} is not allowed on {request.url.path}"
        else:
            message = str(e.detail)
        kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
        code = "request_too_large" if e.status_code == 413 else None
        return error_response(e.status_code, message, kind, code=code, headers=getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(request, e: Exception):
        return error_response(500, f"internal error: {type(e).__name__}: {e}", "server_error")

    app.add_middleware(Guard, api_key=api_key, http=http, max_body=max_body)
    _fix_openapi(app, api_key)


def _fix_openapi(app: FastAPI, api_key: str | None) -> None:
    err_ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}

    def build():
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes,
                             description="OpenAI-compatible API. Errors: " + '{"error": {message, type, param, code}}.')
        comps = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in (T.ChatCompletionChunk, T.Completion, T.ErrorResponse):
            s = model.model_json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
            for k, v in s.pop("$defs", {}).items():
                comps.setdefault(k, v)
            comps.setdefault(model.__name__, s)
        comps.pop("HTTPValidationError", None)
        comps.pop("ValidationError", None)
        for path, ops in schema["paths"].items():
            for op in ops.values():
                r = op.setdefault("responses", {})
                if r.pop("422", None) is not None:
                    r["400"] = {**err_ref, "description": "malformed request or context overflow; the message "
                                                          "names the field"}
                if op.get("requestBody"):
                    r["413"] = {**err_ref, "description": "the request body is over the server's size limit"}
                if api_key and path != "/health":
                    r["401"] = {**err_ref, "description": "missing or wrong API key"}
                elif api_key:
                    op["security"] = []
        if api_key:
            comps_root = schema["components"]
            comps_root["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            schema["security"] = [{"bearer": []}]
        app.openapi_schema = schema
        return schema

    app.openapi = build
