"""The C++ runtime's device-tensor branches, run on a CPU by injecting a
device's statistics (a Value's `device_stats`, which aoti.h points at the
device's own reductions for CUDA tensors): the NaN check and the input guard
read CUDA inputs instead of assuming them finite, what cannot be read (CUDA
graph capture) is skipped, never reported, and a record's device tensors are
asked for together (one call, one transfer in aoti.h's adapter), each read
once for the record and the NaN check after it."""

from __future__ import annotations

import pytest

from test_native_launch import build_harness, head, masked, run

HARNESS = r"""
#include <aoti_debug/aoti_debug.h>
#include <aoti_debug/checks.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

using aoti_debug::Role;
using aoti_debug::TensorView;
using aoti_debug::Value;

static float in_data[4] = {1.0f, NAN, 2.0f, 3.0f};
static float out_data[4];
static int64_t s4[1] = {4}, st4[1] = {1};
static float a_data[4] = {1.0f, 2.0f, 3.0f, 4.0f}, b_data[4] = {0.5f, 0.25f, 2.0f, 8.0f};
static float sum_data[4], prod_data[4], diff_data[4];
static int stats_calls = 0, stats_tensors = 0;   // calls (transfers) and the tensors they covered
static bool capturing = false;

// CUDA tensors' statistics, injected: the CPU core over the same bytes
static void injected_stats(const Value* const* vals, size_t n, aoti_debug::Stats* out, bool* ok) {
  ++stats_calls;
  for (size_t i = 0; i < n; ++i) {
    ++stats_tensors;
    TensorView host = vals[i]->t;
    host.device_type = 0, host.device_index = -1;
    out[i] = aoti_debug::compute_stats(host, true);
    ok[i] = true;
  }
}

static const char* no_error(void*) { return nullptr; }
static bool is_capturing(void*) { return capturing; }
static const aoti_debug::DeviceHooks device{&no_error, &is_capturing};

// a CUDA tensor's bytes, injected: a copy of the same memory (a level-10 dump's)
static bool injected_read(const Value& v, void* dst, uint64_t bytes) {
  std::memcpy(dst, v.t.data, static_cast<size_t>(bytes));
  return true;
}

static Value on_cuda(float* data) {
  Value v(TensorView{data, 6, 1, s4, st4, 1, 0});
  v.device_stats = &injected_stats;
  v.device_read = &injected_read;
  return v;
}

int main(int, char** argv) {
  const std::string mode = argv[1];
  capturing = mode == "capture";
  static aoti_debug::Model model(
      aoti_debug::ModelConfig{"toy", mode.rfind("many", 0) == 0 ? 10 : 5, "", "warn:nan", mode == "guard",
                              "2.13.0+cpu"});
  static const aoti_debug::ArgSpec a0[] = {{"in_ptr0", Role::In}, {"out_ptr0", Role::Out}};
  static aoti_debug::Site s0{"triton_poi_fused_mul_0", "mul", "model.py:11", "scale", a0, 2};
  static const char* const ins[] = {"x"};
  static const char* const sources[] = {"", ""};
  const Value x = on_cuda(in_data), y = on_cuda(out_data);
  capturing = capturing || mode == "many-capture";
  if (mode.rfind("many", 0) == 0) {   // two inputs, three outputs, all finite
    static const aoti_debug::ArgSpec a1[] = {{"in_ptr0", Role::In}, {"in_ptr1", Role::In},
                                             {"out_ptr0", Role::Out}, {"out_ptr1", Role::Out},
                                             {"out_ptr2", Role::Out}};
    static aoti_debug::Site s1{"triton_poi_fused_add_mul_sub_0", "add,mul,sub", "model.py:12", "combine", a1, 5};
    static const char* const names[] = {"a", "b"};
    static const char* const outs[] = {"sum", "prod", "diff"};
    static const char* const none[] = {"", "", "", "", ""};
    const Value a = on_cuda(a_data), b = on_cuda(b_data);
    const Value sum = on_cuda(sum_data), prod = on_cuda(prod_data), diff = on_cuda(diff_data);
    AOTI_DEBUG_BEGIN_RUN_ON(run, model, &device, nullptr, names, a, b);
    aoti_debug::NanChecks nan(model, run);
    nan.inputs({a, b});
    AOTI_DEBUG_LAUNCH(run, s1, a, b, nullptr, nullptr, nullptr);
    for (int i = 0; i < 4; ++i)
      sum_data[i] = a_data[i] + b_data[i], prod_data[i] = a_data[i] * b_data[i], diff_data[i] = a_data[i] - b_data[i];
    AOTI_DEBUG_LAUNCH_END(run, s1, nullptr, nullptr, sum, prod, diff);
    if (!nan.clean(s1, {nullptr, nullptr, sum, prod, diff})) nan.after(s1, none, {a, b, sum, prod, diff});
    nan.finish();
    AOTI_DEBUG_END_RUN(run, outs, sum, prod, diff);
    std::printf("%d %d\n", stats_calls, stats_tensors);
    return 0;
  }
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
    std::printf("%d %d\n%s\n", stats_calls, stats_tensors, e.what());
    return 3;
  }
  std::printf("%d %d\n", stats_calls, stats_tensors);
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
    assert proc.stdout == "2 2\n"


def test_the_input_guard_names_a_nan_in_a_cuda_input(harness, tmp_path):
    log = tmp_path / "log.txt"
    proc = run(harness, ["guard"], log, check=False, AOTI_DEBUG_LOGLEVEL="1")
    assert proc.returncode == 3
    assert proc.stdout == ("1 1\naoti-debug: the inputs of model 'toy' do not match what it was compiled for:\n"
                           "  x holds 1 NaN (first at flat index 1)\n")


def test_during_graph_capture_no_cuda_tensor_is_read_and_none_is_reported(harness, tmp_path):
    """The run's stream is being captured: the device's statistics (a copy to the host) are never
    asked for, so nothing waits inside the capture, and nothing unread is reported."""
    log = tmp_path / "log.txt"
    proc = run(harness, ["capture"], log, AOTI_DEBUG_LOGLEVEL="1")
    assert masked(log) == head("run", 1, "toy") + head("launch", "toy:1.1", "triton_poi_fused_mul_0")
    assert proc.stdout == "0 0\n"


def test_during_graph_capture_a_record_says_why_it_has_no_statistics(harness, tmp_path):
    log = tmp_path / "log.txt"
    proc = run(harness, ["capture"], log, AOTI_DEBUG_LOGLEVEL="5")
    assert proc.stdout == "0 0\n"
    text = masked(log)
    assert text.count("stats=skipped (CUDA graph capture in progress)") == 3, text   # run in, launch in, out


@pytest.mark.parametrize("level, want", [
    # one call each: run's inputs, nan.inputs, the launch's inputs, its outputs (the NaN check
    # reads them from the launch-end record), the run's outputs
    ("5", "5 12\n"),
    # nan.inputs and the launch's outputs: one call each, the clean outputs need no input read
    ("1", "2 5\n"),
])
def test_a_records_device_tensors_are_read_in_one_call_and_once(harness, tmp_path, level, want):
    log = tmp_path / "log.txt"
    proc = run(harness, ["many"], log, AOTI_DEBUG_LOGLEVEL=level)
    assert proc.stdout == want
    text = masked(log)
    assert "nan-check" not in text
    if level == "5":   # every block has its statistics, the sums the injected core's
        assert text.count("nan_count=0") == 2 + 2 + 3 + 3, text
        assert "  out out_ptr0:\n    Tensor(\n" in text and "      min=1.500000\n" in text, text


@pytest.mark.parametrize("capture", [False, True])
def test_a_level_10_dump_holds_cuda_tensors_copied_to_the_host_but_none_during_capture(harness, tmp_path, capture):
    """The C++ runtime's dumps of CUDA tensors: their bytes through the adapter's device read (a
    CPU tensor in the file, as torch.compile's dumps hold), and while the stream is being captured
    no file, with the reason (the launch then reads as incomplete)."""
    import json
    import torch
    dumps = tmp_path / "dumps"
    run(harness, ["many-capture" if capture else "many"], tmp_path / "log.txt", AOTI_DEBUG_LOGLEVEL="10",
        AOTI_DEBUG_DUMP_DIR=str(dumps))
    manifests = list(dumps.rglob("manifest.jsonl"))
    assert len(manifests) == 1, manifests
    folder = manifests[0].parent
    launch = [json.loads(line) for line in manifests[0].read_text().splitlines()
              if json.loads(line)["kind"] == "launch"]
    files = {(rec["event"], f["name"]): f for rec in launch for f in rec["files"]}
    a, b = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0.5, 0.25, 2.0, 8.0])
    want = {("before", "in_ptr0"): a, ("before", "in_ptr1"): b, ("after", "out_ptr0"): a + b,
            ("after", "out_ptr1"): a * b, ("after", "out_ptr2"): a - b}
    assert sorted(files) == sorted(want), files
    for key, t in want.items():
        if capture:
            assert files[key] == {"name": key[1], "role": "in" if key[0] == "before" else "out",
                                  "file": None, "error": "CUDA graph capture in progress"}
        else:
            got = torch.load(folder / files[key]["file"], weights_only=True)
            assert got.device.type == "cpu" and torch.equal(got, t), (key, got)


# -- the Python runtime's twin branches ------------------------------------------

PY_MANY = """
import torch
from aoti_debug.runtime import launches, stats
widened = {widened}
calls, tensors = [0], [0]
if widened:   # CPU tensors take the device path: reduced by torch ops, fetched in one transfer
    stats.on_device = lambda t: True
    stats.device_path_on = lambda: True
    many = stats.compute_many
    def counted(ts, hash=False):
        calls[0] += 1
        tensors[0] += len(ts)
        return many(ts, hash)
    stats.compute_many = counted
model = launches.Model("toy", {level}, nan_check="warn:nan")
s1 = launches.Site("triton_poi_fused_add_mul_sub_0", "add,mul,sub", "model.py:12", "combine",
                   (("in_ptr0", "in"), ("in_ptr1", "in"), ("out_ptr0", "out"), ("out_ptr1", "out"),
                    ("out_ptr2", "out")))
a, b = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0.5, 0.25, 2.0, 8.0])
run = model.begin_run(("a", "b"), (a, b))
run.launch += 1
run.before(s1, (a, b, None, None, None))
outs = (a + b, a * b, a - b)
run.after(s1, (None, None) + outs)
run.nan_after(s1, ("", "", "", "", ""), (a, b) + outs)
run.nan_finish()
run.end(("sum", "prod", "diff"), outs)
print(calls[0], tensors[0])
"""


@pytest.mark.parametrize("level, want", [("5", "5 12\n"), ("1", "2 5\n")])
def test_torch_compile_reads_a_records_device_tensors_in_one_call_and_once(tmp_path, level, want):
    """The Python twin of the C++ harness's "many" run: the same calls, the same count of
    transfers, and records equal to those of the CPU path."""
    from conftest import clean_env, run_python
    logs = {}
    for widened in (True, False):
        log = tmp_path / f"{widened}.txt"
        proc = run_python(PY_MANY.format(widened=widened, level=level),
                          env=clean_env(AOTI_DEBUG_LOGDEST=str(log)))
        assert proc.stdout == (want if widened else "0 0\n")
        logs[widened] = masked(log)
    assert logs[True] == logs[False]
    assert logs[True].count("nan_count=0") == (10 if level == "5" else 0)
    assert "nan-check" not in logs[True]


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
    # saturated values of both signs beside NaN, in a strided view (sat_count)
    out += [(x * 300).to(torch.float8_e4m3fn)[1::2], (x * 4e4).to(torch.float8_e5m2).view(10, 100).t(),
            torch.tensor([2.0 ** 127, 1.0, float("nan")]).to(torch.float8_e8m0fnu)]
    # float4_e2m1fn_x2: every byte (two values each, 6.0 among them), and a strided view
    fp4 = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(16, 16).view(torch.float4_e2m1fn_x2)
    out += [fp4, fp4.t()[1::3]]
    return out


FIELDS = ("kind", "min", "max", "imin", "imax", "nan_count", "inf_count", "true_count", "false_count",
          "first_nan", "first_inf", "hash", "unsigned", "sat_count", "first_sat")


def test_device_statistics_equal_the_compiled_cores():
    """compute_with_torch (what a CUDA tensor gets) against the CPU core, on the same bytes: every
    field exact (the mean to its last bits: torch's summation order)."""
    import math
    from aoti_debug.runtime.stats import compute_native, compute_with_torch
    saturated = 0
    for t in _corpus():
        got, want = compute_with_torch(t, hash=True), compute_native(t, hash=True)
        saturated += (want.sat_count or 0) > 0
        for f in FIELDS:
            a, b = getattr(got, f), getattr(want, f)
            assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), (t.dtype, f, a, b)
        assert got.mean == pytest.approx(want.mean, rel=1e-12, nan_ok=True), t.dtype
    assert saturated == 5


