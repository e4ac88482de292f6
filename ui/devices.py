"""The devices this machine offers, found without torch: the CPU (psutil) and NVIDIA GPUs (NVML or
nvidia-smi). The engine's telemetry later reports what it really uses (DeviceMemory)."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass

import psutil


@dataclass
class Device:
    id: str              # "cpu" | "cuda:0" ...
    name: str
    total_bytes: int
    free_bytes: int


def _cpu() -> Device:
    vm = psutil.virtual_memory()
    name = platform.processor() or platform.machine() or "CPU"
    return Device("cpu", f"{name} ({os.cpu_count()} threads)", vm.total, vm.available)


def _nvml() -> list[Device] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            name = pynvml.nvmlDeviceGetName(h)
            out.append(Device(f"cuda:{i}", name.decode() if isinstance(name, bytes) else name, mem.total, mem.free))
        pynvml.nvmlShutdown()
        return out
    except Exception:  # noqa: BLE001 - no driver: no GPUs
        return None


def _nvidia_smi() -> list[Device]:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        r = subprocess.run([exe, "--query-gpu=index,name,memory.total,memory.free", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=3)
    except (OSError, subprocess.TimeoutExpired):
        return []
    out = []
    for line in r.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0].isdigit():
            mib = 1024 * 1024
            out.append(Device(f"cuda:{parts[0]}", parts[1], int(float(parts[2]) * mib), int(float(parts[3]) * mib)))
    return out


def list_devices() -> list[Device]:
    gpus = _nvml()
    if gpus is None:
        gpus = _nvidia_smi()
    return [*gpus, _cpu()]


def fmt_bytes(n: float) -> str:
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.1f} {unit}"
    return f"{int(n)} B"
