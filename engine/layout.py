"""Devices, layer split and slot groups: parsing, `auto`, and the checks that refuse a bad layout
with a message saying what to change."""
from __future__ import annotations

from dataclasses import dataclass

import psutil
import torch

from engine.errors import ConfigError, OutOfMemoryError

GiB = 1 << 30


def parse_devices(spec: str) -> list[str]:
    devs = [d.strip().lower() for d in (spec or "cpu").split(",") if d.strip()]
    if not devs:
        raise ConfigError("--devices is empty: give e.g. cpu, cpu,cpu or cuda:0,cuda:1")
    out = []
    n_cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for d in devs:
        if d == "cuda":
            d = "cuda:0"
        if d == "cpu":
            out.append(d)
        elif d.startswith("cuda:") and d[5:].isdigit():
            if int(d[5:]) >= n_cuda:
                have = ", ".join(f"cuda:{i}" for i in range(n_cuda)) or "none (no CUDA device is visible)"
                raise ConfigError(f"device {d} does not exist; CUDA devices here: {have}")
            out.append(d)
        else:
            raise ConfigError(f"unknown device {d!r}: use cpu or cuda:N")
    return out


def free_bytes(device: str) -> int:
    if device.startswith("cuda"):     # (with blocks this process's allocator holds unused)
        dev = torch.device(device)
        return torch.cuda.mem_get_info(dev)[0] + torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
    return psutil.virtual_memory().available


def parse_split(spec: str, n_layers: int, n_stages: int) -> list[int] | None:
    """Explicit split -> stage start layers [0, K1, K2, ...]; None for auto."""
    spec = (spec or "auto").strip()
    if spec == "auto":
        return None
    try:
        ks = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--layer-split {spec!r} is not a list of layer numbers (e.g. 16,24) or auto") from None
    if len(ks) != n_stages - 1:
        raise ConfigError(f"--layer-split {spec} gives {len(ks) + 1} stages but --devices lists {n_stages}: "
                          f"give {n_stages - 1} number(s), each the first layer of the next device")
    starts = [0, *ks]
    for a, b in zip(starts, starts[1:]):
        if b <= a:
            raise ConfigError(f"--layer-split {spec} is not increasing: each number is the first layer of the "
                              f"next stage, so they must rise (e.g. {_example(n_layers, n_stages)})")
    if ks and ks[-1] >= n_layers:
        raise ConfigError(f"--layer-split {spec}: layer {ks[-1]} is out of range (the model has {n_layers} layers, "
                          f"0..{n_layers - 1}); e.g. {_example(n_layers, n_stages)}")
    return starts


def _example(n_layers: int, n_stages: int) -> str:
    return ",".join(str(n_layers * k // n_stages) for k in range(1, n_stages)) or "auto"


def auto_split(layer_bytes: list[int], capacity: list[int], first_extra: int, last_extra: int) -> list[int]:
    """Stage start layers balancing each stage's bytes against its share of `capacity`."""
    n_stages, n_layers = len(capacity), len(layer_bytes)
    total = sum(layer_bytes) + first_extra + last_extra
    share = [c / sum(capacity) for c in capacity]
    starts, acc, k = [0], first_extra, 0
    for i, b in enumerate(layer_bytes):
        target = total * sum(share[:k + 1])
        remaining_layers = n_layers - i
        remaining_stages = n_stages - 1 - k
        if k < n_stages - 1 and i > starts[-1] and (acc + b / 2 > target or remaining_layers <= remaining_stages):
            starts.append(i)
            k += 1
        acc += b
    return starts


def check_layers(n_layers: int, n_stages: int) -> None:
    if n_stages > n_layers:
        raise ConfigError(f"{n_stages} stages but the model has only {n_layers} layers: list at most {n_layers} devices")


def check_fits(stage_need: list[int], devices: list[str]) -> None:
    for i, (need, dev) in enumerate(zip(stage_need, devices)):
        free = free_bytes(dev)
        if need > free:
            raise OutOfMemoryError(
                f"stage {i} ({dev}) needs {need / GiB:.2f} GiB but {free / GiB:.2f} GiB is free: move layers to "
                f"another device with --layer-split, or lower --ctx / --parallel")


@dataclass
class GroupLayout:
    groups: list[list[int]]
    note: str = ""


def slot_groups(parallel: int, spec: str, n_stages: int) -> GroupLayout:
    if parallel < 1:
        raise ConfigError(f"--parallel {parallel}: need at least 1 slot")
    spec = (spec or "auto").strip()
    note = ""
    if spec == "auto":
        g = max(d for d in range(1, min(n_stages, parallel) + 1) if parallel % d == 0)
        if n_stages > 1 and g < n_stages:
            note = (f"batch-groups auto: {parallel} slot(s) do not divide into {n_stages} groups (one per stage); "
                    f"using {g} group(s)")
    else:
        try:
            g = int(spec)
        except ValueError:
            raise ConfigError(f"--batch-groups {spec!r}: give a number that divides --parallel, or auto") from None
        if g < 1 or parallel % g:
            raise ConfigError(f"--batch-groups {g} does not divide --parallel {parallel}: "
                              f"use one of {[d for d in range(1, parallel + 1) if parallel % d == 0]}")
    k = parallel // g
    return GroupLayout([list(range(i * k, (i + 1) * k)) for i in range(g)], note)