def test_device_statistics_wait_for_the_device_once():
    """No op whose result size depends on the data (nonzero, boolean indexing) and no scalar read
    per value: the device is waited for once, by the single transfer at the end (torch ops recorded
    as dispatched, on the CPU)."""
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


# -- a scale on the device: counted as a CPU one, by both runtimes -------------------------

# What both injected-device harnesses below share: a CUDA device whose copy to the host is
# a memcpy (counted), whose statistics are the CPU core's, and whose stream may be captured.
INJECTED_DEVICE = r"""
#include <aoti_debug/aoti_debug.h>
#include <aoti_debug/checks.h>

#include <cstdio>
#include <cstring>
#include <string>

using aoti_debug::Role;
using aoti_debug::TensorView;
using aoti_debug::Value;

static int reads = 0;
static bool capturing = false;

static void injected_stats(const Value* const* vals, size_t n, aoti_debug::Stats* out, bool* ok) {
  for (size_t i = 0; i < n; ++i) {
    TensorView host = vals[i]->t;
    host.device_type = 0, host.device_index = -1;
    out[i] = aoti_debug::compute_stats(host, true);
    ok[i] = true;
  }
}
static bool injected_read(const Value& v, void* dst, uint64_t bytes) {   // the copy to the host
  ++reads;
  std::memcpy(dst, v.t.data, static_cast<size_t>(bytes));
  return true;
}
static const char* no_error(void*) { return nullptr; }
static bool is_capturing(void*) { return capturing; }
static const aoti_debug::DeviceHooks device{&no_error, &is_capturing};

static Value on_cuda(void* data, int32_t dtype, int64_t ndim, int64_t* sizes, int64_t* strides) {
  Value v(TensorView{data, dtype, ndim, sizes, strides, 1, 0});
  v.device_stats = &injected_stats;
  v.device_read = &injected_read;
  return v;
}
"""

