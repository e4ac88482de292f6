"""The engine worker process: EngineCore + run_engine_loop behind a ZeroMQ socket.

Threads:
  main      runs `run_engine_loop(core, get_msg)`; `emit` hands each outgoing message to the IO thread
            through an inproc PUSH socket (encoded once, with a routing key).
  io        owns the ROUTER socket: authenticates clients (Hello with the per-launch secret), answers
            Ping itself, forwards the rest to the engine inbox, routes outputs (a request's messages go
            to the client that sent it; load progress, Ready, load errors and Telemetry go to every client).
  watchdog  shuts the engine down when the parent process dies, and dumps every thread's stack to
            stderr (then stops answering Ping, so the client sees a hang) when the engine thread stalls.

Only loopback TCP or IPC endpoints are accepted. The parent reads the bound endpoint from the
`STRATA_ENGINE_LISTENING <endpoint>` line on stdout.
"""
from __future__ import annotations

import contextlib
import faulthandler
import hmac
import ipaddress
import os
import queue
import sys
import threading
import time
from urllib.parse import urlsplit

import zmq

from engine.messages import (PROTOCOL_VERSION, AddRequest, ErrorReply, Hello, HelloReply, LoadModel, Ping,
                             Pong, RequestDone, Shutdown, TokenDelta, decode_in, encode)

LISTENING = "STRATA_ENGINE_LISTENING"
CAPABILITIES = ["load", "stream", "abort", "configure", "telemetry", "multi-client"]   # + the core's own
HWM = 1_000_000                         # never drop a TokenDelta because a client was slow for a moment
_BROADCAST, _ROUTE, _END = b"b", b"r", b"e"
_OUT_ADDR = "inproc://strata-engine-out"


def check_endpoint(endpoint: str) -> str:
    """Accept ipc:// and loopback tcp:// only; tcp port 0 (or *) means any free port."""
    if endpoint.startswith("ipc://"):
        return endpoint
    u = urlsplit(endpoint)
    host = "127.0.0.1" if u.hostname == "localhost" else (u.hostname or "")
    try:
        loopback = u.scheme == "tcp" and ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"endpoint {endpoint!r}: only ipc:// or loopback tcp:// (127.0.0.1, [::1]) allowed")
    port = "*" if u.port in (None, 0) else str(u.port)
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


