"""Bench peers: the best other implementation of a kernel, timed beside Iron's on the same device tensors.

A registered kernel names its references per family (``references={"torch": ..., "triton": ..., "numpy": ...}``).
Each is either a callable on the row's arrays (as before) or, here, a *peer name*: ``"softmax"``, or a name with
options, ``("gemm", {"trans_b": True})``. Names resolve through :data:`NAMED` to a function in this package, imported
only when a row runs it, so that importing Iron never imports Triton (CI has none) or torch.

Calling convention (callables and named peers alike): ``peer(arrays) -> tensor | None``. The arrays are the row's
device tensors plus ``ref_out``, a poisoned tensor shaped and typed like the kernel's output; a peer writes
``ref_out`` (returning None) or returns its own output tensor (so that a library call without ``out=`` costs no extra
copy pass). Named peers read the conventional array names, each overridable by an option of the same name:

==========  ===============================  ============================================================
name        arrays                           options
==========  ===============================  ============================================================
softmax     ``x`` (rows, cols) -> rows       ``x``
rms_norm    ``x`` (rows, cols), ``w`` (cols)  ``eps`` (1e-6), ``x``, ``w``
layer_norm  ``x`` (rows, cols), ``w``, ``b``    ``eps`` (1e-5), ``x``, ``w``, ``b`` (None: no bias)
attention   ``q`` (tokens, HQ, D), ``k``, ``v``  ``causal`` (True), ``scale`` (1/sqrt(D)), ``q``, ``k``, ``v``,
            (tokens, HKV, D) (Triton only)     ``config`` (a fixed tile shape instead of the autotuned one)
gemm        ``a`` (M, K), ``b`` (K, N)         ``trans_b`` (``b`` is (N, K): C = A @ B^T), ``a``, ``b``
matmul      as gemm (torch, numpy)           as gemm
==========  ===============================  ============================================================

Every peer's output is checked against the kernel's float64 oracle before it is timed (``measure``): a broken peer
is reported, not timed.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

#: reference families that run on the device tensors of a CUDA row, in the order their columns appear
DEVICE_FAMILIES = ("torch", "triton")

#: family -> peer name -> "module:function" in this package
NAMED: dict[str, dict[str, str]] = {
    "triton": {"softmax": "triton_softmax:softmax", "rms_norm": "triton_rmsnorm:rms_norm",
               "layer_norm": "triton_layernorm:layer_norm", "attention": "triton_attention:attention",
               "gemm": "triton_gemm:gemm", "matmul": "triton_gemm:gemm"},
    "torch": {"softmax": "torch_ops:softmax", "rms_norm": "torch_ops:rms_norm", "matmul": "torch_ops:matmul",
              "gemm": "torch_ops:matmul"},
    "numpy": {"matmul": "host_ops:matmul", "gemm": "host_ops:matmul"},
}

#: the Python package a family's peers need
_NEEDS = {"triton": "triton", "torch": "torch"}


class PeerUnavailable(Exception):
    """A named peer that cannot run here (its package is not installed): its column stays empty, with this reason."""


def available(family: str) -> str | None:
    """None when the family's peers can run here, else why not (the package is missing)."""
    package = _NEEDS.get(family)
    if package and importlib.util.find_spec(package) is None:
        return f"{package} is not installed"
    return None


def parse(spec: Any) -> tuple[str, dict[str, Any]]:
    """A named reference as (name, options): ``"gemm"`` or ``("gemm", {"trans_b": True})``."""
    if isinstance(spec, str):
        return spec, {}
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], dict):
        return spec[0], dict(spec[1])
    raise ValueError(f"a reference is a callable, a peer name or (name, options), not {spec!r}")


def check_spec(family: str, spec: Any) -> None:
    """Raise ValueError, at registration, for a named reference that names no peer of ``family``."""
    if callable(spec) or family not in NAMED:
        return
    name, _ = parse(spec)
    if name not in NAMED[family]:
        raise ValueError(f"no {family} peer named {name!r}; known: {', '.join(sorted(NAMED[family]))}")


def resolve(family: str, spec: Any) -> Callable[..., Any]:
    """The callable of a reference: ``spec`` itself, or the named peer with its options bound (imported now).
    Raises :class:`PeerUnavailable` when the peer's package is missing here."""
    if callable(spec):
        return spec
    name, options = parse(spec)
    target = NAMED.get(family, {}).get(name)
    if target is None:
        raise ValueError(f"no {family} peer named {name!r}; known: {', '.join(sorted(NAMED.get(family, {})))}")
    reason = available(family)
    if reason:
        raise PeerUnavailable(reason)
    module_name, _, function = target.partition(":")
    fn = getattr(importlib.import_module(f"{__name__}.{module_name}"), function)
    return functools.partial(fn, **options) if options else fn


def device_references(references: dict[str, Any]) -> tuple[dict[str, Callable[..., Any]], dict[str, str]]:
    """The device families of ``references`` resolved, in column order, and why each missing one is missing."""
    resolved: dict[str, Callable[..., Any]] = {}
    missing: dict[str, str] = {}
    for family in DEVICE_FAMILIES:
        spec = references.get(family)
        if spec is None:
            continue
        try:
            resolved[family] = resolve(family, spec)
        except PeerUnavailable as e:
            missing[family] = str(e)
    return resolved, missing
