"""Fixed-size numpy ring buffers for the monitor (no Qt): O(1) append, ordered views for plotting."""
from __future__ import annotations

import numpy as np

HZ = 10
SECONDS = 180                       # keep 3 minutes at 10 Hz (the issue asks for at least 2)
CAPACITY = HZ * SECONDS


class RingBuffer:
    """The last `capacity` float samples. `values()` returns them oldest first."""

    def __init__(self, capacity: int = CAPACITY):
        self._data = np.full(capacity, np.nan, dtype=np.float64)
        self._n = 0          # samples ever appended
        self.capacity = capacity

    def append(self, value: float) -> None:
        self._data[self._n % self.capacity] = value
        self._n += 1

    def pad_to(self, n: int) -> None:
        """Append NaN until `n` samples were appended (a series that started late lines up with time)."""
        missing = min(n - self._n, self.capacity)
        if missing > 0:
            for _ in range(missing):
                self.append(np.nan)
        self._n = max(self._n, n)

    def __len__(self) -> int:
        return min(self._n, self.capacity)

    @property
    def total(self) -> int:
        return self._n

    def values(self) -> np.ndarray:
        n = len(self)
        if self._n <= self.capacity:
            return self._data[:n].copy()
        i = self._n % self.capacity
        return np.concatenate((self._data[i:], self._data[:i]))

    def last(self, default: float = np.nan) -> float:
        return float(self._data[(self._n - 1) % self.capacity]) if self._n else default

    def clear(self) -> None:
        self._data.fill(np.nan)
        self._n = 0


class SeriesSet:
    """Named ring buffers that share one time axis: every series has one sample per tick."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self.time = RingBuffer(capacity)
        self.series: dict[str, RingBuffer] = {}

    def tick(self, t: float, values: dict[str, float]) -> None:
        n = self.time.total
        self.time.append(t)
        for name, v in values.items():
            buf = self.series.get(name)
            if buf is None:
                buf = self.series[name] = RingBuffer(self.capacity)
            buf.pad_to(n)
            buf.append(v)
        for name, buf in self.series.items():
            if name not in values:
                buf.pad_to(n + 1)

    def names(self, prefix: str) -> list[str]:
        return sorted((k for k in self.series if k.startswith(prefix)), key=_natural)

    def clear(self) -> None:
        self.time.clear()
        self.series.clear()


def _natural(name: str):
    head, _, tail = name.rpartition(":")
    return (head, int(tail)) if tail.isdigit() else (name, 0)