SCALE_HARNESS = INJECTED_DEVICE + r"""
static float x_data[4] = {1.0f, 2.0f, 3.0f, 4.0f};
static float sc_data[6] = {0.5f, 9.0f, 0.0f, 9.0f, 1e-40f, 9.0f};   // the scale: every other one
static float y_data[4];
static int64_t s4[1] = {4}, st4[1] = {1}, s3[1] = {3}, st2[1] = {2};

int main(int, char** argv) {
  capturing = std::string(argv[1]) == "capture";
  static aoti_debug::Model model(aoti_debug::ModelConfig{"toy", 5, "", "warn:nan", false, "2.13.0+cpu"});
  static const aoti_debug::ArgSpec a0[] = {{"in_ptr0", Role::In}, {"in_ptr1", Role::In, false, "scale_a"},
                                           {"out_ptr0", Role::Out}};
  static aoti_debug::Site s0{"extern_kernels__scaled_mm", "_scaled_mm", "model.py:9", "mm", a0, 3};
  static const char* const ins[] = {"x", "s"};
  static const char* const outs[] = {"y"};
  static const char* const sources[] = {"", "", ""};
  const Value x = on_cuda(x_data, 6, 1, s4, st4), sc = on_cuda(sc_data, 6, 1, s3, st2),
              y = on_cuda(y_data, 6, 1, s4, st4);
  AOTI_DEBUG_BEGIN_RUN_ON(run, model, &device, nullptr, ins, x, sc);
  aoti_debug::NanChecks nan(model, run);
  nan.inputs({x, sc});
  AOTI_DEBUG_LAUNCH(run, s0, x, sc, nullptr);
  for (int i = 0; i < 4; ++i) y_data[i] = x_data[i] * sc_data[0];
  AOTI_DEBUG_LAUNCH_END(run, s0, nullptr, nullptr, y);
  nan.scales(s0, {x, sc, y});
  if (!nan.clean(s0, {nullptr, nullptr, y})) nan.after(s0, sources, {x, sc, y});
  nan.finish();
  AOTI_DEBUG_END_RUN(run, outs, y);
  std::printf("%d\n", reads);
  return 0;
}
"""

