"""Start and supervise the engine worker process; `WorkerTransport` is what EngineClient talks through.

One launch = one process, one per-launch secret (passed in the environment), one private endpoint
(an IPC socket in a 0700 temp directory; loopback TCP where IPC is missing), one IO thread that owns
the ZeroMQ DEALER socket. The IO thread sends heartbeats (Ping with negative nonces, answered by the
worker's IO thread) and watches the process: an exit, or silence for `dead_after_s`, ends the
launch (a silent process is killed); `recv` then drains what arrived and `alive` turns False.
No process outlives its transport: `close()` asks, then terminates, then kills; atexit kills leftovers.
"""
from __future__ import annotations

import atexit
import collections
import itertools
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import zmq

from app.engine_client import EngineDead, EngineFailure
from engine.messages import (PROTOCOL_VERSION, ErrorReply, Hello, HelloReply, Ping, Pong, Shutdown, decode_out,
                             encode)

SECRET_ENV = "STRATA_ENGINE_SECRET"
LISTENING = "STRATA_ENGINE_LISTENING"       # the worker prints this line with its endpoint (engine/worker.py)
_LIVE: set[subprocess.Popen] = set()
_wake_ids = itertools.count()


def worker_command() -> list[str]:
    """The frozen executable itself (PyInstaller sets sys.frozen), else this interpreter on app.cli
    (found through PYTHONPATH, see _Launch)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "engine"]
    return [sys.executable, "-P", "-m", "app.cli", "engine"]      # -P: a stray ./app in the cwd cannot shadow us


def _default_endpoint() -> tuple[str, str | None]:
    if os.name == "posix" and zmq.has("ipc"):
        d = tempfile.mkdtemp(prefix="strata-engine-")      # mode 0700: no other user can reach the socket
        if len(d) < 90:
            return f"ipc://{d}/engine.sock", d
        shutil.rmtree(d, ignore_errors=True)
    return "tcp://127.0.0.1:0", None


def _describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"the engine process was killed by {signal.Signals(-rc).name}"
        except ValueError:
            pass
    return f"the engine process exited with code {rc}"


class _Launch:
    """One worker process and its socket; never reused after it dies."""

    def __init__(self, heartbeat_s: float, dead_after_s: float, extra_args, env, echo_stderr: bool):
        self.heartbeat_s, self.dead_after_s, self.echo_stderr = heartbeat_s, dead_after_s, echo_stderr
        self.secret = secrets.token_urlsafe(32)
        endpoint, self.tmpdir = _default_endpoint()
        environ = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1", **{SECRET_ENV: self.secret})
        if not getattr(sys, "frozen", False):
            root = str(Path(os.path.abspath(__file__)).parent.parent)
            environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, environ.get("PYTHONPATH")) if p)
        cmd = [*worker_command(), "--endpoint", endpoint, "--secret-env", SECRET_ENV,
               "--parent-pid", str(os.getpid()), *extra_args]
        self.tail: collections.deque[str] = collections.deque(maxlen=200)
        self.listening: queue.Queue[str] = queue.Queue()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=environ, text=True, errors="replace", bufsize=1)
        _LIVE.add(self.proc)
        self.readers = [threading.Thread(target=self._pump, args=(s, out), daemon=True, name="strata-engine-pipe")
                        for s, out in ((self.proc.stdout, True), (self.proc.stderr, False))]
        for t in self.readers:
            t.start()
        self.inbox: queue.Queue = queue.Queue()
        self.death: str | None = None
        self.closing = False
        self.endpoint = ""

    def _pump(self, stream, is_stdout: bool) -> None:
        for line in stream:
            line = line.rstrip("\n")
            if is_stdout and line.startswith(LISTENING + " "):
                self.listening.put(line.split(" ", 1)[1])
                continue
            self.tail.append(line)
            if self.echo_stderr:
                print(f"[engine] {line}", file=sys.stderr)

    def connect(self, timeout: float, client_name: str) -> HelloReply:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.endpoint = self.listening.get(timeout=0.1)
                break
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise self.dead_error(_describe_exit(self.proc.returncode)) from None
                if time.monotonic() > deadline:
                    raise self.dead_error(f"the engine process did not start within {timeout:.0f} s") from None
        self.ctx = zmq.Context()
        self.dealer = self.ctx.socket(zmq.DEALER)
        for opt, val in ((zmq.LINGER, 0), (zmq.SNDHWM, 1_000_000), (zmq.RCVHWM, 1_000_000),
                         (zmq.IPV6, int(self.endpoint.startswith("tcp://[")))):
            self.dealer.setsockopt(opt, val)
        self.dealer.connect(self.endpoint)
        wake = f"inproc://strata-client-{next(_wake_ids)}"
        self.wake_pull = self.ctx.socket(zmq.PULL)
        self.wake_pull.bind(wake)
        self.wake_push = self.ctx.socket(zmq.PUSH)
        self.wake_push.connect(wake)
        self.send_lock = threading.Lock()
        self.last_rx = time.monotonic()
        self.heartbeats = False
        self.io = threading.Thread(target=self._io_loop, daemon=True, name="strata-engine-io")
        self.io.start()
        self.send(Hello(secret=self.secret, client=client_name))
        while True:
            try:
                msg = self.inbox.get(timeout=0.1)
            except queue.Empty:
                if self.death:
                    raise self.dead_error(self.death) from None
                if time.monotonic() > deadline:
                    raise self.dead_error(f"no handshake from the engine within {timeout:.0f} s") from None
                continue
            if isinstance(msg, ErrorReply):
                raise EngineFailure(msg)
            if isinstance(msg, HelloReply):
                if msg.protocol != PROTOCOL_VERSION:
                    raise EngineFailure(ErrorReply(kind="protocol", message=(
                        f"engine speaks protocol {msg.protocol}, this client {PROTOCOL_VERSION}")))
                self.heartbeats = True
                return msg

    def send(self, msg) -> None:
        if self.death:
            raise self.dead_error(self.death)
        data = encode(msg)
        with self.send_lock:
            self.wake_push.send(data)

    def _io_loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self.dealer, zmq.POLLIN)
        poller.register(self.wake_pull, zmq.POLLIN)
        nonces = itertools.count(1)
        next_ping = time.monotonic()
        while not self.closing:
            events = dict(poller.poll(50))
            if self.wake_pull in events:
                while (data := _recv(self.wake_pull)) is not None:
                    self.dealer.send(data)
            self._drain()
            now = time.monotonic()
            if self.proc.poll() is not None:
                self._drain()
                return self._end(_describe_exit(self.proc.returncode))
            if self.heartbeats and now >= next_ping:
                self.dealer.send(encode(Ping(nonce=-next(nonces))))
                next_ping = now + self.heartbeat_s
            if self.heartbeats and now - self.last_rx > self.dead_after_s:
                self.proc.kill()
                return self._end(f"the engine stopped answering (no heartbeat for {now - self.last_rx:.1f} s); "
                                 "it was killed")

    def _drain(self) -> None:
        while (data := _recv(self.dealer)) is not None:
            self.last_rx = time.monotonic()
            try:
                msg = decode_out(data)
            except Exception as e:  # noqa: BLE001
                msg = ErrorReply(kind="protocol", message=f"undecodable message from the engine: {e}")
            if not (isinstance(msg, Pong) and msg.nonce < 0):
                self.inbox.put(msg)

    def _end(self, reason: str) -> None:
        self.death = self.death or reason

    def tail_text(self, n: int = 40) -> str:
        if self.proc.poll() is not None:          # let the pipe readers reach EOF: the last lines matter most
            for t in self.readers:
                t.join(1.0)
        return "\n".join(list(self.tail)[-n:])

    def dead_error(self, reason: str) -> EngineDead:
        return EngineDead(reason, self.tail_text())

    def stop(self, timeout: float) -> None:
        """Ask the worker to shut down, then terminate, then kill; release the socket and the temp dir."""
        if self.proc.poll() is None and not self.death and hasattr(self, "wake_push"):
            try:
                self.send(Shutdown())
                self.proc.wait(timeout)
            except (subprocess.TimeoutExpired, EngineDead):
                pass
        _reap(self.proc, 2.0)
        self._end("the engine was shut down")
        self.closing = True
        if hasattr(self, "io"):
            self.io.join(2.0)
            self.ctx.destroy(linger=0)
        for t in self.readers:
            t.join(1.0)
        _LIVE.discard(self.proc)
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)


def _recv(sock):
    try:
        return sock.recv(zmq.NOBLOCK)
    except zmq.Again:
        return None


def _reap(proc: subprocess.Popen, grace: float) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        _reap(proc, 1.0)


class WorkerTransport:
    """send/recv/alive/close over a supervised worker process; `restart()` starts a fresh one."""

    def __init__(self, *, heartbeat_s: float = 0.5, dead_after_s: float = 5.0, start_timeout: float = 120.0,
                 extra_args: tuple[str, ...] = (), env: dict | None = None, echo_stderr: bool = False,
                 client_name: str = "strata"):
        self._opts = (heartbeat_s, dead_after_s, tuple(extra_args), env, echo_stderr)
        self.start_timeout, self.client_name = start_timeout, client_name
        self._launch: _Launch | None = None
        self.hello: HelloReply | None = None
        self.start()

    def start(self) -> None:
        launch = self._launch = _Launch(*self._opts)
        try:
            self.hello = launch.connect(self.start_timeout, self.client_name)
        except BaseException:
            launch.stop(1.0)
            raise

    def restart(self) -> None:
        if self._launch is not None:
            self._launch.stop(2.0)
        self.start()

    def send(self, msg) -> None:
        self._launch.send(msg)

    def recv(self, timeout: float | None = None):
        try:
            return self._launch.inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    @property
    def alive(self) -> bool:
        return self._launch is not None and self._launch.death is None

    @property
    def death_reason(self) -> str:
        return (self._launch and self._launch.death) or ""

    @property
    def pid(self) -> int:
        return self._launch.proc.pid if self._launch else 0

    @property
    def endpoint(self) -> str:
        return self._launch.endpoint if self._launch else ""

    def stderr_tail(self, n: int = 40) -> str:
        return self._launch.tail_text(n) if self._launch else ""

    def close(self, timeout: float = 5.0) -> None:
        if self._launch is not None:
            self._launch.stop(timeout)
