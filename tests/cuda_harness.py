"""CUDA code generation without a GPU, for the tests (docs/gpu.md).

On the registry's CUDA build of torch, Inductor generates, compiles and links
the real AOTI CUDA wrapper for an sm_90 device that exists for code generation
only: nothing here loads a cubin or launches anything.  What it takes:

- model inputs from FakeTensorMode on "cuda" (the caller's job, see
  `fake_cuda_inputs`);
- torch.cuda, the Dynamo device interface and its cached properties answering
  for one sm_90 device;
- a Triton driver whose target is sm_90, so Triton compiles to sm_90a cubin
  with its bundled ptxas;
- Inductor's pattern library traced on CPU (it traces with real tensors on
  the input device);
- every Triton kernel compiled and recorded for the package (save_gpu_kernel),
  never loaded or launched: the first config, no autotuning;
- a stand-in libcuda.so.1 for the link (`build_libcuda_standin`).

`install(interpret=True)` instead runs what Inductor generates for that
device on CPU tensors, through Triton's interpreter (TRITON_INTERPRET=1):
the device's allocations are made on the CPU, its stream is 0, and the
libdevice functions the interpreter leaves as stubs are routed to numpy.
The kernels' math is real; nothing about a GPU's execution is.

Everything private this leans on is in HOOKS and INTERPRETER_HOOKS, looked
up by name before anything is changed: a release that moved one makes
`install` fail with that hook's name, never silently.  The fakes are installed in a process of their
own (the test suite compiles in a subprocess), never in the test process:
nothing here is part of the product, which never imports it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import types
from typing import Callable, List, Optional

CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")

# The device Inductor generates code for: an H100's figures.
SM90 = types.SimpleNamespace(
    name="sm_90 (code generation only)", major=9, minor=0, multi_processor_count=132,
    total_memory=80 * 2**30, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
    max_threads_per_block=1024, warp_size=32, L2_cache_size=50 * 2**20,
    shared_memory_per_block=48 * 1024, shared_memory_per_block_optin=227 * 1024,
    shared_memory_per_multiprocessor=228 * 1024, gcnArchName="", uuid="00000000-sm90",
    is_integrated=False, clock_rate=1980000, memory_clock_rate=2619000, memory_bus_width=5120)


class HarnessUnsupported(RuntimeError):
    """This torch (or Triton) lacks a hook the harness needs; str() names it."""


def _no_device(*_args, **_kwargs):
    return None


def _exchange(index):
    return 0 if index is not None and index >= 0 else -1


# (module, attribute path, what replaces it: a function of the original).
# Each entry is one private (or device-query) hook; `missing_hooks` checks them all.
HOOKS = (
    # torch.cuda answers for one sm_90 device
    ("torch.cuda", "is_available", lambda orig: lambda: True),
    ("torch.cuda", "device_count", lambda orig: lambda: 1),
    ("torch.cuda", "current_device", lambda orig: lambda: 0),
    ("torch.cuda", "set_device", lambda orig: _no_device),
    ("torch.cuda", "synchronize", lambda orig: _no_device),
    ("torch.cuda", "_lazy_init", lambda orig: _no_device),
    ("torch.cuda", "is_initialized", lambda orig: lambda: True),
    ("torch.cuda", "get_device_capability", lambda orig: lambda device=None: (SM90.major, SM90.minor)),
    ("torch.cuda", "get_device_properties", lambda orig: lambda device=None: SM90),
    ("torch.cuda", "get_device_name", lambda orig: lambda device=None: SM90.name),
    ("torch.cuda", "get_arch_list", lambda orig: lambda: ["sm_90"]),
    ("torch.cuda", "is_bf16_supported", lambda orig: lambda *a, **k: True),
    ("torch.cuda", "_exchange_device", lambda orig: _exchange),
    ("torch.cuda", "_maybe_exchange_device", lambda orig: _exchange),
    ("torch.cuda", "get_rng_state", lambda orig: lambda device="cuda": _rng_state()),
    ("torch.cuda", "set_rng_state", lambda orig: _no_device),
    ("torch._C", "_cuda_getDeviceCount", lambda orig: lambda: 1),
    ("torch._C", "_cuda_getCurrentRawStream", lambda orig: lambda device=None: 0),
    # the Dynamo device interface copied torch.cuda's functions at import
    ("torch._dynamo.device_interface", "CudaInterface.current_device", lambda orig: staticmethod(lambda: 0)),
    ("torch._dynamo.device_interface", "CudaInterface.set_device", lambda orig: staticmethod(_no_device)),
    ("torch._dynamo.device_interface", "CudaInterface.device_count", lambda orig: staticmethod(lambda: 1)),
    ("torch._dynamo.device_interface", "CudaInterface.synchronize", lambda orig: staticmethod(_no_device)),
    ("torch._dynamo.device_interface", "CudaInterface.get_device_properties",
     lambda orig: staticmethod(lambda device=None: SM90)),
    ("torch._dynamo.device_interface", "CudaInterface.is_bf16_supported",
     lambda orig: staticmethod(lambda *a, **k: True)),
    ("torch._dynamo.device_interface", "CudaInterface.exchange_device", lambda orig: staticmethod(_exchange)),
    ("torch._dynamo.device_interface", "CudaInterface.maybe_exchange_device",
     lambda orig: staticmethod(_exchange)),
    ("torch._dynamo.device_interface", "CudaInterface.get_raw_stream", lambda orig: staticmethod(lambda d: 0)),
    # ... and the compile workers' cache of device properties
    ("torch._dynamo.device_interface", "caching_worker_device_properties",
     lambda orig: {**orig, "cuda": [SM90]}),
    # compiled in this process: Inductor's compile workers are other processes, where none of
    # this is installed (2.11's Triton there finds no GPU backend)
    ("torch._inductor.config", "compile_threads", lambda orig: 1),
    # 2.11's fake tensors allocate one real tensor on a device torch.cuda calls available
    ("torch._subclasses.fake_tensor", "init_gpu_context", lambda orig: _no_device),
    # Triton: an sm_90 target, compiled for but never loaded
    ("triton.runtime.driver", "driver.set_active", None),
    ("triton.backends.nvidia.driver", "CudaDriver.get_current_target", None),
    ("triton.backends.compiler", "GPUTarget", None),
    # Inductor: patterns traced on CPU
    ("torch._inductor.fx_passes.joint_graph", "lazy_init",
     lambda orig: lambda input_device=None: orig(_cpu())),
    ("torch._inductor.select_algorithm", "AlgorithmSelectorCache.generate_example_value",
     lambda orig: staticmethod(_meta_example_value)),
    # where a generated wrapper's code is handed out (output_code)
    ("torch._inductor.graph", "GraphLowering.save_output_code", None),
)

# For code generation only: kernels compiled and recorded instead of run.
COMPILE_ONLY_HOOKS = (
    ("triton.compiler.compiler", "CompiledKernel._init_handles", lambda orig: _no_device),
    ("torch._inductor.runtime.triton_heuristics", "CachingAutotuner.run", lambda orig: _record_kernel),
    ("torch._inductor.runtime.triton_heuristics", "CachingAutotuner.save_gpu_kernel", None),
    ("torch._inductor.runtime.triton_heuristics", "CachingAutotuner.precompile", None),
)

# For running the generated wrapper through Triton's interpreter on CPU tensors.
INTERPRETER_HOOKS = (
    # the wrapper's device allocations (bound when its module loads)
    ("torch._C._dynamo.guards", "_empty_strided_cuda",
     lambda orig: lambda size, stride, dtype: _cpu_empty_strided(size, stride, dtype)),
    # where the interpreter keeps a block's numpy array, for the routed libdevice functions
    ("triton.runtime.interpreter", "TensorHandle", None),
    # a scalar as a loop bound (tl.range): Triton 3.6 (torch 2.11) converts its one-element
    # array with int(), which NumPy 2 refuses for an array of one dimension; 3.9 squeezes it first
    ("triton.runtime.interpreter", "_patch_lang_tensor", lambda orig: _index_by_squeeze(orig)),
    ("triton.language.extra.libdevice", "sqrt", None),
    ("triton.language", "math.sqrt", None),
)


def _index_by_squeeze(patch_tensor):
    def patched(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))
    return patched


def _rng_state():
    import torch
    return torch.zeros(16, dtype=torch.uint8)


def _cpu():
    import torch
    return torch.device("cpu")


def _cpu_empty_strided(size, stride, dtype):
    import torch
    return torch.empty_strided(size, stride, dtype=dtype)


def _record_kernel(self, *args, stream, benchmark_run=False, **kwargs):
    """CachingAutotuner.run at compile time: compile, keep the first config and
    record its binary for the package, as the compile-time autotune block
    would after benchmarking; nothing runs."""
    if not self.launchers:
        self.precompile()
    self.launchers = self.launchers[:1]
    self.save_gpu_kernel(stream, self.launchers[0])


def _meta_example_value(size, stride, device, dtype, extra_size, allocation_size=None):
    """Autotuning's example inputs, which would be allocated on the device: meta tensors."""
    import torch
    return torch.empty_strided(size, stride, dtype=dtype, device="meta")


