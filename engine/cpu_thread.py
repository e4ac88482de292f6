"""The one OS thread that loads a model for a lone CPU stage and then runs that stage.

torch's CPU ops run their parallel parts on OpenMP (libgomp in the pip builds), which keeps a team of
worker threads for each OS thread that starts parallel regions; once the process holds more OpenMP
threads than there are cores, libgomp stops spin-waiting between regions (its throttled spin count) and
every region pays a sleep and a wake-up. A decode step is a few hundred small regions. Measured on the
2-core machine (Gemma 3 270M, a 1-row decode tile, 2 threads): 8.2 ms on the thread that made the
process's only 2-thread team, 18-20 ms on a second thread once another had made one (the load, on the
engine thread), 11 ms on 1 thread. So with a single CPU stage and no GPU, the load and the stage's work
run on this thread, whose team is the process's only multi-thread one, on every core.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

NAME = "strata-compute"
_executor: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def lone_cpu(devices: list[str]) -> bool:
    """A layout of one CPU stage and nothing else: it runs on the compute thread."""
    return devices == ["cpu"]


def executor() -> ThreadPoolExecutor:
    """The compute thread (made at first use, kept for the process: models come and go, it stays)."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(1, thread_name_prefix=NAME)
        return _executor


def on_compute_thread(fn, *args, **kwargs):
    """fn(*args, **kwargs) run on the compute thread (at once when called there): its result, or its
    exception raised here."""
    if threading.current_thread().name.startswith(NAME):
        return fn(*args, **kwargs)
    return executor().submit(fn, *args, **kwargs).result()
