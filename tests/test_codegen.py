"""Codegen instrumentation of real AOTI artifacts: records, filters, provenance,
and the promises not to disturb (byte-identical code when off, bit-identical
results when on)."""

import os
import re

import pytest

from aoti_debug.analysis.mask import mask
from conftest import FULL, TESTS, clean_env, raised, records, run_package, run_python

pytestmark = pytest.mark.torch_matrix

LEVEL10 = dict(AOTI_DEBUG_LOGLEVEL="10")


def log_of(tmp_path, pt2, model, name="log.txt", **env):
    log = tmp_path / name
    proc = run_package(pt2, model, AOTI_DEBUG_LOGDEST=str(log), **env)
    return proc, mask(log.read_text()) if log.exists() else ""


def headers(text):
    return [r.splitlines()[0] for r in records(text)]


@pytest.fixture(scope="module")
def mlp10(packages):
    return packages.get("mlp", **LEVEL10)


def test_level_1_one_line_per_launch_between_run_and_run_end(tmp_path, mlp10):
    proc, text = log_of(tmp_path, mlp10, "mlp", AOTI_DEBUG_LOGLEVEL="1")
    heads = headers(text)
    assert heads[0] == "[TIMESTAMP] [pid PID] run 1 mlp thread=TID"
    launches = heads[1:]
    assert launches, text
    for k, line in enumerate(launches, 1):
        assert re.fullmatch(rf"\[TIMESTAMP\] \[pid PID\] launch mlp:1\.{k} \w+", line), line
    kernels = [line.split()[-1] for line in launches]
    # three Linear layers: three extern addmm calls, the rest Inductor's C++ kernels
    assert kernels.count("aoti_torch_cpu_addmm_out") == 3
    assert all(k == "aoti_torch_cpu_addmm_out" or k.startswith("cpp_fused_") for k in kernels)
    # level 1 writes the header line alone, and no launch-end / run-end
    assert all(r.count("\n") == 1 for r in records(text))


def test_level_3_inputs_before_outputs_after_with_provenance(tmp_path, mlp10):
    from models import line_of
    _, text = log_of(tmp_path, mlp10, "mlp", AOTI_DEBUG_LOGLEVEL="3")
    recs = records(text)
    assert recs[0].startswith("[TIMESTAMP] [pid PID] run 1 mlp thread=TID\n  in x:\n    Tensor(\n      shape=(4, 8)\n")
    assert recs[-1].startswith("[TIMESTAMP] [pid PID] run-end 1 mlp\n  out ")
    launches = [r for r in recs if " launch " in r.splitlines()[0]]
    ends = [r for r in recs if " launch-end " in r.splitlines()[0]]
    assert len(launches) == len(ends)
    for before, after in zip(launches, ends):
        assert before.split()[5] == after.split()[5]          # same R.K
        roles_before = re.findall(r"^  (in|out|inout) ", before, re.M)
        roles_after = re.findall(r"^  (in|out|inout) ", after, re.M)
        # an output is never shown before its kernel wrote it
        assert "out" not in roles_before, before
        assert "in" not in roles_after, after
        assert before.splitlines()[1].startswith("  origin: nodes=")
    addmms = [r for r in launches if "aoti_torch_cpu_addmm_out" in r.splitlines()[0]]
    sources = [re.search(r"source=(\S+)", r).group(1) for r in addmms]
    assert sources == [line_of("mlp.fc1"), line_of("mlp.fc2"), line_of("mlp.fc3")]
    # the first addmm reads the model input x and the weight, writes its buffer
    first = addmms[0]
    assert "  in x:\n" in first and "  in fc1_weight:\n" in first


def test_level_5_statistics_and_level_0_writes_nothing(tmp_path, mlp10):
    _, text5 = log_of(tmp_path, mlp10, "mlp", AOTI_DEBUG_LOGLEVEL="5")
    assert text5.count("      nan_count=0\n      inf_count=0\n") >= 8
    _, text0 = log_of(tmp_path, mlp10, "mlp", "zero.txt", AOTI_DEBUG_LOGLEVEL="0")
    assert text0 == ""
    _, text_unset = log_of(tmp_path, mlp10, "mlp", "unset.txt", AOTI_DEBUG_DUMP_DIR=str(tmp_path / "dumps"))
    # unset at run time: the compiled level (10) is used
    assert "      nan_count=0\n" in text_unset


# -- model outputs that are views ---------------------------------------------------

VIEWED = dict(AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_NAN_CHECK="raise:nan")


@pytest.fixture(scope="module")
def viewed(packages):
    return packages.get("viewed", **VIEWED)


