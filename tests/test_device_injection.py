"""The C++ runtime's device-tensor branches, run on a CPU by injecting a
device's statistics (a Value's `device_stats`, which aoti.h points at the
shim's copy for CUDA tensors): the NaN check and the input guard read CUDA
inputs instead of assuming them finite, and what cannot be read (CUDA graph
capture) is skipped, never reported."""

from __future__ import annotations

import pytest

from test_native_launch import build_harness, head, masked, run

HARNESS = r"""
#include <aoti_debug/aoti_debug.h>
#include <aoti_debug/detail/checks.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

using aoti_debug::Role;
using aoti_debug::TensorView;
using aoti_debug::Value;

static float in_data[4] = {1.0f, NAN, 2.0f, 3.0f};
static float out_data[4];
static int64_t s4[1] = {4}, st4[1] = {1};
static int stats_calls = 0;
static bool capturing = false;

// a CUDA tensor's statistics, injected: the CPU core over the same bytes
static bool injected_stats(const Value& v, aoti_debug::Stats* out, const char**) {
  ++stats_calls;
  TensorView host = v.t;
  host.device_type = 0, host.device_index = -1;
  *out = aoti_debug::compute_stats(host, true);
  return true;
}

static const char* no_error(void*) { return nullptr; }
static bool is_capturing(void*) { return capturing; }
static const aoti_debug::DeviceHooks device{&no_error, &is_capturing};

static Value on_cuda(float* data) {
  Value v(TensorView{data, 6, 1, s4, st4, 1, 0});
  v.device_stats = &injected_stats;
  return v;
}

int main(int, char** argv) {
  const std::string mode = argv[1];
  capturing = mode == "capture";
  static aoti_debug::Model model(
      aoti_debug::ModelConfig{"toy", 5, "", "warn:nan", mode == "guard", "2.13.0+cpu"});
  static const aoti_debug::ArgSpec a0[] = {{"in_ptr0", Role::In}, {"out_ptr0", Role::Out}};
  static aoti_debug::Site s0{"triton_poi_fused_mul_0", "mul", "model.py:11", "scale", a0, 2};
  static const char* const ins[] = {"x"};
  static const char* const sources[] = {"", ""};
  const Value x = on_cuda(in_data), y = on_cuda(out_data);
  try {
    AOTI_DEBUG_BEGIN_RUN_ON(run, model, &device, nullptr, ins, x);
    if (mode == "guard") {
      aoti_debug::InputGuard guard(model);
      guard.finite("x", x, false);
      guard.finish(run, ins, {x});
    }
    aoti_debug::NanChecks nan(model, run);
    nan.inputs({x});
    AOTI_DEBUG_LAUNCH(run, s0, x, nullptr);
    for (int i = 0; i < 4; ++i) out_data[i] = in_data[i] * 2.0f;
    AOTI_DEBUG_LAUNCH_END(run, s0, nullptr, y);
    if (!nan.clean(s0, {nullptr, y})) nan.after(s0, sources, {x, y});
    nan.finish();
  } catch (const std::exception& e) {
    std::printf("%d\n%s\n", stats_calls, e.what());
    return 3;
  }
  std::printf("%d\n", stats_calls);
  return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_harness(tmp_path_factory.mktemp("device"), HARNESS)


def test_a_nan_in_a_cuda_input_is_not_blamed_on_the_launch_that_reads_it(harness, tmp_path):
    log = tmp_path / "log.txt"
    proc = run(harness, ["check"], log, AOTI_DEBUG_LOGLEVEL="1")
    note = head("note", "-", "nan-check")
    assert masked(log) == (
        head("run", 1, "toy") + head("launch", "toy:1.1", "triton_poi_fused_mul_0")
        + note + "  launch toy:1.1 triton_poi_fused_mul_0 (source model.py:11) wrote 1 NaN into out_ptr0 "
                 "(first at flat index 1); its input in_ptr0 already held NaN (look earlier)\n"
        + note + "  run 1: NaN/Inf in 1 launch: triton_poi_fused_mul_0 x1\n")
    # the input read once by nan.inputs (it held NaN: the bad path reads it from the known-bad
    # list, not again), the output once
    assert proc.stdout == "2\n"


def test_the_input_guard_names_a_nan_in_a_cuda_input(harness, tmp_path):
    log = tmp_path / "log.txt"
    proc = run(harness, ["guard"], log, check=False, AOTI_DEBUG_LOGLEVEL="1")
    assert proc.returncode == 3
    assert proc.stdout == ("1\naoti-debug: the inputs of model 'toy' do not match what it was compiled for:\n"
                           "  x holds 1 NaN (first at flat index 1)\n")


def test_during_graph_capture_no_cuda_tensor_is_read_and_none_is_reported(harness, tmp_path):
    """The run's stream is being captured: the device's statistics (a copy to the host) are never
    asked for, so nothing waits inside the capture, and nothing unread is reported."""
    log = tmp_path / "log.txt"
    proc = run(harness, ["capture"], log, AOTI_DEBUG_LOGLEVEL="1")
    assert masked(log) == head("run", 1, "toy") + head("launch", "toy:1.1", "triton_poi_fused_mul_0")
    assert proc.stdout == "0\n"


def test_during_graph_capture_a_record_says_why_it_has_no_statistics(harness, tmp_path):
    log = tmp_path / "log.txt"
    proc = run(harness, ["capture"], log, AOTI_DEBUG_LOGLEVEL="5")
    assert proc.stdout == "0\n"
    text = masked(log)
    assert text.count("stats=skipped (CUDA graph capture in progress)") == 3, text   # run in, launch in, out


# -- the Python runtime's twin branches ------------------------------------------

class _Capturing:
    def synchronize(self):
        return None

    def capturing(self):
        return True


class _Recorder:
    def __init__(self):
        self.saved = []

    def save(self, file, value):
        self.saved.append(file)
        return {"file": file}


def test_a_level_10_dump_copies_no_device_tensor_during_graph_capture():
    """torch.compile's level-10 dumps copy device tensors to the host: never while the stream is
    being captured (the copy would break the user's capture); the file is missing with the reason,
    so the launch reads as incomplete.  A meta tensor stands in for a CUDA one (a copy would fail)."""
    import torch
    from aoti_debug.runtime import device, launches
    rec = _Recorder()
    device.inject(_Capturing())
    try:
        got = launches._save(rec, "launch000001_in_x.pt", torch.empty(3, device="meta"))
        inputs = launches._save(rec, "inputs.pt", [torch.ones(2), torch.empty(3, device="meta")])
        cpu = launches._save(rec, "launch000002_in_y.pt", torch.ones(2))
    finally:
        device.inject(None)
    assert got == inputs == {"file": None, "error": "CUDA graph capture in progress"}
    assert cpu == {"file": "launch000002_in_y.pt"} and rec.saved == ["launch000002_in_y.pt"]


def test_the_device_hooks_are_none_on_a_cpu_only_process_and_the_injected_ones_when_set():
    from aoti_debug.runtime import device
    import torch
    injected = _Capturing()
    device.inject(injected)
    try:
        assert device.hooks() is injected
    finally:
        device.inject(None)
    if not torch.cuda.is_initialized():   # no device has work to wait for
        assert device.hooks() is None
    assert device.one_line("CUDA error: an illegal memory access was encountered\nCUDA kernel errors "
                           "might be asynchronously reported") == \
        "CUDA error: an illegal memory access was encountered"
    assert device.one_line("") == device.one_line(None) == "unknown error"


# -- torch.compile's statistics of a device tensor: reduced on the device, one transfer ----

def _corpus():
    import torch
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=g)
    x[[3, 500]] = float("nan")
    x[7], x[9] = float("inf"), -float("inf")
    c = torch.randn(20, dtype=torch.complex64, generator=g)
    c[4], c[6] = complex(float("nan"), 0), complex(0, float("inf"))
    out = [x, x.to(torch.float16), x.to(torch.bfloat16), x.to(torch.float64), x.view(10, 100).t(), x[::3],
           torch.full((5,), float("nan")), torch.randint(-100, 100, (50,), generator=g),
           torch.randint(0, 200, (30,), dtype=torch.uint8), torch.tensor([0, 2**63 + 5], dtype=torch.uint64),
           torch.tensor([True, False, True]), c]
    out += [torch.randn(40, generator=g).to(getattr(torch, d)) for d in ("float8_e4m3fn", "float8_e5m2")]
    return out


FIELDS = ("kind", "min", "max", "imin", "imax", "nan_count", "inf_count", "true_count", "false_count",
          "first_nan", "first_inf", "hash", "unsigned")


def test_device_statistics_equal_the_compiled_cores():
    """compute_with_torch (what a CUDA tensor gets) against the CPU core, on the same bytes: every
    field exact (the mean to its last bits: torch's summation order)."""
    import math
    from aoti_debug.runtime.stats import compute_native, compute_with_torch
    for t in _corpus():
        got, want = compute_with_torch(t, hash=True), compute_native(t, hash=True)
        for f in FIELDS:
            a, b = getattr(got, f), getattr(want, f)
            assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), (t.dtype, f, a, b)
        assert got.mean == pytest.approx(want.mean, rel=1e-12, nan_ok=True), t.dtype


def test_device_statistics_wait_for_the_device_once():
    """No op whose result size depends on the data (nonzero, boolean indexing) and no scalar read
    per value: the device is waited for once, by the single transfer at the end (torch ops recorded
    as dispatched, on the CPU)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from aoti_debug.runtime.stats import compute_with_torch

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    for t in _corpus():
        with Ops() as ops:
            compute_with_torch(t, hash=True)
        waits = {"nonzero", "masked_select", "_local_scalar_dense", "item", "index"} & set(ops.names)
        assert not waits, (t.dtype, waits)
        assert ops.names.count("stack") == 1, (t.dtype, ops.names)
