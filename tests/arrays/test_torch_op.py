"""iron.torch_op (issue 16): Iron kernel launches as torch custom ops, under torch.compile and CUDA-graph capture.

CI has no torch: the argument checks and the missing-torch error run there, the rest skips. Where torch is installed
the ops run on the CPU (the interpreter, through zero-copy NumPy views of the tensors: the cpu backend takes NumPy
arrays, not torch tensors) and, with a GPU, on CUDA (torch tensors passed in place, on torch's stream).

This module does not use ``from __future__ import annotations``: torch.library infers an op's schema from its
function's annotations, and string annotations are evaluated in the module's globals, where torch (imported lazily
so that CI can collect this file) is not.
"""

import itertools
import subprocess
import sys

import numpy as np
import pytest

import iron
from iron import T, Tensor, exp, program_id

_ids = itertools.count()


@iron.kernel
def scaled_exp_kernel(x: Tensor[T], out: Tensor[T], s: float):
    i = program_id(0)
    out[i] = exp(x[i]) * s


@iron.kernel
def add_kernel(a: Tensor[T], b: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = a[i] + b[i]


@iron.kernel
def exp_pair_kernel(x: Tensor[T], e: Tensor[T], ne: Tensor[T]):
    i = program_id(0)
    e[i] = exp(x[i])
    ne[i] = exp(-x[i])


# --- torch-free: these run in CI ---------------------------------------------------------------------------------

def test_importing_iron_does_not_import_torch():
    code = "import sys, iron; assert 'torch' not in sys.modules, 'import iron imported torch'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_torch_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` sees where torch is not installed
    with pytest.raises(ImportError, match=r"iron.torch_op needs torch; pip install torch"):
        iron.torch_op("mylib::scaled_exp", shape=lambda x, s: (x.shape, x.dtype))


@pytest.mark.parametrize("name", ["scaled_exp", "mylib:scaled_exp", "::scaled_exp", "mylib::", "my lib::f",
                                  "mylib::scaled.exp", "a::b::c", "1lib::f", 3])
def test_bad_op_name_is_refused_before_torch_is_needed(monkeypatch, name):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ValueError, match="must look like 'namespace::opname'"):
        iron.torch_op(name)