class Worker:
    def __init__(self, endpoint: str, secret: str, parent_pid: int | None = None,
                 telemetry_hz: float = 10.0, stall_timeout: float = 30.0):
        if not secret:
            raise ValueError("the worker needs a secret")
        self.secret = secret.encode()
        self.telemetry_hz = telemetry_hz
        self.stall_timeout = stall_timeout
        self.parent = _parent_probe(parent_pid)
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.SNDHWM, HWM)
        self.router.setsockopt(zmq.RCVHWM, HWM)
        self.router.setsockopt(zmq.LINGER, 500)
        endpoint = check_endpoint(endpoint)
        self.router.setsockopt(zmq.IPV6, int(endpoint.startswith("tcp://[")))
        self.router.bind(endpoint)
        self.endpoint = self.router.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.out_pull = self.ctx.socket(zmq.PULL)
        self.out_pull.bind(_OUT_ADDR)
        self.out_push = self.ctx.socket(zmq.PUSH)
        self.out_push.connect(_OUT_ADDR)
        self.out_lock = threading.Lock()
        self.inbox: queue.Queue = queue.Queue()
        self.clients: set[bytes] = set()
        self.owner: dict[str, bytes] = {}
        self.stop = threading.Event()
        self.stalled = False
        self.loading = False
        self.in_get = True
        self.last_activity = time.monotonic()
        trace = os.environ.get("STRATA_TRACE_EMIT")       # measuring: "request_id monotonic" per TokenDelta
        self.trace = open(trace, "a", buffering=1) if trace else None

    # ------------------------------------------------------------ engine thread side
    def emit(self, msg) -> None:
        rid = getattr(msg, "request_id", "")
        kind = _BROADCAST if not rid else _END if isinstance(msg, (RequestDone, ErrorReply)) else _ROUTE
        if self.trace is not None and isinstance(msg, TokenDelta):
            self.trace.write(f"{rid} {time.monotonic():.9f}\n")
        data = encode(msg)
        with self.out_lock:
            self.out_push.send_multipart([kind, rid.encode(), data])
        self.last_activity = time.monotonic()

    def get_msg(self, timeout: float | None):
        self.loading, self.in_get = False, True
        try:
            msg = self.inbox.get(timeout=timeout) if timeout != 0 else self.inbox.get_nowait()
        except queue.Empty:
            msg = None
        self.last_activity = time.monotonic()
        self.loading, self.in_get = isinstance(msg, LoadModel), False
        return msg

    def serve(self) -> int:
        from engine import core       # torch; a failure here exits before the parent ever connects

        self.capabilities = [*CAPABILITIES, *getattr(core, "CAPABILITIES", [])]
        io = threading.Thread(target=self._io_loop, name="strata-worker-io", daemon=True)
        io.start()
        threading.Thread(target=self._watchdog, name="strata-worker-watchdog", daemon=True).start()
        print(f"{LISTENING} {self.endpoint}", flush=True)
        try:
            core.run_engine_loop(core.EngineCore(self.emit), self.get_msg, self.telemetry_hz)
        finally:
            self.stop.set()
            io.join(5.0)                                   # it drains what the engine emitted last
            for sock in (self.out_push, self.out_pull):
                sock.close(linger=0)
            self.router.close()                            # LINGER 500 ms: the last messages still go out
            self.ctx.term()
            _remove_ipc(self.endpoint)
        return 0

    # ------------------------------------------------------------ IO thread
    def _io_loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.out_pull, zmq.POLLIN)
        while True:
            events = dict(poller.poll(100))
            if self.out_pull in events:
                while self._forward_out():
                    pass
            if self.router in events:
                while self._read_in():
                    pass
            if self.stop.is_set() and not events:
                return

    def _forward_out(self) -> bool:
        try:
            kind, rid, data = self.out_pull.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return False
        rid_s = rid.decode()
        dest = self.owner.get(rid_s) if rid_s else None
        if kind == _END:
            self.owner.pop(rid_s, None)
        for ident in ([dest] if dest is not None else list(self.clients)):
            self.router.send_multipart([ident, data])
        return True

    def _read_in(self) -> bool:
        try:
            ident, data = self.router.recv_multipart(zmq.NOBLOCK)[:2]
        except zmq.Again:
            return False
        except ValueError:
            return True
        try:
            msg = decode_in(data)
        except Exception as e:  # noqa: BLE001 - anything undecodable is a protocol error
            self._reply(ident, ErrorReply(kind="protocol", message=f"undecodable message: {e}"))
            return True
        if isinstance(msg, Hello):
            self._hello(ident, msg)
        elif ident not in self.clients:
            self._reply(ident, ErrorReply(kind="protocol", message="not authenticated: send Hello first"))
        elif isinstance(msg, Ping):
            if not self.stalled:
                self._reply(ident, Pong(nonce=msg.nonce))
        else:
            if isinstance(msg, AddRequest):
                self.owner[msg.request_id] = ident
            self.inbox.put(msg)
        return True

    def _hello(self, ident: bytes, msg: Hello) -> None:
        if not hmac.compare_digest(msg.secret.encode(), self.secret):
            self.clients.discard(ident)
            self._reply(ident, ErrorReply(kind="protocol", message="bad secret"))
            _log(f"refused a client ({msg.client or 'unnamed'}): bad secret")
        elif msg.protocol != PROTOCOL_VERSION:
            self._reply(ident, ErrorReply(kind="protocol", message=(
                f"protocol {msg.protocol} not supported: this engine speaks {PROTOCOL_VERSION}")))
        else:
            self.clients.add(ident)
            self._reply(ident, HelloReply(engine_version=_version(), capabilities=self.capabilities,
                                          pid=os.getpid()))

    def _reply(self, ident: bytes, msg) -> None:
        self.router.send_multipart([ident, encode(msg)])

    # ------------------------------------------------------------ watchdog thread
    def _watchdog(self) -> None:
        while not self.stop.wait(0.25):
            if self.parent is not None and not self.parent():
                _log("the parent process is gone; shutting down")
                self.inbox.put(Shutdown())
                if not self.stop.wait(5.0):
                    os._exit(3)
                return
            idle = time.monotonic() - self.last_activity
            stalled = not self.in_get and not self.loading and idle > self.stall_timeout
            if stalled and not self.stalled:
                _log(f"the engine thread made no progress for {idle:.0f} s; every thread's stack:")
                try:
                    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                except (OSError, ValueError):
                    pass
            self.stalled = stalled


def _remove_ipc(endpoint: str) -> None:
    """The socket file, and the private directory the parent made for it (if it is gone, it cannot)."""
    if endpoint.startswith("ipc://"):
        path = endpoint[len("ipc://"):]
        with contextlib.suppress(OSError):
            os.unlink(path)
        if os.path.basename(os.path.dirname(path)).startswith("strata-engine-"):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(path))


def _log(line: str) -> None:
    """One line on stderr; the parent keeps the last lines for its EngineDead. Never raises (a dead pipe)."""
    try:
        print(f"strata engine: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _parent_probe(pid: int | None):
    """A callable that says whether the parent still lives (guards against pid reuse)."""
    if not pid:
        return None
    import psutil

    try:
        created = psutil.Process(pid).create_time()
    except psutil.Error:
        return lambda: False

    def alive() -> bool:
        try:
            p = psutil.Process(pid)
            return p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False
    return alive


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("strata-studio")
    except Exception:  # noqa: BLE001
        return "dev"
