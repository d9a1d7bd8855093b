"""float4_e2m1fn_x2 (two e2m1 values a byte, NVFP4's values) through both runtimes without a
compile (Inductor's CPU backend has no float4 kernels): a launch that writes one, its records
and the NaN check under AOTI_DEBUG_NAN_CHECK_SAT=1 byte for byte alike in the C++ shim and
the Python runtime.  The statistics themselves: tests/test_native_stats.py."""

from __future__ import annotations

import pytest

from test_native_launch import build_harness, masked, run

# bytes of the launch's float4 output, two values each, the low nibble first:
# 0x21 (0.5, 1), 0x7a (-1, 6), 0x00 (0, 0), 0xf3 (1.5, -6): 8 values, sum 2, the first 6.0 value 3
OUT = [0x21, 0x7A, 0x00, 0xF3]

HARNESS = r"""
#include <aoti_debug/aoti_debug.h>
#include <aoti_debug/checks.h>

#include <cstdio>
#include <cstdint>
#include <stdexcept>

using aoti_debug::Role;
using aoti_debug::TensorView;
using aoti_debug::Value;

static float x_data[4] = {0.5f, 1.0f, -1.0f, 7.0f};
static uint8_t q_data[4];
static int64_t s4[1] = {4}, st4[1] = {1};

int main() {
  static aoti_debug::Model model(aoti_debug::ModelConfig{"toy", 5, "", "raise:nan", false, "2.13.0+cpu"});
  static const aoti_debug::ArgSpec a0[] = {{"in_ptr0", Role::In}, {"out_ptr0", Role::Out}};
  static aoti_debug::Site s0{"cpp_fused_quantize_0", "quantize", "model.py:7", "quant", a0, 2};
  static const char* const ins[] = {"x"};
  static const char* const sources[] = {"", ""};
  const Value x(TensorView{x_data, 6, 1, s4, st4, 0, -1});
  const Value q(TensorView{q_data, 45, 1, s4, st4, 0, -1});   // float4_e2m1fn_x2
  try {
    AOTI_DEBUG_BEGIN_RUN(run, model, ins, x);
    aoti_debug::NanChecks nan(model, run);
    nan.inputs({x});
    AOTI_DEBUG_LAUNCH(run, s0, x, nullptr);
    const uint8_t out[4] = {OUT_BYTES};
    for (int i = 0; i < 4; ++i) q_data[i] = out[i];
    AOTI_DEBUG_LAUNCH_END(run, s0, nullptr, q);
    if (!nan.clean(s0, {nullptr, q})) nan.after(s0, sources, {x, q});
    nan.finish();
  } catch (const std::exception& e) {
    std::printf("%s\n", e.what());
    return 3;
  }
  return 0;
}
""".replace("OUT_BYTES", ", ".join(hex(b) for b in OUT))