@pytest.mark.parametrize("level", [3, 5])
def test_run_end_holds_every_output_views_included(tmp_path, viewed, level):
    """(h.t(), h[:, 2], h): two outputs are views the wrapper makes only as it
    returns; each is written with its own shape, stride and values."""
    log = tmp_path / "log.txt"
    # the record expected, rendered by the Python logger from what the model returned
    proc = run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        from aoti_debug.runtime import format as fmt
        outs = torch._inductor.aoti_load_package({viewed!r})(*models.example("viewed")[1])
        print("".join(l + "\\n" for o in outs for l in fmt.item("out buf2", o, {level})), end="")
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL=str(level), AOTI_DEBUG_LOGDEST=str(log)))
    run_end = records(mask(log.read_text()))[-1]
    assert run_end == "[TIMESTAMP] [pid PID] run-end 1 viewed\n" + proc.stdout
    layouts = re.findall(r"shape=(.*)\n      stride=(.*)\n", run_end)
    assert layouts == [("(6, 4)", "(1, 6)"), ("(4,)", "(6,)"), ("(4, 6)", "(6, 1)")]


def test_run_end_with_views_comes_before_the_nan_check_raises(tmp_path, viewed):
    log = tmp_path / "log.txt"
    proc = run_package(viewed, "viewed", inputs="[models.example('viewed')[1][0].index_fill(1, torch.tensor([3]), "
                       "float('nan'))]", AOTI_DEBUG_LOGDEST=str(log))
    assert re.fullmatch(r"aoti-debug NaN check: launch viewed:1\.2 aoti_torch_cpu_addmm_out \(source \S+, module fc\) wrote 24 NaN "
                        r"into buf1 \(first at flat index 0\); its input x already held NaN \(look earlier\)",
                        raised(proc)), raised(proc)
    recs = records(mask(log.read_text()))
    run_end, summary = recs[-2], recs[-1]
    assert run_end.startswith("[TIMESTAMP] [pid PID] run-end 1 viewed\n  out buf2:\n")
    assert re.findall(r"shape=(.*)\n", run_end) == ["(6, 4)", "(4,)", "(4, 6)"]
    assert re.findall(r"nan_count=(\d+)\n", run_end) == ["24", "4", "24"]
    assert summary == ("[TIMESTAMP] [pid PID] note - nan-check\n"
                       "  run 1: NaN/Inf in 2 launches: aoti_torch_cpu_addmm_out x1, cpp_fused_tanh_1 x1\n")


def test_asking_for_more_than_compiled_gives_one_note(tmp_path, packages):
    pt2 = packages.get("conv", **FULL)
    _, text = log_of(tmp_path, pt2, "conv", AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_NAN_CHECK="raise")
    notes = [r for r in records(text) if " note " in r.splitlines()[0]]
    assert notes == ["[TIMESTAMP] [pid PID] note - settings\n"
                     "  AOTI_DEBUG_LOGLEVEL='10' asks for more than model 'conv' was compiled with (5); "
                     "using 5. Recompile with AOTI_DEBUG_LOGLEVEL=10 (or AOTI_DEBUG_COMPILE=all) to get it.\n"
                     "  AOTI_DEBUG_NAN_CHECK='raise' asks for more than model 'conv' was compiled with "
                     "(warn:nan); using warn:nan. Recompile with AOTI_DEBUG_NAN_CHECK=raise:nan (or AOTI_DEBUG_COMPILE=all) to get it.\n"]
    assert "      nan_count=0\n" in text


def test_run_time_filter_keeps_launch_numbers(tmp_path, mlp10):
    _, full = log_of(tmp_path, mlp10, "mlp", AOTI_DEBUG_LOGLEVEL="1")
    _, some = log_of(tmp_path, mlp10, "mlp", "some.txt", AOTI_DEBUG_LOGLEVEL="1",
                     AOTI_DEBUG_KERNELS="*ADDMM*")
    expected = [h for h in headers(full) if "addmm" in h or " run " in h]
    assert headers(some) == expected and len(expected) == 4


def test_filter_by_source_line_and_upstream_alias(tmp_path, mlp10):
    from models import line_of
    fc2 = line_of("mlp.fc2")
    _, text = log_of(tmp_path, mlp10, "mlp", AOTI_DEBUG_LOGLEVEL="3",
                     AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT=f"*{os.path.basename(fc2)}")
    launches = [r for r in records(text) if " launch " in r.splitlines()[0]]
    # every launch that computes an op of that line: fc2's addmm and relu; fc3's
    # addmm only reads the relu's result, so it is not selected
    assert [r.split()[4] for r in launches] == ["mlp:1.3", "mlp:1.4"]
    assert [re.search(r"source=(\S+)", r).group(1) for r in launches] == [fc2, fc2]
    assert launches[1].splitlines()[1].startswith("  origin: nodes=relu_1,")   # AOTI also copies fc3_bias there