def test_shape_must_be_callable(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(TypeError, match="shape must be a function"):
        iron.torch_op("mylib::scaled_exp", shape=(3, 4))


# --- with torch ----------------------------------------------------------------------------------------------------

def _launch(kernel, *args) -> None:
    """One thread per element of the first tensor, on that tensor's device."""
    import torch

    n = args[0].numel()
    if args[0].is_cuda:
        kernel[n](*args, backend="cuda")
    else:
        kernel[n](*(a.numpy() if isinstance(a, torch.Tensor) else a for a in args), backend="cpu")


class Ops:
    """The test's ops, registered once per process (torch's op registry is global): scaled_exp (one output, from
    shape=), add_into (writes its ``out`` argument, returns None, no shape=) and exp_pair (two outputs)."""

    def __init__(self, torch) -> None:
        self.launches = 0

        @iron.torch_op("iron_test::scaled_exp", shape=lambda x, s: (x.shape, x.dtype))
        def scaled_exp(x: torch.Tensor, s: float) -> torch.Tensor:
            out = torch.full_like(x, float("nan"))  # poisoned: an element the kernel misses shows
            self.launches += 1
            _launch(scaled_exp_kernel, x, out, s)
            return out

        @iron.torch_op("iron_test::add_into", mutates_args=("out",))
        def add_into(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
            self.launches += 1
            _launch(add_kernel, a, b, out)

        @iron.torch_op("iron_test::exp_pair", shape=lambda x: [(x.shape, x.dtype), (x.shape, x.dtype)])
        def exp_pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            e, ne = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
            self.launches += 1
            _launch(exp_pair_kernel, x, e, ne)
            return e, ne

        self.scaled_exp, self.add_into, self.exp_pair = scaled_exp, add_into, exp_pair

    def pipeline(self, x, s: float):
        """Two Iron ops with torch around them: 2 * (exp(x) * s + x)."""
        import torch

        y = self.scaled_exp(x, s)
        z = torch.full_like(x, float("nan"))  # poisoned, as the ops' outputs are
        self.add_into(y, x, z)
        return z * 2.0


def _pipeline_oracle(x: np.ndarray, s: float) -> np.ndarray:
    x = x.astype(np.float64)
    return 2.0 * (np.exp(x) * s + x)


@pytest.fixture(scope="module")
def ops() -> Ops:
    torch = pytest.importorskip("torch")
    return Ops(torch)


def _skip_without_cuda(torch) -> None:
    from iron.runtime import unavailable_reason

    reason = unavailable_reason("cuda") or (None if torch.cuda.is_available() else "torch sees no CUDA device")
    if reason:
        pytest.skip(f"CUDA unavailable: {reason}")


@pytest.fixture(params=["cpu", "cuda"])
def device(request) -> str:
    """Where the op's tensors live: the CPU (the interpreter) wherever torch is; CUDA with a GPU and Iron's backend."""
    torch = pytest.importorskip("torch")
    if request.param == "cuda":
        _skip_without_cuda(torch)
    return request.param


def _compile(fn, backend: str):
    """torch.compile into one graph (an op that broke it would fail here). Inductor runs on CUDA; aot_eager traces
    through the fake implementations just as Inductor does, without its code generation (no C++ toolchain needed on
    the CPU, and seconds instead of tens of seconds)."""
    import torch

    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend=backend)


def _close(got, want: np.ndarray) -> bool:
    return np.allclose(got.detach().cpu().numpy().astype(np.float64), want, rtol=1e-5, atol=1e-5)


def test_compiled_function_of_two_iron_ops_matches_eager_and_oracle(ops, device, rng):
    import torch

    xs, s = rng.standard_normal((37, 101)).astype(np.float32), float(rng.uniform(0.5, 2.0))
    x = torch.tensor(xs, device=device)
    eager = ops.pipeline(x, s)
    pipeline = _compile(ops.pipeline, "inductor" if device == "cuda" else "aot_eager")
    compiled = pipeline(x, s)
    want = _pipeline_oracle(xs, s)
    assert eager.shape == compiled.shape == x.shape and eager.dtype == compiled.dtype == torch.float32
    assert _close(eager, want) and _close(compiled, want)
    xs2 = rng.standard_normal((37, 101)).astype(np.float32)  # the compiled function again, on new values
    assert _close(pipeline(torch.tensor(xs2, device=device), s), _pipeline_oracle(xs2, s))


def test_compiled_op_with_two_outputs(ops, device, rng):
    import torch

    xs = rng.standard_normal(1000).astype(np.float32)
    x = torch.tensor(xs, device=device)

    def sinh2(t):
        e, ne = ops.exp_pair(t)
        return e - ne

    want = 2.0 * np.sinh(xs.astype(np.float64))
    assert _close(sinh2(x), want) and _close(_compile(sinh2, "aot_eager")(x), want)


def test_cuda_graph_capture_replays_iron_ops(ops, rng):
    """Warm up once (Iron compiles at a kernel's first launch, which a capture cannot record), capture, then replay
    on new values copied into the static input."""
    import torch

    _skip_without_cuda(torch)
    shape, s = (64, 257), float(rng.uniform(0.5, 2.0))
    static_x = torch.tensor(rng.standard_normal(shape).astype(np.float32), device="cuda")
    ops.pipeline(static_x, s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = ops.pipeline(static_x, s)
    for _ in range(2):
        xs = rng.standard_normal(shape).astype(np.float32)
        static_x.copy_(torch.from_numpy(xs))
        static_out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _close(static_out, _pipeline_oracle(xs, s))


def test_fake_implementation_gives_shapes_dtypes_and_device_without_launching(ops):
    """What torch.compile traces: the outputs' shapes and dtypes from shape=, on the first tensor argument's device
    (fake CUDA tensors need no GPU), and no kernel launched."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    before = ops.launches
    with FakeTensorMode():
        x = torch.empty((3, 5), dtype=torch.float16, device="cuda")
        y = ops.scaled_exp(x, 2.0)
        e, ne = ops.exp_pair(x)
        assert ops.add_into(x, x, torch.empty_like(x)) is None
    for t in (y, e, ne):
        assert isinstance(t, FakeTensor)
        assert (t.shape, t.dtype, t.device.type) == (torch.Size((3, 5)), torch.float16, "cuda")
    assert ops.launches == before


def test_return_annotation_is_checked_against_shape():
    torch = pytest.importorskip("torch")

    with pytest.raises(TypeError, match="returns tensors, so give shape="):
        @iron.torch_op(f"iron_test::no_shape_{next(_ids)}")
        def no_shape(x: torch.Tensor) -> torch.Tensor:
            return x.clone()

    with pytest.raises(TypeError, match="annotate what unannotated returns"):
        @iron.torch_op(f"iron_test::unannotated_{next(_ids)}", shape=lambda x: (x.shape, x.dtype))
        def unannotated(x: torch.Tensor):
            return x.clone()

    with pytest.raises(TypeError, match="return None, so there are no outputs"):
        @iron.torch_op(f"iron_test::shape_of_none_{next(_ids)}", mutates_args=("x",), shape=lambda x: (x.shape,))
        def shape_of_none(x: torch.Tensor) -> None:
            pass


@pytest.mark.parametrize("bad", [lambda x: x.shape, lambda x: (x.shape, "float32"), lambda x: [(x.shape,)]],
                         ids=["shape-only", "dtype-not-torch", "pair-too-short"])
def test_shape_result_of_the_wrong_form_is_named(bad):
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    @iron.torch_op(f"iron_test::bad_shape_{next(_ids)}", shape=bad)
    def op(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    with FakeTensorMode(), pytest.raises(TypeError, match=r"must return \(shape, dtype\)"):
        op(torch.empty(4))
