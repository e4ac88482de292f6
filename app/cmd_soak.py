"""`strata soak`: many concurrent clients against a real worker and server on loopback, for a while.

Each client loops until the time is up: a chat or completion request with a random prompt (1-200 words)
and answer length (1-96 tokens), streamed or not; some streams are cancelled by the client after a few
chunks, some requests are dropped before the first byte (a short client timeout). Every request must end
as completed (a finish reason, and [DONE] when streamed), as a clean HTTP error (a 4xx, or the documented
503 when the queue is full, each with an error body), or as the client's own cancel; anything else is
counted as bad. Meanwhile the worker's and this process's resident memory is sampled. At the end every
slot must be idle with nothing queued or in flight, and `batch-test` on the soaked worker must still
be IDENTICAL. Prints a JSON report (--json writes it too); exit 0 when all of that holds.

    strata soak --clients 32 --seconds 600          # the default layout: 4 slots in 2 groups on cpu,cpu
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import threading
import time
from collections import Counter

from app.engine_flags import add_engine_flags, engine_config_from_args

try:
    import httpx
except ImportError:              # in the test extra (make install), not in the app bundle
    httpx = None

WORDS = ("the model reads every token of a long prompt before it answers and some clients leave early while "
         "others wait in the queue for a slot to free up so the server must keep count of each one").split()


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_engine_flags(p)
    p.set_defaults(devices="cpu,cpu", parallel=4, batch_groups="2", ctx=1024)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the report here")
    # batch-test after the soak
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)


def rss_mib(pid: int) -> float:
    """Resident memory of a process (Linux /proc), MiB; 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Tally:
    def __init__(self) -> None:
        self.outcomes: Counter = Counter()
        self.bad: list[str] = []
        self.tokens = 0

    def add(self, outcome: str, detail: str = "") -> None:
        self.outcomes[outcome] += 1
        if outcome == "bad" and len(self.bad) < 20:
            self.bad.append(detail)


def _body(rng: random.Random, stream: bool) -> tuple[str, dict]:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 200)))
    common = {"max_tokens": rng.randint(1, 96), "stream": stream, "temperature": rng.choice([0.0, 0.7]),
              "seed": rng.randint(0, 1 << 20)}
    if rng.random() < 0.5:
        return "/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": words}],
                                        **common}
    return "/v1/completions", {"model": "default", "prompt": words, **common}


def _clean_error(status: int, text: str) -> bool:
    """A documented error: 4xx or 503, with an OpenAI-style error body."""
    try:
        err = json.loads(text).get("error", {})
    except ValueError:
        return False
    return (400 <= status < 500 or status == 503) and bool(err.get("message"))


async def _one(http, rng: random.Random, tally: Tally) -> None:
    stream = rng.random() < 0.75
    path, body = _body(rng, stream)
    drop_early = rng.random() < 0.05             # give up before the first byte
    cancel_after = rng.randint(1, 8) if stream and rng.random() < 0.2 else None
    timeout = 0.05 if drop_early else 600.0
    try:
        if not stream:
            r = await http.post(path, json=body, timeout=timeout)
            if r.status_code == 200:
                choice = r.json()["choices"][0]
                tally.tokens += r.json().get("usage", {}).get("completion_tokens", 0)
                tally.add("completed" if choice.get("finish_reason") else "bad", f"no finish reason: {r.text[:200]}")
            else:
                tally.add(f"error {r.status_code}" if _clean_error(r.status_code, r.text) else "bad",
                          f"{r.status_code}: {r.text[:200]}")
            return
        async with http.stream("POST", path, json=body, timeout=timeout) as r:
            if r.status_code != 200:
                text = (await r.aread()).decode(errors="replace")
                tally.add(f"error {r.status_code}" if _clean_error(r.status_code, text) else "bad",
                          f"{r.status_code}: {text[:200]}")
                return
            chunks, finished, done = 0, False, False
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    break
                event = json.loads(data)
                if "error" in event:
                    tally.add("error in stream")
                    return
                chunks += 1
                if any(c.get("finish_reason") for c in event.get("choices", [])):
                    finished = True
                if cancel_after is not None and chunks >= cancel_after and not finished:
                    tally.add("cancelled by the client")
                    return                          # leaving the block closes the connection mid-stream
            tally.tokens += chunks
            tally.add("completed" if finished and done else "bad", f"stream ended: finish={finished} done={done}")
    except httpx.TimeoutException as e:
        tally.add("dropped by the client" if drop_early else "bad", f"timeout: {e!r}")
    except Exception as e:  # noqa: BLE001 - any other ending is a bad one, kept with its reason
        tally.add("bad", f"{type(e).__name__}: {e}")


