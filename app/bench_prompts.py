"""Bundled prompts for `strata bench --prompt-kind` (no network): the three kinds of work whose
acceptance differs most for drafts. `code` continues a Python module, `prose` continues an essay,
`edit` asks for a file back with one name changed (the answer mostly copies the prompt, where drafts
pay best). `filler` is the repeated sentence `--prompt-tokens` sizes."""
from __future__ import annotations

KINDS = ("filler", "code", "prose", "edit")

CODE = '''"""A small job queue: workers take jobs in priority order and report results."""
from __future__ import annotations

import heapq
import threading
import time
from dataclasses import dataclass, field


@dataclass(order=True)
class Job:
    priority: int
    created: float = field(compare=True)
    name: str = field(compare=False)
    payload: dict = field(compare=False, default_factory=dict)


class JobQueue:
    def __init__(self) -> None:
        self._heap: list[Job] = []
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self.done: dict[str, object] = {}

    def put(self, name: str, priority: int = 10, **payload) -> Job:
        job = Job(priority, time.monotonic(), name, payload)
        with self._ready:
            heapq.heappush(self._heap, job)
            self._ready.notify()
        return job

    def take(self, timeout: float | None = None) -> Job | None:
        with self._ready:
            if not self._heap and not self._ready.wait(timeout):
                return None
            return heapq.heappop(self._heap)

    def finish(self, job: Job, result: object) -> None:
        with self._lock:
            self.done[job.name] = result


def worker(queue: JobQueue, handlers: dict, stop: threading.Event) -> None:
    """Take jobs until `stop` is set; each job's name picks its handler."""
    while not stop.is_set():
        job = queue.take(timeout=0.1)
        if job is None:
            continue
'''

PROSE = ("The first public libraries were not built for readers. They were built for books: rooms where rare "
         "and expensive volumes could be kept safe, chained to desks, consulted by the few who were allowed in "
         "and trusted to handle them. It took the printing press, cheap paper and a slow change in who was "
         "expected to read before anyone thought of a library as a place for the public. In the towns of the "
         "nineteenth century that change arrived all at once. Mechanics' institutes lent books to workers who "
         "paid a few pennies a quarter; subscription libraries opened reading rooms for clerks and teachers; and "
         "reformers began to argue that a town which paid for its streets and its water could pay for its books "
         "as well. The argument was not only about learning. A reading room was warm, quiet and free of drink, "
         "and its supporters said so plainly. The libraries that followed were ")

EDIT_FILE = '''def load_orders(path):
    """Read orders from a CSV file: one per line, id,customer,amount."""
    orders = []
    with open(path) as f:
        for line in f:
            order_id, customer, amount = line.strip().split(",")
            orders.append({"id": int(order_id), "customer": customer, "amount": float(amount)})
    return orders


def total_by_customer(orders):
    totals = {}
    for order in orders:
        totals[order["customer"]] = totals.get(order["customer"], 0.0) + order["amount"]
    return totals


def largest_customers(path, n=3):
    orders = load_orders(path)
    totals = total_by_customer(orders)
    return sorted(totals.items(), key=lambda kv: -kv[1])[:n]
'''

EDIT = ("Rename the function `load_orders` to `read_orders` everywhere in this file. Return the whole file "
        "with that one change and nothing else.\n\n```python\n" + EDIT_FILE + "```\n\n```python\n")


def prompt(kind: str, tag: str, filler: str) -> str:
    """The prompt of one stream; streams differ in their first line so prefix reuse cannot help."""
    if kind == "filler":
        return filler
    if kind == "code":
        return f"# stream {tag}\n" + CODE
    if kind == "prose":
        return f"Stream {tag}. " + PROSE
    if kind == "edit":
        return f"Task {tag}. " + EDIT
    raise ValueError(f"unknown prompt kind {kind!r} (one of {', '.join(KINDS)})")