def _lookup(module_name: str, path: str):
    owner = importlib.import_module(module_name)
    parts = path.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    return owner, parts[-1], getattr(owner, parts[-1])


def _hooks(interpret: bool):
    return HOOKS + (INTERPRETER_HOOKS if interpret else COMPILE_ONLY_HOOKS)


def missing_hooks(interpret: bool = False) -> List[str]:
    """The hooks this torch and Triton lack, as 'module.path'."""
    missing = []
    for module_name, path, _ in _hooks(interpret):
        try:
            _lookup(module_name, path)
        except (ImportError, AttributeError):
            missing.append(f"{module_name}.{path}")
    return missing


def skip_reason() -> Optional[str]:
    """Why the harness cannot run here (one line), or None."""
    import torch
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build: CUDA code generation needs torch's CUDA build"
    if importlib.util.find_spec("triton") is None:
        return f"torch {torch.__version__} has no Triton"
    if not os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc")):
        return f"no CUDA toolkit at {CUDA_HOME} (CUDA_HOME): AOTI compiles the CUDA wrapper with its headers"
    if shutil.which("gcc") is None:
        return "no gcc for the stand-in libcuda.so.1"
    return None


def install(interpret: bool = False) -> None:
    """Fake the sm_90 device in this process (a process of its own; never
    undone); with `interpret`, run its kernels through Triton's interpreter."""
    if interpret and os.environ.get("TRITON_INTERPRET") != "1":
        raise HarnessUnsupported("cuda_harness: install(interpret=True) needs TRITON_INTERPRET=1 "
                                 "in the environment before triton is imported")
    missing = missing_hooks(interpret)
    if missing:
        import torch
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise HarnessUnsupported(f"cuda_harness: torch {torch.__version__} no longer has {missing[0]}{more}, "
                                 "which the GPU-less CUDA harness hooks into")
    os.environ.setdefault("CUDA_HOME", CUDA_HOME)
    if interpret:
        # Triton's own launcher, not Inductor's static one (which needs the driver)
        os.environ["TORCHINDUCTOR_USE_STATIC_CUDA_LAUNCHER"] = "0"
    for module_name, path, make in _hooks(interpret):
        if make is None:
            continue          # used as it is; listed so that its absence is named
        owner, name, original = _lookup(module_name, path)
        raw = owner.__dict__.get(name, original) if isinstance(owner, type) else original
        setattr(owner, name, make(raw.__func__ if isinstance(raw, staticmethod) else raw))
    _install_triton_driver()
    if interpret:
        _route_libdevice()