def test_compile_time_filter_instruments_only_the_named_kernels(tmp_path, packages, mlp10):
    pt2 = packages.get("mlp", AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_KERNELS="*softmax*")
    _, text = log_of(tmp_path, pt2, "mlp", AOTI_DEBUG_LOGLEVEL="3")
    _, full = log_of(tmp_path, mlp10, "mlp", "full.txt", AOTI_DEBUG_LOGLEVEL="1")
    launches = [h for h in headers(text) if " launch " in h]
    softmax = [h for h in headers(full) if " launch " in h and "softmax" in h]
    assert launches == softmax and len(launches) == 1


def capture_wrapper(tmp_path, tag, prelude="", **env):
    """The generated wrapper + kernel source of mlp, without compiling it."""
    out = tmp_path / f"{tag}.cpp"
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        from torch._inductor import codecache
        def stop(cls, graph, wrapper_code, kernel_code, *args, **kwargs):
            open({str(out)!r}, "w").write(wrapper_code + "\\n// ---- kernels ----\\n" + kernel_code)
            raise SystemExit(0)
        codecache.AotCodeCompiler.compile = classmethod(stop)
        {prelude}
        torch._inductor.aoti_compile_and_package(models.export("mlp"))
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"cache-{tag}"), **env))
    return out.read_text()


def upstream_stable(code):
    """`code` less what upstream's own wrapper leaves to the process's heap: before torch
    2.13, CppWrapperCpu.codegen_int_array_var caches a size array's declaration under
    id(writeline), the address of a bound method made for the call, which a later call
    may or may not get again (any import changes that), so whether a size array is
    declared again or reused varies from process to process.  There each use of a size
    array is replaced by its values and the declarations are dropped; elsewhere the
    code is compared as it is."""
    import inspect
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    source = inspect.getsource(CppWrapperCpu.codegen_int_array_var)
    if "id(writeline)" not in source or "id(writeline.__self__)" in source:     # 2.13 keys on the buffer
        return code
    declared = re.compile(r"^[ \t]*static constexpr int64_t (int_array_\d+)\[\] = (\{[^}]*\});\n", re.M)
    values = dict(declared.findall(code))
    return re.sub(r"\bint_array_\d+\b", lambda m: values.get(m.group(0), m.group(0)), declared.sub("", code))


def test_generated_code_is_upstreams_when_nothing_is_on(tmp_path):
    plain = capture_wrapper(tmp_path, "plain")
    # patches installed, then switched off again
    inert = capture_wrapper(tmp_path, "inert", prelude="import aoti_debug; "
                            "scope = aoti_debug.instrument(level=5); scope.__enter__(); "
                            "scope.__exit__(None, None, None)")
    level0 = capture_wrapper(tmp_path, "level0", AOTI_DEBUG_LOGLEVEL="0", AOTI_DEBUG_KERNELS="*")
    assert "aoti_debug" not in plain
    assert upstream_stable(inert) == upstream_stable(plain)
    assert upstream_stable(level0) == upstream_stable(plain)
    on = capture_wrapper(tmp_path, "on", AOTI_DEBUG_LOGLEVEL="3")
    assert "AOTI_DEBUG_LAUNCH(" in on
    # kernels are untouched: the kernel sources are identical
    assert on.split("// ---- kernels ----")[1] == plain.split("// ---- kernels ----")[1]
    # same settings -> same source (so the same cache key, where upstream's own is stable);
    # other settings -> another
    assert upstream_stable(capture_wrapper(tmp_path, "on-again", AOTI_DEBUG_LOGLEVEL="3")) == upstream_stable(on)
    assert capture_wrapper(tmp_path, "on-5", AOTI_DEBUG_LOGLEVEL="5") != on


@pytest.mark.parametrize("model", ["mlp", "block", "viewed"])
def test_outputs_are_bit_identical_with_and_without_instrumentation(tmp_path, packages, model):
    plain = packages.get(model)
    instrumented = packages.get(model, **{"mlp": LEVEL10, "block": FULL, "viewed": VIEWED}[model])
    expected = run_package(plain, model).stdout
    assert expected.startswith("OUTPUT")
    for level in ("0", "1", "3", "5"):
        got = run_package(instrumented, model, AOTI_DEBUG_LOGLEVEL=level,
                          AOTI_DEBUG_LOGDEST=str(tmp_path / "log.txt")).stdout
        assert got == expected, level