PY_SCALE = """
import torch
from aoti_debug.runtime import launches, stats
if {widened}:   # CPU tensors take the device path: torch ops, one transfer
    stats.on_device = lambda t: True
    stats.device_path_on = lambda: True
    transfers = [0]
    one = stats.transfer
    def counted(parts):
        transfers[0] += 1
        return one(parts)
    stats.transfer = counted
model = launches.Model("toy", 5, nan_check="warn:nan")
s0 = launches.Site("extern_kernels__scaled_mm", "_scaled_mm", "model.py:9", "mm",
                   (("in_ptr0", "in"), ("in_ptr1", "in"), ("out_ptr0", "out")), scales={{1: "scale_a"}})
x = torch.tensor([1.0, 2.0, 3.0, 4.0])
sc = torch.tensor([0.5, 9.0, 0.0, 9.0, 1e-40, 9.0])[::2]
run = model.begin_run(("x", "s"), (x, sc))
run.launch += 1
run.before(s0, (x, sc, None))
y = x * sc[0]
run.after(s0, (None, None, y))
run.nan_after(s0, ("", "", ""), (x, sc, y))
run.nan_finish()
run.end(("y",), (y,))
"""


@pytest.fixture(scope="module")
def scale_harness(tmp_path_factory):
    return build_harness(tmp_path_factory.mktemp("scale"), SCALE_HARNESS)