def _install_triton_driver() -> None:
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaDriver
    from triton.runtime.driver import driver

    class CompileOnlyCudaDriver(CudaDriver):
        """Triton's CUDA driver minus the driver library: targets sm_90, loads nothing."""

        def __init__(self):       # CudaDriver's would load libcuda
            self.utils = None
            self.launcher_cls = None

        def get_current_device(self):
            return 0

        def set_current_device(self, device):
            pass

        def get_current_stream(self, device=None):
            return 0

        def get_device_capability(self, device=None):
            return (SM90.major, SM90.minor)

        def get_current_target(self):
            return GPUTarget("cuda", SM90.major * 10 + SM90.minor, SM90.warp_size)

        @staticmethod
        def is_active():
            return True

    driver.set_active(CompileOnlyCudaDriver())


# libdevice functions Inductor calls that tl.math lacks, by what numpy computes instead
_NUMPY_LIBDEVICE = {
    "tanh": "tanh", "log1p": "log1p", "expm1": "expm1", "sinh": "sinh", "cosh": "cosh",
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
    "atanh": "arctanh", "tan": "tan", "trunc": "trunc", "rint": "rint", "nearbyint": "rint",
    "log10": "log10", "isnan": "isnan", "isinf": "isinf", "signbit": "signbit",
}