async def _clients(url: str, n: int, seconds: float, seed: int, tally: Tally) -> None:
    deadline = time.monotonic() + seconds

    async def client(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        async with httpx.AsyncClient(base_url=url) as http:
            while time.monotonic() < deadline:
                await _one(http, rng, tally)

    await asyncio.gather(*(client(i) for i in range(n)))


def _sampler(pids: dict[str, int], stop: threading.Event, every: float, series: list) -> None:
    t0 = time.monotonic()
    while True:
        series.append({"t": round(time.monotonic() - t0, 1), **{k: round(rss_mib(p), 1) for k, p in pids.items()}})
        if stop.wait(every):
            return


def _idle(url: str, timeout: float = 60.0) -> dict:
    """Poll /slots until every slot is idle and nothing is queued or in flight (or the time runs out)."""
    end = time.monotonic() + timeout
    while True:
        s = httpx.get(f"{url}/slots", timeout=10).json()
        idle = all(v["state"] == "idle" for v in s["slots"]) and not s["queue_depth"] and not s["in_flight"]
        if idle or time.monotonic() > end:
            return {"idle": idle, "slots": [v["state"] for v in s["slots"]], "queue_depth": s["queue_depth"],
                    "in_flight": s["in_flight"]}
        time.sleep(0.5)


def run(args: argparse.Namespace) -> int:
    from app import cmd_batch_test
    from app.engine_client import connect_worker
    from app.server import ServerThread

    if httpx is None:
        print("strata soak needs httpx for its clients: pip install httpx", file=sys.stderr)
        return 2
    cfg = engine_config_from_args(args)
    worker = connect_worker(cfg, timeout=600)
    server = ServerThread(worker, "127.0.0.1", 0)
    server.start()
    tally, series, stop = Tally(), [], threading.Event()
    pids = {"worker_rss_mib": worker.transport.pid, "server_rss_mib": os.getpid()}
    sampler = threading.Thread(target=_sampler, args=(pids, stop, max(1.0, args.seconds / 60), series), daemon=True)
    sampler.start()
    t0 = time.monotonic()
    try:
        asyncio.run(_clients(server.url, args.clients, args.seconds, args.seed, tally))
        wall = time.monotonic() - t0
        end_state = _idle(server.url)
        stop.set()
        sampler.join()
        print("# batch-test on the soaked worker", flush=True)
        with contextlib.redirect_stdout(sys.stderr):
            identical = cmd_batch_test.compare(worker, cfg, args)
    finally:
        stop.set()
        server.stop()
        worker.close()
    warm = [s["worker_rss_mib"] for s in series[len(series) // 4:]] or [0.0]
    report = {
        "clients": args.clients, "seconds": round(wall, 1), "requests": sum(tally.outcomes.values()),
        "outcomes": dict(tally.outcomes), "bad_examples": tally.bad, "tokens": tally.tokens,
        "end_state": end_state, "batch_test_exit": identical,
        "worker_rss_mib": {"first": series[0]["worker_rss_mib"], "after_warmup_min": min(warm),
                           "after_warmup_max": max(warm), "last": series[-1]["worker_rss_mib"]},
        "rss_series": series,
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    ok = not tally.outcomes["bad"] and end_state["idle"] and identical == 0 and report["requests"] > 0
    print("PASS" if ok else "FAIL", f"soak: {report['requests']} requests in {wall:.0f} s from {args.clients} clients, "
          f"{dict(tally.outcomes)}, slots idle at the end: {end_state['idle']}, batch-test exit {identical}, "
          f"worker RSS {report['worker_rss_mib']}")
    return 0 if ok else 1
