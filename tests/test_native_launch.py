"""The C++ launch API (cpp_runtime/include/aoti_debug/launch.h) and the
public scope API (aoti_debug/aoti_debug.h), driven by a small C++ program
compiled once per session the way an artifact's wrapper is (-O1, no -march):
exact records at every level, numbering, the kernel filter, notes for bad or
too-high settings, the crash trailer, the cost of a launch at level 0."""

from __future__ import annotations

import os
import re
import signal
import subprocess

import pytest
import torch

from aoti_debug.analysis.mask import mask
from aoti_debug.native import core as _native
from test_content_hash import reference_hash

TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}"

HARNESS = r"""
#include <aoti_debug/aoti_debug.h>

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

using aoti_debug::Role;
using aoti_debug::TensorView;
using aoti_debug::Value;

static float x_data[6] = {1.0f, -2.0f, 0.5f, 3.0f, -0.0f, 2.5f};
static float buf0_data[6];
static int64_t buf1_data[4] = {1, -5, 7, 0};
static int64_t s23[2] = {2, 3}, st23[2] = {3, 1}, s32[2] = {3, 2}, st32[2] = {1, 3};
static int64_t s4[1] = {4}, st4[1] = {1};

static double now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

// AOTI_DEBUG_SYNC's device hooks, injected: the `sync_fail`-th wait reports an
// asynchronous error (1: the wait before the run's first launch)
static int sync_calls = 0, sync_fail = -1;
static bool capturing = false;
static const char* fake_synchronize(void*) {
  return ++sync_calls == sync_fail
             ? "CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
               "asynchronously reported at some other API call"
             : nullptr;
}
static bool fake_capturing(void*) { return capturing; }
static const aoti_debug::DeviceHooks fake_device{&fake_synchronize, &fake_capturing};

static Value mylib_op(const TensorView& x, int64_t k, bool fail) {
  AOTI_DEBUG_SCOPE(scope, "mylib::op", x, k);
  if (fail) throw std::runtime_error("bad");
  AOTI_DEBUG_SCOPE_RETURN(scope, x, k * 2);
  return Value(k);
}

int main(int, char** argv) {
  const std::string mode = argv[1];
  static aoti_debug::Model model(
      aoti_debug::ModelConfig{"toy", atoi(argv[2]), argv[3], "off", false, "2.13.0+cpu"});
  static const aoti_debug::ArgSpec a0[] = {{"in_ptr0", Role::In}, {"out_ptr0", Role::Out}};
  static aoti_debug::Site s0{"cpp_fused_relu_0", "relu", "model.py:11", "layers.0", a0, 2};
  static const aoti_debug::ArgSpec a1[] = {
      {"in_ptr0", Role::In}, {"in_out_ptr0", Role::InOut}, {"ks0", Role::In}, {"alpha", Role::In}};
  static aoti_debug::Site s1{"cpp_fused_add_mul_1", "add,mul", "model.py:12",
                             "layers.1,layers.1.act", a1, 4};
  static const aoti_debug::ArgSpec a2[] = {{"out_ptr0", Role::Out}, {"mode", Role::In},
                                           {"shape", Role::In}, {"flag", Role::In},
                                           {"none", Role::In}};
  static aoti_debug::Site s2{"triton_poi_fused_2", "", "", "", a2, 5};
  static const char* const ins[] = {"arg0_1"};
  static const char* const outs[] = {"buf1"};
  const TensorView x{x_data, 6, 2, s23, st23, 0, -1};
  const TensorView b0{buf0_data, 6, 2, s23, st23, 0, -1};
  const TensorView b1{buf1_data, 4, 1, s4, st4, 0, -1};
  const TensorView xt{x_data, 6, 2, s32, st32, 0, -1};

  if (mode == "bench") {  // ns per launch (LAUNCH + LAUNCH_END) minus an empty loop
    const long n = 20000000;
    AOTI_DEBUG_BEGIN_RUN(run, model, ins, x);
    double t0 = now_ns();
    for (long i = 0; i < n; ++i) asm volatile("" ::: "memory");
    double t1 = now_ns();
    for (long i = 0; i < n; ++i) {
      AOTI_DEBUG_LAUNCH(run, s0, x, b0);
      asm volatile("" ::: "memory");
      AOTI_DEBUG_LAUNCH_END(run, s0, x, b0);
    }
    double t2 = now_ns();
    std::printf("%.3f %ld\n", ((t2 - t1) - (t1 - t0)) / n, static_cast<long>(run.launch));
    return 0;
  }
  if (mode == "scope") {
    mylib_op(x, 21, false);
    try {
      mylib_op(x, 1, true);
    } catch (const std::exception&) {
    }
    return 0;
  }
  const int runs = atoi(argv[4]);
  // device modes, with the injected hooks: "sync:N" (the Nth wait fails; 0: none),
  // "capture:0" (every wait asked during capture), "uninstrumented:N" (launch 1
  // compiled without instrumentation)
  const bool device = mode.find(':') != std::string::npos;
  if (device) sync_fail = atoi(mode.c_str() + mode.find(':') + 1);
  capturing = mode.rfind("capture", 0) == 0;
  try {
  for (int r = 0; r < runs; ++r) {
    AOTI_DEBUG_BEGIN_RUN_ON(run, model, device ? &fake_device : nullptr, nullptr, ins, x);
    if (mode.rfind("uninstrumented", 0) == 0) {
      ++run.launch;  // launch 1 compiled without instrumentation
      for (int i = 0; i < 6; ++i) buf0_data[i] = x_data[i] > 0 ? x_data[i] : 0.0f;
    } else {
      AOTI_DEBUG_LAUNCH(run, s0, x, b0);
      for (int i = 0; i < 6; ++i) buf0_data[i] = x_data[i] > 0 ? x_data[i] : 0.0f;
      AOTI_DEBUG_LAUNCH_END(run, s0, x, b0);
    }
    AOTI_DEBUG_LAUNCH(run, s1, b0, b1, 4, 0.5);
    if (mode == "crash") *static_cast<volatile int*>(nullptr) = 1;
    if (mode == "crash-after-scope") {  // an op run by the launch, then a crash in the launch
      mylib_op(x, 3, false);
      *static_cast<volatile int*>(nullptr) = 1;
    }
    for (int i = 0; i < 4; ++i) buf1_data[i] += 1;
    AOTI_DEBUG_LAUNCH_END(run, s1, b0, b1, 4, 0.5);
    AOTI_DEBUG_LAUNCH(run, s2, nullptr, "fast\tpath", Value::int_list(s23, 2), true, nullptr);
    AOTI_DEBUG_LAUNCH_END(run, s2, xt, "fast\tpath", Value::int_list(s23, 2), true, nullptr);
    AOTI_DEBUG_END_RUN(run, outs, b1);
    for (int i = 0; i < 4; ++i) buf1_data[i] -= 1;
  }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  }
  return 0;
}
"""