def _route_libdevice() -> None:
    """Triton's interpreter implements tl.math but leaves libdevice's functions as
    stubs that return None: route each to tl.math's function of that name, or to
    numpy's.  One left unrouted fails loudly when a kernel calls it."""
    import numpy
    import triton.language as tl
    from triton.language.extra import libdevice
    from triton.runtime.interpreter import TensorHandle

    def by_math(name):
        return lambda *args, **kwargs: getattr(tl.math, name)(*args, **kwargs)

    def by_numpy(name):
        function = getattr(numpy, name)

        def routed(x, *args, **kwargs):
            data = function(x.handle.data)
            if data.dtype == numpy.bool_:
                return tl.core.tensor(TensorHandle(data, tl.int1), x.type.with_element_ty(tl.int1))
            return tl.core.tensor(TensorHandle(data.astype(x.handle.data.dtype), x.handle.dtype.scalar), x.type)
        return routed

    def unrouted(name):
        def fail(*args, **kwargs):
            raise NotImplementedError(f"cuda_harness: libdevice.{name} has no CPU equivalent "
                                      "under Triton's interpreter")
        return fail

    for name in dir(libdevice):
        if name.startswith("_") or not callable(getattr(libdevice, name)):
            continue
        if hasattr(tl.math, name):
            setattr(libdevice, name, by_math(name))
        elif name in _NUMPY_LIBDEVICE:
            setattr(libdevice, name, by_numpy(_NUMPY_LIBDEVICE[name]))
        else:
            setattr(libdevice, name, unrouted(name))


@contextlib.contextmanager
def output_code(keep: Callable[[str], None]):
    """Every wrapper Inductor generates in the block, handed to `keep`."""
    from torch._inductor.graph import GraphLowering
    before = GraphLowering.save_output_code
    GraphLowering.save_output_code = staticmethod(keep)
    try:
        yield
    finally:
        GraphLowering.save_output_code = before


def fake_cuda_inputs(make: Callable):
    """(FakeTensorMode, make()'s result) with make() run under a FakeTensorMode:
    tensors it creates on "cuda" are fake, no device memory exists."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        return mode, make()


def model_line(text: str) -> str:
    """'file:line' of the line of tests/cuda_models.py that starts with `text`
    (where a record's source line must point)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_models.py")
    with open(path) as f:
        numbers = [i for i, line in enumerate(f, 1) if line.strip().startswith(text)]
    assert len(numbers) == 1, (text, numbers)
    return f"{path}:{numbers[0]}"


# -- the link: a stand-in for the NVIDIA driver library ---------------------------

LIBCUDA_STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libcuda_standin.c")


def build_libcuda_standin(directory: str) -> str:
    """Compile tests/libcuda_standin.c into `directory`/libcuda.so.1 (and the
    libcuda.so link-time name); returns the directory, for LIBRARY_PATH."""
    os.makedirs(directory, exist_ok=True)
    lib = os.path.join(directory, "libcuda.so.1")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", lib, LIBCUDA_STANDIN],
                   check=True, capture_output=True, text=True)
    dev = os.path.join(directory, "libcuda.so")
    if not os.path.lexists(dev):
        os.symlink("libcuda.so.1", dev)
    return directory