def records_alike(harness, script, tmp_path, reads):
    """The injected-device harness's log (its `reads` copies to the host counted) and the
    Python runtime's from `script`, widened (CPU tensors take the device path) and not: the
    three the same bytes, the harness's tensors saying cuda:0 where the Python ones are CPU
    tensors.  Returns the Python runtime's log."""
    from conftest import clean_env, run_python
    cpp = run(harness, ["run"], tmp_path / "cpp.log")
    assert cpp.stdout == f"{reads}\n"
    logs = {}
    for widened in (True, False):
        log = tmp_path / f"py{widened}.log"
        run_python(script.format(widened=widened), env=clean_env(AOTI_DEBUG_LOGDEST=str(log)))
        logs[widened] = masked(log)
    assert masked(tmp_path / "cpp.log").replace("device=cuda:0", "device=cpu") == logs[True] == logs[False]
    return logs[True]


def test_a_device_scale_is_counted_and_checked_as_a_cpu_one_by_both_runtimes(scale_harness, tmp_path):
    """A CUDA scale (injected: its copy to the host is a memcpy) gets zero_count and
    subnormal_count in its block and the NaN check's finding, as a CPU one does: the C++ shim
    copies it to the host (once for the record, once for the check), torch.compile's runtime
    counts it by torch ops on the device (widened here to CPU tensors).  Byte for byte the
    records of the Python runtime's CPU path."""
    log = records_alike(scale_harness, PY_SCALE, tmp_path, reads=2)
    assert "      scale=scale_a\n      zero_count=1\n      subnormal_count=1\n    )\n" in log
    assert ("  launch toy:1.1 extern_kernels__scaled_mm (source model.py:9) read scale_a in_ptr1 holding 1 zero, "
            "0 NaN and 0 Inf (first at flat index 1); a bad scale is the origin of what this launch writes, not "
            "its arithmetic\n") in log


def test_during_graph_capture_a_device_scale_is_not_read(scale_harness, tmp_path):
    """While the run's stream is being captured nothing is copied or waited for: the scale's block
    says which scale it is, no counts, and the check finds nothing (the C++ shim; the Python
    runtime's scale_counts: test_a_device_scales_counts_come_back_in_one_transfer)."""
    cpp = run(scale_harness, ["capture"], tmp_path / "cpp.log")
    assert cpp.stdout == "0\n"
    text = masked(tmp_path / "cpp.log")
    assert "      stats=skipped (CUDA graph capture in progress)\n      scale=scale_a\n    )\n" in text
    assert "zero_count" not in text and "read scale_a" not in text