def build_harness(folder, source: str) -> str:
    """A C++ program against the runtime's headers, compiled like an AOTI
    wrapper (-O1, no -march, Inductor's float flags); its path."""
    (folder / "harness.cpp").write_text(source)
    exe = folder / "harness"
    subprocess.run(["c++", "-O1", "-std=c++17", "-Wall", "-Wextra", "-Werror",
                    "-fno-trapping-math", "-fno-signed-zeros", "-fno-finite-math-only",
                    "-I", _native.include_dir(), str(folder / "harness.cpp"), "-o", str(exe),
                    "-pthread"], check=True)
    return str(exe)


@pytest.fixture(scope="session")
def harness(tmp_path_factory):
    return build_harness(tmp_path_factory.mktemp("harness"), HARNESS)


def run(harness, args, dest, check=True, **env):
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("AOTI_DEBUG_", "AOT_INDUCTOR_", "TORCHINDUCTOR_", "AOTI_RUNTIME_"))}
    clean.update(AOTI_DEBUG_LOGDEST=str(dest), **env)
    proc = subprocess.run([harness, *args], env=clean, capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def masked(path) -> str:
    """The log without its banner, timestamps and pids masked."""
    if not os.path.exists(path):
        return ""
    text = open(path).read()
    text = re.sub(r"\A={80}\n.*?\n={80}\n(?:.*\n)*?={80}\n", "", text)
    text = re.sub(rf"\[{TS}\]", "[TIMESTAMP]", text)
    return mask(re.sub(r"\[pid \d+\]", "[pid PID]", text))


# ---------------------------------------------------------------- expected text

def tensor(ind, shape, stride, dtype, contiguous, stats, level):
    pad, inner = " " * ind, " " * (ind + 2)
    lines = [f"{pad}Tensor(", f"{inner}shape={shape}", f"{inner}stride={stride}",
             f"{inner}dtype=torch.{dtype}", f"{inner}device=cpu", f"{inner}requires_grad=False",
             f"{inner}is_contiguous={contiguous}"]
    if level >= 5:
        lines += [inner + s for s in stats]
    return "\n".join(lines + [f"{pad})"]) + "\n"


def hashed(values, dtype=torch.float32):
    """The content-hash line of a tensor holding `values` in logical order (section 3.1)."""
    return [f"hash={reference_hash(torch.tensor(values, dtype=dtype)):016x}"]


F = ["nan_count=0", "inf_count=0"]
X_VALUES = [1.0, -2.0, 0.5, 3.0, -0.0, 2.5]
X = ("(2, 3)", "(3, 1)", "float32", True,
     ["min=-2.000000", "max=3.000000", "mean=0.833333"] + F + hashed(X_VALUES))
BUF0 = ("(2, 3)", "(3, 1)", "float32", True, ["min=0.000000", "max=3.000000", "mean=1.166667"] + F
        + hashed([1.0, 0.0, 0.5, 3.0, 0.0, 2.5]))
BUF1_BEFORE = ("(4,)", "(1,)", "int64", True, ["min=-5", "max=7", "mean=0.750000"]
               + hashed([1, -5, 7, 0], torch.int64))
BUF1_AFTER = ("(4,)", "(1,)", "int64", True, ["min=-4", "max=8", "mean=1.750000"]
              + hashed([2, -4, 8, 1], torch.int64))
XT = ("(3, 2)", "(1, 3)", "float32", False, ["min=-2.000000", "max=3.000000", "mean=0.833333"] + F
      + hashed([X_VALUES[i] for i in (0, 3, 1, 4, 2, 5)]))


def item(label, t, level):
    return f"  {label}:\n" + tensor(4, *t, level)


def head(kind, ident, name):
    facts = " thread=TID" if kind in ("run", "call") else ""
    return f"[TIMESTAMP] [pid PID] {kind} {ident} {name}{facts}\n"


def expected(level, runs=1, only=None):
    """The records of the harness for `runs` runs; `only`: indices of launches left by the filter."""
    out = ""
    for r in range(1, runs + 1):
        recs = [head("run", r, "toy") + (item("in arg0_1", X, level) if level >= 3 else "")]
        launches = [
            (head("launch", f"toy:{r}.1", "cpp_fused_relu_0")
             + ("  origin: nodes=relu source=model.py:11\n" + item("in in_ptr0", X, level)
                if level >= 3 else ""),
             head("launch-end", f"toy:{r}.1", "cpp_fused_relu_0") + item("out out_ptr0", BUF0, level)),
            (head("launch", f"toy:{r}.2", "cpp_fused_add_mul_1")
             + ("  origin: nodes=add,mul source=model.py:12\n" + item("in in_ptr0", BUF0, level)
                + item("inout in_out_ptr0", BUF1_BEFORE, level) + "  in ks0: 4\n"
                + "  in alpha: 0.500000\n" if level >= 3 else ""),
             head("launch-end", f"toy:{r}.2", "cpp_fused_add_mul_1")
             + item("inout in_out_ptr0", BUF1_AFTER, level)),
            (head("launch", f"toy:{r}.3", "triton_poi_fused_2")
             + ("  origin: nodes=- source=-\n" + '  in mode: "fast\\tpath"\n'
                + "  in shape: [2, 3]\n  in flag: True\n  in none: None\n" if level >= 3 else ""),
             head("launch-end", f"toy:{r}.3", "triton_poi_fused_2") + item("out out_ptr0", XT, level)),
        ]
        for k, (before, after) in enumerate(launches):
            if only is not None and k not in only:
                continue
            recs.append(before)
            if level >= 3:
                recs.append(after)
        if level >= 3:
            recs.append(head("run-end", r, "toy") + item("out buf1", BUF1_AFTER, level))
        out += "".join(recs)
    return out


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("level", [1, 3, 5, 10])
def test_records_at_each_level(harness, tmp_path, level):
    log = tmp_path / "log.txt"
    run(harness, ["model", str(level), "", "2"], log, AOTI_DEBUG_DUMP_DIR=str(tmp_path / "dumps"))
    assert masked(log) == expected(level, runs=2)


def test_level_zero_writes_nothing(harness, tmp_path):
    log = tmp_path / "log.txt"
    run(harness, ["model", "5", "", "2"], log, AOTI_DEBUG_LOGLEVEL="0")
    assert not log.exists()
    run(harness, ["model", "0", "", "2"], log)
    assert not log.exists()


def test_run_time_level_lowers_and_upstream_alias(harness, tmp_path):
    log = tmp_path / "log.txt"
    run(harness, ["model", "5", "", "1"], log, AOTI_DEBUG_LOGLEVEL="3")
    assert masked(log) == expected(3)
    log2 = tmp_path / "log2.txt"
    run(harness, ["model", "5", "", "1"], log2, AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER="3")
    assert masked(log2) == expected(1)


def test_asking_for_more_than_compiled_gives_one_note(harness, tmp_path):
    """One note, a line per setting asked above what is compiled in (as the Python runtime:
    test_python_wrapper.py's test_run_time_level_and_filter)."""
    log = tmp_path / "log.txt"
    run(harness, ["model", "3", "", "2"], log, AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_CHECK_INPUTS="1")
    note = (head("note", "-", "settings")
            + "  AOTI_DEBUG_LOGLEVEL='5' asks for more than model 'toy' was compiled with (3); "
              "using 3. Recompile with AOTI_DEBUG_LOGLEVEL=5 (or AOTI_DEBUG_COMPILE=all) to get it.\n"
            + "  AOTI_DEBUG_CHECK_INPUTS='1' asks for more than model 'toy' was compiled with (0); "
              "using 0. Recompile with AOTI_DEBUG_CHECK_INPUTS=1 (or AOTI_DEBUG_COMPILE=all) to get it.\n")
    assert masked(log) == note + expected(3, runs=2)


def test_bad_value_gives_one_note_and_keeps_compiled_value(harness, tmp_path):
    log = tmp_path / "log.txt"
    run(harness, ["model", "3", "", "1"], log, AOTI_DEBUG_LOGLEVEL="7", AOTI_DEBUG_SYNC="maybe")
    note = (head("note", "-", "settings")
            + "  AOTI_DEBUG_LOGLEVEL='7' is not valid: expected one of 0, 1, 3, 5, 10; keeping 3\n"
            + "  AOTI_DEBUG_SYNC='maybe' is not valid: expected one of 0, 1, true, false, yes, no, "
              "on, off; keeping 0\n")
    assert masked(log) == note + expected(3)


@pytest.mark.parametrize("pattern,only", [
    ("*ADD*", {1}),                    # kernel name, any case
    ("mul", {1}),                      # an FX node
    ("model.py:1?", {0, 1}),           # source file:line
    ("layers.1.act", {1}),             # a module path
    ("relu, triton_*", {0, 2}),        # several patterns
    ("nothing", set()),
])
def test_kernel_filter_keeps_numbering(harness, tmp_path, pattern, only):
    log = tmp_path / "log.txt"
    run(harness, ["model", "3", "", "2"], log, AOTI_DEBUG_KERNELS=pattern)
    assert masked(log) == expected(3, runs=2, only=only)


def test_compiled_and_run_time_filters_both_apply(harness, tmp_path):
    log = tmp_path / "log.txt"
    run(harness, ["model", "1", "cpp_*", "1"], log, AOTI_DEBUG_KERNELS="*relu*,triton_*")
    assert masked(log) == expected(1, only={0})


def test_a_bad_run_time_filter_gives_one_note_and_keeps_the_compiled_one(harness, tmp_path):
    log = tmp_path / "log.txt"
    run(harness, ["model", "1", "cpp_*", "1"], log, AOTI_DEBUG_KERNELS="*relu*,")
    note = (head("note", "-", "settings")
            + "  AOTI_DEBUG_KERNELS='*relu*,' is not valid: expected comma-separated globs (*, ?, [...]), "
              "none of them empty, every [ closed by ]; keeping cpp_*\n")
    assert masked(log) == note + expected(1, only={0, 1})


def test_crash_in_a_launch_names_it(harness, tmp_path):
    log = tmp_path / "log.txt"
    proc = run(harness, ["crash", "1", "", "1"], log, check=False)
    assert proc.returncode == -signal.SIGSEGV
    assert masked(log) == (head("run", 1, "toy") + head("launch", "toy:1.1", "cpp_fused_relu_0")
                           + head("launch", "toy:1.2", "cpp_fused_add_mul_1")
                           + head("crash", "toy:1.2", "cpp_fused_add_mul_1") + "  signal: SIGSEGV\n")


def test_crash_after_a_scope_inside_a_launch_names_the_launch_again(harness, tmp_path):
    log = tmp_path / "log.txt"
    proc = run(harness, ["crash-after-scope", "1", "", "1"], log, check=False, AOTI_DEBUG_LOGLEVEL="1")
    assert proc.returncode == -signal.SIGSEGV
    assert masked(log) == (head("run", 1, "toy") + head("launch", "toy:1.1", "cpp_fused_relu_0")
                           + head("launch", "toy:1.2", "cpp_fused_add_mul_1")
                           + head("call", 1, "mylib::op")
                           + head("crash", "toy:1.2", "cpp_fused_add_mul_1") + "  signal: SIGSEGV\n")


# ---------------------------------------------------------------- AOTI_DEBUG_SYNC, hooks injected

ILLEGAL = "CUDA error: an illegal memory access was encountered"


def sync_run(harness, tmp_path, mode, level="1", **env):
    log = tmp_path / f"{mode.replace(':', '-')}.txt"
    proc = run(harness, [mode, level, "", "2"], log, check=False, AOTI_DEBUG_SYNC="1", **env)
    return proc, masked(log)


def test_sync_pins_a_device_error_to_the_launch_that_raised_it(harness, tmp_path):
    """The third wait (after launch 1.2) reports the fault: the crash trailer names 1.2, the error
    names its kernel and line, and nothing after it runs (launch 1.3 is never written)."""
    proc, text = sync_run(harness, tmp_path, "sync:3")
    assert proc.returncode == 3
    assert proc.stderr == ("aoti-debug: launch toy:1.2 cpp_fused_add_mul_1 (source: model.py:12) failed on "
                           f"the device: {ILLEGAL} (found by AOTI_DEBUG_SYNC=1, which waits for each launch)\n")
    assert text == (head("run", 1, "toy") + head("launch", "toy:1.1", "cpp_fused_relu_0")
                    + head("launch", "toy:1.2", "cpp_fused_add_mul_1")
                    + head("crash", "toy:1.2", "cpp_fused_add_mul_1")
                    + f"  error: {ILLEGAL}\n  raised-by: toy:1.2\n")


def test_sync_blames_work_queued_before_the_run_not_its_first_launch(harness, tmp_path):
    proc, text = sync_run(harness, tmp_path, "sync:1")
    assert proc.returncode == 3
    assert proc.stderr == ("aoti-debug: the device reported an error before run 1 of model 'toy' began "
                           f"(work queued before the model was called): {ILLEGAL}\n")
    assert text == (head("run", 1, "toy") + head("crash", "-", "-")
                    + f"  error: {ILLEGAL}\n  raised-by: work queued before run 1 of model toy\n")


def test_sync_names_every_launch_since_the_last_clean_wait(harness, tmp_path):
    """Launch 1.1 runs uninstrumented (compiled out by the filter), so it is not waited for: a fault
    found after 1.2 may be either's, and both the trailer and the error say so."""
    proc, text = sync_run(harness, tmp_path, "uninstrumented:2")
    assert proc.returncode == 3
    assert proc.stderr == ("aoti-debug: the device failed in one of launches toy:1.1 to toy:1.2, found after "
                           f"launch toy:1.2 cpp_fused_add_mul_1 (source: model.py:12): {ILLEGAL} "
                           "(AOTI_DEBUG_SYNC=1 waits for each instrumented launch; the launches before toy:1.2 "
                           "that were compiled without instrumentation are not)\n")
    assert text == (head("run", 1, "toy") + head("launch", "toy:1.2", "cpp_fused_add_mul_1")
                    + head("crash", "toy:1.2", "cpp_fused_add_mul_1") + f"  error: {ILLEGAL}\n"
                    + "  raised-by: one of toy:1.1 to toy:1.2 (launches compiled without instrumentation "
                      "are not waited for)\n")


def test_sync_waits_for_nothing_during_graph_capture_and_says_so_once(harness, tmp_path):
    """The first wait would fail, but every launch is being captured: none is waited for (no error,
    the runs' records as without AOTI_DEBUG_SYNC) and one note says why."""
    from aoti_debug.settings import SYNC_CAPTURE
    proc, text = sync_run(harness, tmp_path, "capture:1")
    assert proc.returncode == 0, proc.stderr
    first = head("launch", "toy:1.1", "cpp_fused_relu_0")
    assert text == expected(1, runs=2).replace(first, first + head("note", "-", "sync") + f"  {SYNC_CAPTURE}\n")


def test_sync_at_level_0_is_said_to_wait_for_nothing(harness, tmp_path):
    from aoti_debug.settings import SYNC_NEEDS_LEVEL
    proc, text = sync_run(harness, tmp_path, "sync:3", level="0")
    assert proc.returncode == 0 and text == ""
    assert proc.stderr == f"aoti-debug settings: {SYNC_NEEDS_LEVEL}\n"


# The same toy through the Python runtime (runtime/launches.py) with the same
# injected hooks: both runtimes must write and raise the same words.
PY_TOY = r"""
import sys
from aoti_debug.runtime import device, launches
mode, level = {mode!r}, {level}
fail = int(mode.split(":")[1])
calls = [0]

class Injected(device.Hooks):
    def synchronize(self):
        calls[0] += 1
        if calls[0] == fail:
            return ("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
                    "asynchronously reported at some other API call")
        return None

    def capturing(self):
        return mode.startswith("capture")

device.inject(Injected())
model = launches.Model("toy", level)
s0 = launches.Site("cpp_fused_relu_0", "relu", "model.py:11", "layers.0", (("in_ptr0", "in"), ("out_ptr0", "out")))
s1 = launches.Site("cpp_fused_add_mul_1", "add,mul", "model.py:12", "layers.1,layers.1.act",
                   (("in_ptr0", "in"), ("in_out_ptr0", "inout"), ("ks0", "in"), ("alpha", "in")))
s2 = launches.Site("triton_poi_fused_2", "", "", "", (("out_ptr0", "out"), ("mode", "in"), ("shape", "in"),
                                                      ("flag", "in"), ("none", "in")))
try:
    for r in range(2):
        run = model.begin_run(("arg0_1",), (None,))
        for k, site in enumerate((s0, s1, s2)):
            run.launch += 1
            if k == 0 and mode.startswith("uninstrumented"):
                continue
            if run.level:
                run.before(site, (None,) * len(site.args))
                run.after(site, (None,) * len(site.args))
        run.end(("buf1",), (None,))
except launches.SyncError as exc:
    print(exc, file=sys.stderr)
    sys.exit(3)
"""


@pytest.mark.parametrize("mode,level", [("sync:3", 1), ("sync:1", 1), ("uninstrumented:2", 1),
                                        ("capture:1", 1), ("sync:0", 1), ("sync:3", 0)])
def test_sync_python_runtime_writes_and_raises_what_cpp_does(harness, tmp_path, mode, level):
    from conftest import clean_env, run_python
    cpp, cpp_text = sync_run(harness, tmp_path, mode, level=str(level))
    log = tmp_path / "py.txt"
    py = run_python(PY_TOY.format(mode=mode, level=level), check=False,
                    env=clean_env(AOTI_DEBUG_LOGDEST=str(log), AOTI_DEBUG_SYNC="1"))
    assert (py.returncode, py.stderr) == (cpp.returncode, cpp.stderr)
    assert masked(log) == cpp_text
    assert cpp_text.count("\n") >= (0 if level == 0 else 4)


def test_scope_records(harness, tmp_path):
    log = tmp_path / "log.txt"
    run(harness, ["scope", "0", "", "0"], log, AOTI_DEBUG_LOGLEVEL="3")
    assert masked(log) == (
        head("call", 1, "mylib::op") + item("arg[0] x", X, 3) + "  arg[1] k: 21\n"
        + head("return", 1, "mylib::op") + "  output:\n    tuple(len=2)\n      [0]:\n"
        + tensor(8, *X, 3) + "      [1]: 42\n"
        + head("call", 2, "mylib::op") + item("arg[0] x", X, 3) + "  arg[1] k: 1\n"
        + head("raise", 2, "mylib::op") + "  exception: C++ exception: left the scope while unwinding\n")
    log1 = tmp_path / "log1.txt"
    run(harness, ["scope", "0", "", "0"], log1, AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_KERNELS="mylib::*")
    assert masked(log1) == (head("call", 1, "mylib::op") + head("call", 2, "mylib::op")
                            + head("raise", 2, "mylib::op")
                            + "  exception: C++ exception: left the scope while unwinding\n")
    log2 = tmp_path / "log2.txt"
    run(harness, ["scope", "0", "", "0"], log2, AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_KERNELS="other")
    assert not log2.exists()


def test_level_zero_launch_costs_at_most_a_few_ns(harness, tmp_path):
    best = min(float(run(harness, ["bench", "0", "", "0"], tmp_path / "b.txt").stdout.split()[0])
               for _ in range(3))
    print(f"level-0 launch + launch-end: {best:.2f} ns")
    assert best <= 5.0
    assert not (tmp_path / "b.txt").exists()