PY = """
import torch
from aoti_debug.runtime import launches
model = launches.Model("toy", 5, nan_check="raise:nan")
s0 = launches.Site("cpp_fused_quantize_0", "quantize", "model.py:7", "quant",
                   (("in_ptr0", "in"), ("out_ptr0", "out")))
x = torch.tensor([0.5, 1.0, -1.0, 7.0])
q = torch.tensor({out}, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
try:
    run = model.begin_run(("x",), (x,))
    run.launch += 1
    run.before(s0, (x, None))
    run.after(s0, (None, q))
    run.nan_after(s0, ("", ""), (x, q))
    run.nan_finish()
except RuntimeError as exc:
    print(exc)
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_harness(tmp_path_factory.mktemp("fp4"), HARNESS)


@pytest.mark.parametrize("sat", ["1", "0"])
def test_a_saturated_float4_output_is_named_by_both_runtimes_alike(harness, tmp_path, sat):
    """The float4 block of the launch-end record (sat_count=2 of 8 values), then, with
    AOTI_DEBUG_NAN_CHECK_SAT=1, the NaN check naming the launch at the first 6.0's value index
    (3: byte 1's high nibble); without it the run is clean.  The same bytes from both."""
    from conftest import clean_env, run_python
    cpp = run(harness, [], tmp_path / "cpp.log", check=False, AOTI_DEBUG_NAN_CHECK_SAT=sat)
    py = run_python(PY.format(out=OUT), env=clean_env(AOTI_DEBUG_LOGDEST=str(tmp_path / "py.log"),
                                                      AOTI_DEBUG_NAN_CHECK_SAT=sat))
    message = ("aoti-debug NaN check: launch toy:1.1 cpp_fused_quantize_0 (source model.py:7) wrote 0 NaN and "
               "2 saturated into out_ptr0 (first at flat index 3); its inputs held no NaN and no saturated value, so "
               "this launch is where they first appear")
    if sat == "1":
        assert (cpp.returncode, cpp.stdout, py.stdout) == (3, message + "\n", message + "\n")
    else:
        assert (cpp.returncode, cpp.stdout, py.stdout) == (0, "", "")
    log = masked(tmp_path / "cpp.log")
    assert log == masked(tmp_path / "py.log")
    end = log[log.index("launch-end"):]
    assert end.splitlines()[1:15] == [
        "  out out_ptr0:", "    Tensor(", "      shape=(4,)", "      stride=(1,)",
        "      dtype=torch.float4_e2m1fn_x2", "      device=cpu", "      requires_grad=False",
        "      is_contiguous=True", "      min=-6.000000", "      max=6.000000", "      mean=0.250000",
        "      nan_count=0", "      inf_count=0", "      sat_count=2"]


def test_warn_sums_up_saturated_float4_alike_and_nan_origin_names_it(harness, tmp_path):
    """The same launch under warn (AOTI_DEBUG_NAN_CHECK=warn:nan lowers the compiled raise):
    its note, then a summary that counts it as saturated float4, not NaN/Inf, the same bytes
    from both runtimes; nan-origin on the log names the saturation, exit status 1."""
    from conftest import clean_env, records, run_python
    from test_eager_reference import diff_cli
    env = dict(AOTI_DEBUG_NAN_CHECK_SAT="1", AOTI_DEBUG_NAN_CHECK="warn:nan")
    cpp = run(harness, [], tmp_path / "cpp.log", check=False, **env)
    py = run_python(PY.format(out=OUT), env=clean_env(AOTI_DEBUG_LOGDEST=str(tmp_path / "py.log"), **env))
    assert (cpp.returncode, cpp.stdout, py.stdout) == (0, "", "")
    log = masked(tmp_path / "cpp.log")
    assert log == masked(tmp_path / "py.log")
    message = ("launch toy:1.1 cpp_fused_quantize_0 (source model.py:7) wrote 0 NaN and 2 saturated into out_ptr0 "
               "(first at flat index 3); its inputs held no NaN and no saturated value, so this launch is where they "
               "first appear")
    assert [r.split("\n", 1)[1] for r in records(log) if " note - nan-check" in r] == [
        f"  {message}\n", "  run 1: saturated float4 in 1 launch: cpp_fused_quantize_0 x1\n"]
    code, out, err = diff_cli("nan-origin", str(tmp_path / "cpp.log"))
    assert (code, err) == (1, "")
    assert out[0].startswith("saturated float4 origin: launch toy:1.1 cpp_fused_quantize_0 (pid ")
    assert out[1:] == [
        "  source: model.py:7", "  nodes:  quantize", "  outputs (saturated):",
        "    out out_ptr0: shape=(4,) dtype=torch.float4_e2m1fn_x2 min=-6.000000 max=6.000000 mean=0.250000 "
        "nan_count=0 inf_count=0 sat_count=2",
        f"  runtime note: {message}",
        "2 saturated float4 values (the format's largest finite magnitude): an overflow the cast saturated silently; "
        "no launch wrote NaN/Inf (1 launch in the log)"]