def test_a_device_scales_counts_come_back_in_one_transfer():
    """stats.scale_counts of a device tensor (widened: CPU tensors take the device path) equal
    the CPU path's, each in one transfer, for every floating format a scale comes in."""
    import torch
    from aoti_debug.runtime import device, stats
    scales = [torch.tensor([2.0, 0.0, 1e-40, -0.0, float("nan"), float("inf")]),
              torch.tensor([1e-5, 0.0, 3.0]).half(), torch.tensor([1e-39, 1.0]).bfloat16(),
              torch.tensor([0.5, 0.0, 0.001]).to(torch.float8_e4m3fn), torch.tensor([1.0, 0.0, 2.0]).double()[1:],
              torch.tensor([2.0 ** -127, 1.0]).to(torch.float8_e8m0fnu), torch.ones(4, 3)[:, 1]]
    cpu = [stats.scale_counts(t) for t in scales]
    assert cpu[0] == stats.ScaleCounts(zeros=2, subnormals=1, nans=1, infs=1, first=1)
    on_device, transfer = stats.on_device, stats.transfer
    calls = []
    stats.on_device = lambda t: True
    stats.transfer = lambda parts: calls.append(len(parts)) or transfer(parts)
    try:
        assert [stats.scale_counts(t) for t in scales] == cpu
    finally:
        stats.on_device, stats.transfer = on_device, transfer
    assert calls == [5] * len(scales)
    device.inject(_Capturing())   # nothing read while a CUDA graph is captured
    stats.on_device = lambda t: True
    try:
        assert stats.scale_counts(scales[0]) is None
    finally:
        stats.on_device = on_device
        device.inject(None)


# -- device operands of a scaled matmul: dequantized statistics from their host views ------

DEQUANT_HARNESS = INJECTED_DEVICE + r"""
// a: float8_e4m3fn (2, 4), each row scaled (sa); b: float4_e2m1fn_x2 (2, 2) bytes, four
// elements along K a column (mat2), one scale for all (sb)
static unsigned char a_data[8] = {0x38, 0x40, 0x44, 0x48, 0xb8, 0x7f, 0x00, 0x30};
static float sa_data[2] = {0.5f, -2.0f};
static unsigned char b_data[4] = {0x21, 0x7f, 0x0a, 0x93};
static float sb_data[1] = {3.0f};
static float y_data[4];
static int64_t s24[2] = {2, 4}, st24[2] = {4, 1}, s21[2] = {2, 1}, st21[2] = {1, 1};
static int64_t s22[2] = {2, 2}, st22[2] = {1, 2}, sz0[1] = {0}, st0[1] = {1};

int main(int, char** argv) {
  capturing = std::string(argv[1]) == "capture";
  static aoti_debug::Model model(aoti_debug::ModelConfig{"toy", 5, "", "", false, "2.13.0+cpu"});
  static const aoti_debug::ArgSpec a0[] = {
      {"buf0", Role::In, false, nullptr, 0, nullptr, "2 -1 rowwise 0 0 1 scale_a (rowwise)"},
      {"w", Role::In, false, nullptr, 0, nullptr, "3 -1 tensorwise 0 0 0 scale_b (tensorwise)"},
      {"sa", Role::In, false, "scale_a"}, {"sb", Role::In, false, "scale_b"}, {"buf1", Role::Out}};
  static aoti_debug::Site s0{"extern_kernels__scaled_mm", "_scaled_mm", "model.py:9", "mm", a0, 5};
  static const char* const ins[] = {"x"};
  static const char* const outs[] = {"y"};
  const Value a = on_cuda(a_data, 24, 2, s24, st24), b = on_cuda(b_data, 45, 2, s22, st22),
              sa = on_cuda(sa_data, 6, 2, s21, st21), sb = on_cuda(sb_data, 6, 0, sz0, st0),
              y = on_cuda(y_data, 6, 2, s22, st22);
  AOTI_DEBUG_BEGIN_RUN_ON(run, model, &device, nullptr, ins, a);
  AOTI_DEBUG_LAUNCH(run, s0, a, b, sa, sb, nullptr);
  AOTI_DEBUG_LAUNCH_END(run, s0, nullptr, nullptr, nullptr, nullptr, y);
  AOTI_DEBUG_END_RUN(run, outs, y);
  std::printf("%d\n", reads);
  return 0;
}
"""

PY_DEQUANT = """
import torch
from aoti_debug.runtime import launches, stats
if {widened}:   # CPU tensors take the device path
    stats.on_device = lambda t: True
    stats.device_path_on = lambda: True
bytes_ = lambda xs: torch.tensor(xs, dtype=torch.uint8)
a = bytes_([0x38, 0x40, 0x44, 0x48, 0xb8, 0x7f, 0x00, 0x30]).view(torch.float8_e4m3fn).reshape(2, 4)
b = bytes_([0x21, 0x7f, 0x0a, 0x93]).view(torch.float4_e2m1fn_x2).as_strided((2, 2), (1, 2))
sa, sb = torch.tensor([[0.5], [-2.0]]), torch.tensor(3.0)
model = launches.Model("toy", 5)
site = launches.Site("extern_kernels__scaled_mm", "_scaled_mm", "model.py:9", "mm",
                     (("buf0", "in"), ("w", "in"), ("sa", "in"), ("sb", "in"), ("buf1", "out")),
                     scales={{2: "scale_a", 3: "scale_b"}},
                     dequants={{0: "2 -1 rowwise 0 0 1 scale_a (rowwise)",
                               1: "3 -1 tensorwise 0 0 0 scale_b (tensorwise)"}})
run = model.begin_run(("x",), (a,))
run.launch += 1
run.before(site, (a, b, sa, sb, None))
y = torch.zeros(2, 2).t()
run.after(site, (None, None, None, None, y))
run.end(("y",), (y,))
"""


