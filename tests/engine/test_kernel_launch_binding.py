"""Every Triton function in engine.kernels binds its launch arguments the way the GPU's launcher does.

The interpreter (TRITON_INTERPRET=1, how the kernels run here) calls the Python function directly; on a
GPU Triton first binds the arguments with a generated function (triton.runtime.jit's
create_function_from_signature) whose locals can shadow a kernel parameter of the same name: a sampler
kernel with a parameter named `params` ran in every CPU test and failed on its first H200 launch
("failed to specialize argument of type: dict", 2026-12-04). Here that same binder is built for every
kernel and called with stand-in arguments; each must come back as given.
"""
from __future__ import annotations

import importlib
import pkgutil

import pytest
import torch

triton = pytest.importorskip("triton")
from triton.backends.compiler import BaseBackend  # noqa: E402
from triton.runtime.jit import JITFunction, create_function_from_signature  # noqa: E402

import engine.kernels  # noqa: E402


def _jit_functions():
    found = []
    for info in pkgutil.iter_modules(engine.kernels.__path__):
        module = importlib.import_module(f"engine.kernels.{info.name}")
        for name, obj in vars(module).items():
            fn = getattr(obj, "fn", None)
            if callable(fn) and getattr(fn, "__module__", None) == module.__name__ and (
                    isinstance(obj, JITFunction) or type(obj).__name__ == "InterpretedFunction"):
                found.append((f"{info.name}.{name}", fn))
    return found


FUNCTIONS = _jit_functions()


def test_the_kernels_are_found():
    names = {n for n, _ in FUNCTIONS}
    assert {"sample._sample_kernel", "q4k_mma._q4k_kernel", "attention._attn_kernel"} <= names, sorted(names)


@pytest.mark.parametrize("name,fn", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_launch_binder_returns_each_argument_as_given(name, fn):
    jit = JITFunction(fn)
    binder = create_function_from_signature(jit.signature, jit.params, BaseBackend)
    args = {}
    for p in jit.params:
        args[p.name] = 16 if p.is_constexpr else torch.zeros(4, dtype=torch.float32)
    bound, specialization, _ = binder(**args)
    assert list(bound) == [p.name for p in jit.params]
    for p in jit.params:
        assert bound[p.name] is args[p.name], f"{name}: parameter {p.name!r} is shadowed by the launcher's binder"
    for p, (kind, _) in zip(jit.params, specialization):
        assert kind == ("constexpr" if p.is_constexpr else "*fp32"), (name, p.name, kind)