@pytest.fixture(scope="module")
def dequant_harness(tmp_path_factory):
    return build_harness(tmp_path_factory.mktemp("dequant"), DEQUANT_HARNESS)


def test_device_operands_get_their_dequantized_statistics_from_host_views(dequant_harness, tmp_path):
    """A scaled matmul's operands and scales on a CUDA device (injected: the copy to the host
    is a memcpy), an fp8 operand scaled per row and a float4 one (mat2) scaled once: the C++
    shim copies each operand and scale to the host (four copies) and writes the dequantized
    statistics a CPU run writes; torch.compile's runtime the same from its host views (widened
    here to CPU tensors).  Byte for byte the Python runtime's CPU record."""
    # four copies for the dequantized lines, one for each scale's counts
    log = records_alike(dequant_harness, PY_DEQUANT, tmp_path, reads=6)
    # a: (1, 2, 3, 4) * 0.5 and (-1, NaN, 0, 0.5) * -2: mean 6 / 7; b: its eight nibbles
    # (0.5, 1, -6, 6, -1, 0, 1.5, -0.5) times 3: mean 4.5 / 8
    assert ("      scaled_by=scale_a (rowwise)\n      dequant_min=-1.000000\n      dequant_max=2.000000\n"
            "      dequant_mean=0.857143\n      dequant_nan_count=1\n      dequant_inf_count=0\n") in log
    assert ("      scaled_by=scale_b (tensorwise)\n      dequant_min=-18.000000\n      dequant_max=18.000000\n"
            "      dequant_mean=0.562500\n      dequant_nan_count=0\n      dequant_inf_count=0\n") in log


def test_during_graph_capture_no_device_operand_is_copied(dequant_harness, tmp_path):
    """While the run's stream is being captured, the dequantized lines say so and nothing is
    read (the C++ shim; the Python runtime: test_a_device_view_on_the_host_is_its_span)."""
    cpp = run(dequant_harness, ["capture"], tmp_path / "cpp.log")
    assert cpp.stdout == "0\n"
    text = masked(tmp_path / "cpp.log")
    assert text.count("      dequant=skipped (CUDA graph capture in progress)\n") == 2


def test_a_device_view_on_the_host_is_its_span():
    """stats.host_view of a strided view (float4 too, whose bytes travel as uint8): the same
    elements on the host, from one copy of the span between its first and last element; nothing
    while a CUDA graph is captured; a CPU tensor is not a device one."""
    import torch
    from aoti_debug.runtime import device, stats
    base = torch.arange(40, dtype=torch.uint8)
    views = [base.view(torch.float8_e4m3fn)[3:].as_strided((3, 4), (1, 9)),
             base.view(torch.float4_e2m1fn_x2)[5:].as_strided((2, 3), (7, 2)),
             torch.arange(12.0)[2:].reshape(2, 5)[:, ::2], torch.ones(0, 3)]
    assert stats.host_view(views[2]) == (None, "device not supported")
    on_device = stats.on_device
    stats.on_device = lambda t: True
    try:
        for v in views:
            host, why = stats.host_view(v)
            assert why is None and host.shape == v.shape and host.stride() == v.stride()
            assert v.numel() == 0 or host.untyped_storage().data_ptr() != v.untyped_storage().data_ptr()
            assert torch.equal(host.view(torch.uint8) if host.element_size() == 1 else host,
                               v.view(torch.uint8) if v.element_size() == 1 else v)
        assert stats.host_view(views[0])[0].untyped_storage().nbytes() == 1 + 2 * 1 + 3 * 9
        device.inject(_Capturing())
        assert stats.host_view(views[0]) == (None, "CUDA graph capture in progress")
    finally:
        stats.on_device = on_device
        device.inject(None)
