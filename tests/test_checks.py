"""Input guards and NaN/Inf checks on real artifacts, each bug planted on purpose.

Every run is a fresh process, as a server would be; the C++ runner's view of
the same errors is in test_runner.py.
"""

import os
import re

import pytest
import torch

from aoti_debug.analysis.mask import mask
from conftest import FULL, PLANTED, raised, records, run_package
from models import line_of

# torch_matrix (every tested torch release): the tests marked below, where the
# installed Inductor decides the result; the rest of the file runs on the default one.



@pytest.fixture(scope="module")
def planted(packages):
    return packages.get("planted", **PLANTED)





def culprit(text):
    m = re.fullmatch(r"aoti-debug NaN check: launch planted:1\.(\d+) (\w+) \(source (\S+)\) wrote (\d+) NaN "
                     r"and (\d+) Inf into (buf\d+) \(first at flat index (\d+)\); its inputs were finite, "
                     r"so this launch is where they first appear", text)
    assert m, text
    return m.groups()


@pytest.mark.parametrize("bug,tag,nan,inf,first", [
    ("log", "planted.log", 1, 0, 0),
    ("sqrt", "planted.sqrt", 1, 0, 1),
    ("div", "planted.div", 1, 0, 0),
    ("overflow", "planted.overflow", 0, 1, 0),
])
@pytest.mark.torch_matrix
def test_raise_names_the_launch_that_made_the_first_nan(tmp_path, planted, bug, tag, nan, inf, first):
    proc = run_package(planted, "planted", inputs=f"models.planted_inputs({bug!r})",
                       AOTI_DEBUG_LOGDEST=str(tmp_path / "log.txt"))
    launch, kernel, source, got_nan, got_inf, buffer, got_first = culprit(raised(proc))
    assert (source, int(got_nan), int(got_inf), int(got_first)) == (line_of(tag), nan, inf, first)
    # the log holds the same message as a note, after that launch's input record
    text = mask((tmp_path / "log.txt").read_text())
    notes = [r for r in records(text) if " note - nan-check" in r]
    assert notes == [f"[TIMESTAMP] [pid PID] note - nan-check\n  {raised(proc)[len('aoti-debug NaN check: '):]}\n"]
    assert f"launch planted:1.{launch} {kernel}\n" in text


@pytest.mark.torch_matrix
def test_clean_inputs_pass_and_nan_mode_ignores_inf(tmp_path, planted):
    assert "RAISED" not in run_package(planted, "planted").stdout
    # lowered at run time to nan-only: the float16 overflow (+inf) is accepted
    proc = run_package(planted, "planted", inputs="models.planted_inputs('overflow')",
                       AOTI_DEBUG_NAN_CHECK="raise:nan", AOTI_DEBUG_LOGLEVEL="0")
    assert "RAISED" not in proc.stdout and proc.stdout.count("OUTPUT") == 4
    assert "inf" in proc.stdout.splitlines()[-1]


def test_warn_logs_every_failure_and_a_summary_and_continues(tmp_path, planted):
    log = tmp_path / "log.txt"
    proc = run_package(planted, "planted", inputs="models.planted_inputs('sqrt')",
                       AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=str(log))
    assert proc.stdout.count("OUTPUT") == 4
    notes = [r for r in records(mask(log.read_text())) if " note - nan-check" in r]
    assert len(notes) == 3, notes
    assert "its inputs were finite" in notes[0] and line_of("planted.sqrt") in notes[0]
    # the cumsum after it only propagates: named as a victim
    assert re.search(r"launch planted:1\.\d+ aoti_torch_cpu_cumsum .* its input buf\d+ already held NaN/Inf "
                     r"\(look earlier\)", notes[1]), notes[1]
    assert re.fullmatch(r"\[TIMESTAMP\] \[pid PID\] note - nan-check\n  run 1: NaN/Inf in 2 launches: "
                        r"cpp_fused_\w+ x1, aoti_torch_cpu_cumsum x1\n", notes[2]), notes[2]


def test_level_5_answers_the_check_from_the_records_statistics_with_the_same_notes(tmp_path, planted):
    """At level 5 the launch-end record has just read each output: its statistics
    answer the check, and the notes are those of a level-1 run."""
    notes = {}
    for level in ("1", "5"):
        log = tmp_path / f"log{level}.txt"
        run_package(planted, "planted", inputs="models.planted_inputs('sqrt')", AOTI_DEBUG_NAN_CHECK="warn:naninf",
                    AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=str(log))
        notes[level] = [r.split("\n", 1)[1] for r in records(mask(log.read_text())) if " note - nan-check" in r]
    assert len(notes["1"]) == 3 and notes["5"] == notes["1"]


def test_off_at_run_time_checks_nothing(planted):
    proc = run_package(planted, "planted", inputs="models.planted_inputs('log')",
                       AOTI_DEBUG_NAN_CHECK="off", AOTI_DEBUG_LOGLEVEL="0")
    assert "RAISED" not in proc.stdout and "nan" in proc.stdout.splitlines()[0]


def test_attention_mask_inf_is_accepted_in_nan_mode(packages):
    pt2 = packages.get("block", **FULL)
    proc = run_package(pt2, "block", AOTI_DEBUG_LOGLEVEL="0")
    assert proc.stdout.startswith("OUTPUT (2, 5, 16)") and "RAISED" not in proc.stdout


# -- input guards ----------------------------------------------------------------

def guard_error(pt2, inputs, model="dynamic", **env):
    text = raised(run_package(pt2, model, inputs=inputs, **env))
    head = f"aoti-debug: the inputs of model {model!r} do not match what it was compiled for:\n"
    assert text.startswith(head), text
    return text[len(head):].split("\n")


X, Y = "torch.randn(4, 4)", "torch.randn(8, 4)"


@pytest.mark.parametrize("inputs,problems", [
    (f"(torch.randn(4, 4, 1), {Y})", ["  x.dim() is 3, expected 2"]),
    (f"(torch.randn(4, 5), {Y})", ["  x.shape[1] is 5, expected 4"]),
    ("(torch.randn(65, 4), torch.randn(130, 4))",
     ["  x.shape[0] is 65, but this artifact was compiled for 2 <= batch <= 64"]),
    (f"({X}, torch.randn(10, 4))",
     ["  y.shape[0] is 10, but this artifact was compiled for y.shape[0] == 2*batch (= 8 here)"]),
    (f"({X}.double(), {Y})", ["  x.dtype is torch.float64, expected torch.float32"]),
    (f"({X}.to('meta'), {Y})", ["  x.device is meta, expected cpu"]),
    (f"(torch.randn(4, 4).t(), {Y})",
     ["  x.stride(0) is 1, but the compiled kernels index it with stride 4 (strides are (1, 4))",
      "  x.stride(1) is 4, but the compiled kernels index it with stride 1 (strides are (1, 4))"]),
    ("(torch.randn(65, 5).double(), torch.randn(3, 4))",
     ["  x.dtype is torch.float64, expected torch.float32",
      "  x.shape[0] is 65, but this artifact was compiled for 2 <= batch <= 64",
      "  x.shape[1] is 5, expected 4",
      "  y.shape[0] is 3, but this artifact was compiled for y.shape[0] == 2*batch (= 130 here)"]),
])
@pytest.mark.torch_matrix
def test_guard_reports_every_violation_in_the_users_terms(dynamic, inputs, problems):
    assert guard_error(dynamic, inputs) == problems


SPECIALISED = (" (batch was declared with min=1, but torch.export and Inductor specialise sizes 0 and 1, "
               "so a dynamic size is compiled for 2 and up; to accept smaller sizes, export and compile under "
               "torch.fx.experimental._config.patch(backed_size_oblivious=True))")


def test_a_bound_the_compile_raised_from_the_declared_min_says_why_and_how_to_accept_it(dynamic, packages):
    """models.Dynamic declares Dim("batch", min=1): compiled for 2 and up, and a batch of 1 is
    told why; a batch above the maximum is not (the bound is the user's own)."""
    assert guard_error(dynamic, "(torch.randn(1, 4), torch.randn(2, 4))") == [
        "  x.shape[0] is 1, but this artifact was compiled for 2 <= batch <= 64" + SPECIALISED]
    assert guard_error(dynamic, "(torch.randn(65, 4), torch.randn(130, 4))") == [
        "  x.shape[0] is 65, but this artifact was compiled for 2 <= batch <= 64"]
    # models.Named declares min=2 itself: its bound needs no word
    assert guard_error(packages.get("named", AOTI_DEBUG_CHECK_INPUTS="1"), "models.named_inputs(1)", "named") == [
        "  input_ids.shape[1] is 1, but this artifact was compiled for 2 <= seq <= 32"]


@pytest.mark.torch_matrix
def test_upstream_input_checks_give_way_to_the_guard_one_message_for_one_problem(dynamic):
    """AOTI_RUNTIME_CHECK_INPUTS=1 switches the guard on (its upstream name) and upstream's own
    checks, which ran first and said some problems their way; with the guard compiled in they
    run only while the guard is off."""
    too_big = "(torch.randn(65, 4), torch.randn(130, 4))"
    assert guard_error(dynamic, too_big, AOTI_RUNTIME_CHECK_INPUTS="1") == [
        "  x.shape[0] is 65, but this artifact was compiled for 2 <= batch <= 64"]
    assert guard_error(dynamic, "(torch.randn(4, 5), torch.randn(8, 4))", AOTI_RUNTIME_CHECK_INPUTS="1") == [
        "  x.shape[1] is 5, expected 4"]
    # the guard off at run time: upstream's checks are what is left
    upstream = raised(run_package(dynamic, "dynamic", inputs="(torch.randn(4, 5), torch.randn(8, 4))",
                                  AOTI_RUNTIME_CHECK_INPUTS="1", AOTI_DEBUG_CHECK_INPUTS="0"))
    if torch.__version__ >= "2.13":
        assert upstream.startswith("input_handles[0]: unmatched dim value at 1, expected: 4, but got: 5"), upstream
    else:       # before 2.13 AOTI's interface keeps an error's text from its caller
        assert "aoti-debug" not in upstream and "API call failed" in upstream, upstream


@pytest.mark.torch_matrix
def test_a_size_range_without_an_upper_end_is_guarded_from_below_only():
    """A Dim without max (and Dim.AUTO, Dim.DYNAMIC) leaves export's range open above with
    torch's int_oo, which says it is finite but has no value: the guard bounds it by
    INT64_MAX instead of failing the compile."""
    import sympy
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges
    from aoti_debug.codegen_patches import guards
    assert guards._range(ValueRanges(2, int_oo)) == (2, "INT64_MAX")
    assert guards._range(ValueRanges(-int_oo, int_oo)) == (0, "INT64_MAX")
    assert guards._range(ValueRanges(sympy.Integer(2), sympy.oo)) == (2, "INT64_MAX")
    assert guards._range(ValueRanges(3, 64)) == (3, 64)
    assert guards._range(None) == (0, "INT64_MAX")


# -- a dynamic model's guard: bounds first, checked arithmetic, no randomness ----

@pytest.fixture(scope="module")
def patches(packages):
    """models.Patches (batch 2..8, height and width 32..64), everything compiled in."""
    return packages.get("patches", AOTI_DEBUG_COMPILE="all")


@pytest.mark.parametrize("shape,problems", [
    # width//4 == 1 and width//8 == 0: export's relations divide by zero there
    ((2, 3, 32, 6), ["  img.shape[3] is 6, but this artifact was compiled for 32 <= width <= 64"]),
    ((2, 3, 7, 7), ["  img.shape[2] is 7, but this artifact was compiled for 32 <= height <= 64",
                    "  img.shape[3] is 7, but this artifact was compiled for 32 <= width <= 64"]),
    ((9, 3, 65, 32), ["  img.shape[0] is 9, but this artifact was compiled for 2 <= batch <= 8",
                      "  img.shape[2] is 65, but this artifact was compiled for 32 <= height <= 64"]),
])
@pytest.mark.torch_matrix
def test_sizes_outside_their_range_are_said_before_any_relation_is_evaluated(patches, shape, problems):
    """A relation such as Ne(8*Mod(1, width//4), 0) is only evaluated over sizes within
    their ranges: width 6 once killed the process with SIGFPE inside the guard."""
    assert guard_error(patches, f"(torch.randn{shape},)", "patches", AOTI_DEBUG_CHECK_INPUTS="1") == problems


def test_sizes_within_range_pass_the_guard(patches):
    out = run_package(patches, "patches", inputs="(torch.randn(3, 3, 36, 60),)", AOTI_DEBUG_CHECK_INPUTS="1")
    assert out.stdout.startswith("OUTPUT (3, 4)") and "RAISED" not in out.stdout


def test_checked_size_expressions_follow_python_and_never_trap(tmp_path):
    """codegen_patches/sizeexpr.py prints each expression over detail/sizeexpr.h; run
    in C++ they give Python's floor division and modulo, and "undefined" (never a
    trap) for a division or modulo by zero and an int64 overflow."""
    import subprocess
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Mod, ModularIndexing, PythonMod
    from aoti_debug.codegen_patches import sizeexpr
    from conftest import REPO
    a, b = sympy.symbols("a b", integer=True)
    big = 2**62
    cases = [  # (expression, a, b, expected value or None for undefined)
        (FloorDiv(a, b), 7, 2, 3), (FloorDiv(a, b), -7, 2, -4), (FloorDiv(a, b), 7, -2, -4),
        (FloorDiv(a, b), 7, 0, None), (PythonMod(a, b), -7, 3, 2), (PythonMod(a, b), 7, -3, -2),
        (Mod(1, FloorDiv(a, 8)), 6, 0, None), (Mod(a, b), 9, 4, 1), (ModularIndexing(a, 2, b), 13, 4, 2),
        (a * b, big, 2, None), (a * b, big, -2, -2**63), (a + b, big, big, None), (a - b, -big, big + 1, None),
        (a**3, 2**21, 0, None), (a**2, -3, 0, 9), (sympy.Max(a, b, 3), 1, 2, 3), (sympy.Min(a, b), 5, -1, -1),
        (sympy.Eq(Mod(a, 4), 0), 12, 0, True), (sympy.Ne(8 * Mod(1, FloorDiv(a, 4)), 0), 40, 0, True),
        (sympy.Ne(8 * Mod(1, FloorDiv(a, 4)), 0), 3, 0, None), (a < b, 1, 2, True), (a >= b, 1, 2, False),
        # a false conjunct decides, even beside an undefined one
        (sympy.And(sympy.Eq(a, 1), sympy.Eq(FloorDiv(b, a - 2), 0)), 2, 5, False),
        (sympy.Or(sympy.Eq(a, 2), sympy.Eq(FloorDiv(b, a - 2), 0)), 2, 5, True),
    ]
    body = []
    for i, (expr, x, y, _) in enumerate(cases):
        code = sizeexpr.cpp(expr, lambda s: str(s))
        body.append(f"{{ int64_t a = {x}LL, b = {y}LL; auto r = {code}; (void)a; (void)b; "
                    f"std::printf(\"%d %d %lld\\n\", {i}, r.ok ? 1 : 0, (long long)r.v); }}")
    src = tmp_path / "sizeexpr.cpp"
    src.write_text('#include <cstdio>\n#include "aoti_debug/detail/sizeexpr.h"\n'
                   "namespace aotid_sx = aoti_debug::detail::sizeexpr;\n"
                   "int main() {\n" + "\n".join(body) + "\n}\n")
    exe = tmp_path / "sizeexpr"
    subprocess.run(["c++", "-std=c++17", "-Wall", "-Werror", "-fsanitize=undefined",
                    "-fno-sanitize-recover=all", "-I", os.path.join(REPO, "cpp_runtime", "include"), str(src),
                    "-o", str(exe)], check=True, timeout=120)
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60).stdout.split("\n")
    for i, (expr, x, y, want) in enumerate(cases):
        assert got[i] == (f"{i} 0 0" if want is None else f"{i} 1 {int(want)}"), (expr, x, y, got[i])


def test_a_relation_sympy_simplify_would_assert_on_is_kept_and_the_same_every_time():
    """guards._relations once ran sympy.simplify, which evaluates expressions at random
    points, where torch's Mod asserts on a negative number (a compile failing at
    random); now the shape environment's own simplification, and the expression as it
    is where that fails."""
    import random
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.utils._sympy.functions import Mod
    from torch.utils._sympy.value_ranges import ValueRanges
    from aoti_debug.codegen_patches import guards
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    relation = sympy.Eq(s1, s0 + Mod(-s0, 4))
    shape_env = ShapeEnv()
    shape_env.var_to_range.update({s0: ValueRanges(2, 1024), s1: ValueRanges(2, 1028)})
    shape_env.guards = [type("Guard", (), {"expr": relation})()]
    found = set()
    for seed in range(8):
        random.seed(seed)
        found.add(tuple(map(str, guards._relations(shape_env, {s0, s1}))))
    assert found == {(str(relation),)}


def test_the_same_model_gives_the_same_generated_code_under_any_random_seed(tmp_path, aoti_cache):
    """Code generation (with every check in) has no random state: two compiles of
    models.Patches under different random seeds and hash seeds give the same wrapper,
    byte for byte (the compile's own temporary paths in its comments aside)."""
    import zipfile
    from conftest import TESTS, clean_env, run_python
    wrappers = []
    for seed in (1, 2):
        out = tmp_path / str(seed) / "patches.pt2"
        out.parent.mkdir()
        run_python(f"""
            import random, sys; sys.path.insert(0, {TESTS!r})
            import torch, models
            random.seed({seed}); torch.manual_seed({seed})
            ep = models.export("patches")
            with torch._inductor.config.patch({{"aot_inductor.package_cpp_only": True,
                                                "force_disable_caches": True}}):
                torch._inductor.aoti_compile_and_package(ep, package_path={str(out)!r})
        """, env=clean_env(AOTI_DEBUG_COMPILE="all", PYTHONHASHSEED=str(seed), TORCHINDUCTOR_CACHE_DIR=aoti_cache))
        with zipfile.ZipFile(out) as z:
            [name] = [n for n in z.namelist() if n.endswith(".wrapper.cpp")]
            text = z.read(name).decode()
        wrappers.append([line for line in text.splitlines() if not line.startswith("// g++ ")])
    assert "aotid_guard.relation(" in "\n".join(wrappers[0])
    assert wrappers[0] == wrappers[1]


def test_guard_nan_inputs_with_nan_check(dynamic):
    assert guard_error(dynamic, f"(torch.tensor([[1.0, float('nan'), 2, 3]] * 4), {Y})") == [
        "  x holds 4 NaN (first at flat index 1)"]


def test_guard_writes_the_offending_inputs_at_level_1(tmp_path, dynamic):
    log = tmp_path / "log.txt"
    run_package(dynamic, "dynamic", inputs=f"({X}.double(), {Y})", AOTI_DEBUG_LOGLEVEL="1",
                AOTI_DEBUG_LOGDEST=str(log))
    recs = records(mask(log.read_text()))
    assert recs[0] == "[TIMESTAMP] [pid PID] run 1 dynamic thread=TID\n"
    assert recs[1] == ("[TIMESTAMP] [pid PID] note - input-check\n"
                       "  x.dtype is torch.float64, expected torch.float32\n"
                       "  in x:\n    Tensor(\n      shape=(4, 4)\n      stride=(4, 1)\n"
                       "      dtype=torch.float64\n      device=cpu\n      requires_grad=False\n"
                       "      is_contiguous=True\n    )\n")
    assert len(recs) == 2          # no kernel ran


def test_a_valid_layout_the_code_handles_is_accepted(dynamic):
    # a CPU view at an odd storage offset: Inductor's CPU kernels use unaligned
    # loads, so this is valid and must not be rejected
    view = "torch.randn(33)[1:17].view(4, 4)"
    got = run_package(dynamic, "dynamic", inputs=f"({view}, {Y})", AOTI_DEBUG_LOGLEVEL="0").stdout
    assert got.startswith("OUTPUT (4,)") and "RAISED" not in got
    # and the guard can be switched off at run time
    proc = run_package(dynamic, "dynamic", inputs=f"({X}.double(), {Y})", AOTI_DEBUG_CHECK_INPUTS="0",
                       check=False)
    assert "do not match" not in proc.stdout


@pytest.fixture(scope="module")
def ranked(packages):
    return packages.get("ranked", AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_NAN_CHECK="raise:naninf")


def test_a_reused_buffer_keeps_what_its_writer_found(tmp_path, ranked):
    """The last kernel reads sort's output under another name (buffer reuse):
    it is a victim of the -inf, not an origin; a launch counts once."""
    log = tmp_path / "log.txt"
    proc = run_package(ranked, "ranked", inputs="models.ranked_inputs(True)",
                       AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=str(log))
    assert proc.stdout.startswith("OUTPUT (4, 6)")
    notes = [r.split("\n", 1)[1].strip() for r in records(mask(log.read_text())) if "note - nan-check" in r]
    origins = [n for n in notes if "its inputs were finite" in n]
    assert len(origins) == 1 and re.match(r"launch ranked:1\.\d+ cpp_fused_\w*log\w* \(source " + re.escape(line_of("ranked.log")),
                                          origins[0]), notes
    # an extern kernel is named by its own op's line, not by the line of the op that fed it
    [cumsum] = [n for n in notes if "aoti_torch_cpu_cumsum (source" in n]
    assert f"aoti_torch_cpu_cumsum (source {line_of('ranked.cumsum')})" in cumsum
    last = [n for n in notes if f"(source {line_of('ranked.sub')})" in n]
    assert last and all(re.search(r"its input buf\d+ already held NaN/Inf \(look earlier\)$", n) for n in last), last
    assert re.fullmatch(r"run 1: NaN/Inf in 4 launches: \w+ x1, aoti_torch_cpu_cumsum x1, "
                        r"aoti_torch_cpu_sort_stable x1, \w+ x1", notes[-1]), notes[-1]


def test_nan_only_names_the_launch_that_turns_inf_into_nan(ranked):
    proc = run_package(ranked, "ranked", inputs="models.ranked_inputs(True)",
                       AOTI_DEBUG_NAN_CHECK="raise:nan", AOTI_DEBUG_LOGLEVEL="0")
    text = raised(proc)
    assert re.fullmatch(r"aoti-debug NaN check: launch ranked:1\.\d+ \w+ \(source " + re.escape(line_of("ranked.sub"))
                        + r"\) wrote 3 NaN into buf\d+ \(first at flat index \d+\); its inputs held no NaN, "
                        r"so this launch is where NaN first appears", text), text


# -- the user's Dim names, whatever form dynamic_shapes takes ---------------------

@pytest.mark.torch_matrix
def test_guard_names_dims_given_by_argument_name_for_positional_inputs(packages):
    """models.Named: exported as (input_ids, attention_mask) by position, its
    dynamic_shapes a dict keyed by argument name: the messages say `seq`."""
    pt2 = packages.get("named", AOTI_DEBUG_CHECK_INPUTS="1")
    assert guard_error(pt2, "models.named_inputs(40)", "named") == [
        "  input_ids.shape[1] is 40, but this artifact was compiled for 2 <= seq <= 32"]
    assert guard_error(pt2, "models.named_inputs(8, 9)", "named") == [
        "  attention_mask.shape[1] is 9, but this artifact was compiled for attention_mask.shape[1] == seq "
        "(= 8 here)"]
    assert run_package(pt2, "named").stdout.startswith("OUTPUT (2, 4)")


class _Pair(torch.nn.Module):
    def forward(self, input_ids, mask):
        return input_ids * mask


class _Batch(torch.nn.Module):
    def forward(self, batch, scale):
        return batch["x"] * batch["mask"] * scale


class _Scaled(torch.nn.Module):
    def forward(self, x, k: int):
        return x * k


def _forms():
    """(module, args, kwargs, dynamic_shapes, labels, (input index, dim) -> name) per form."""
    from torch.export import Dim, ShapesCollection
    b, seq = Dim("b", max=16), Dim("seq", min=2, max=32)
    ids, mask, scale = torch.randn(2, 8), torch.randn(2, 8), torch.randn(2, 1)
    both = {(0, 0): "b", (0, 1): "seq", (1, 0): "b", (1, 1): "seq"}
    pair = ["input_ids", "mask"]
    batch = ['batch["x"]', 'batch["mask"]', "scale"]
    collection = ShapesCollection()
    collection[ids], collection[mask] = {0: b, 1: seq}, (b, seq)
    return {
        "tuple": (_Pair(), (ids, mask), None, ({0: b, 1: seq}, {0: b, 1: seq}), pair, both),
        "list of lists with None": (_Pair(), (ids, mask), None, [[None, seq], (None, seq)], pair,
                                    {(0, 1): "seq", (1, 1): "seq"}),
        "dict by name, positional": (_Pair(), (ids, mask), None,
                                     {"mask": {1: seq, 0: b}, "input_ids": (b, seq)}, pair, both),
        "dict by name, keyword": (_Pair(), (ids,), {"mask": mask},
                                  {"mask": {0: b, 1: seq}, "input_ids": [b, seq]}, pair, both),
        "tuple, keyword": (_Pair(), (ids,), {"mask": mask}, ({0: b, 1: seq}, [b, seq]), pair, both),
        "nested dict": (_Batch(), ({"x": ids, "mask": mask}, scale), None,
                        {"batch": {"x": {0: b, 1: seq}, "mask": [b, seq]}, "scale": {0: b}}, batch,
                        {**both, (2, 0): "b"}),
        "nested tuple": (_Batch(), ({"x": ids, "mask": mask}, scale), None,
                         ({"x": (b, seq), "mask": {1: seq, 0: b}}, [b, None]), batch,
                         {**both, (2, 0): "b"}),
        "nested, keyword": (_Batch(), (), {"scale": scale, "batch": {"x": ids, "mask": mask}},
                            {"scale": {0: b}, "batch": {"x": {0: b, 1: seq}, "mask": [b, seq]}},
                            ["scale", 'batch["x"]', 'batch["mask"]'],
                            {(0, 0): "b", (1, 0): "b", (1, 1): "seq", (2, 0): "b", (2, 1): "seq"}),
        "ShapesCollection": (_Pair(), (ids, mask), None, collection, pair, both),
        # an int input is a constant of the graph: the tensors keep their places
        "an int among the inputs": (_Scaled(), (ids, 3), None, {"x": {1: seq}, "k": None}, ["x"],
                                    {(0, 1): "seq"}),
    }


@pytest.mark.torch_matrix
@pytest.mark.parametrize("form", list(_forms()))
def test_dim_names_for_every_form_of_dynamic_shapes(form):
    """What the guards are built from: each input's label, and the Dim name of
    each of its dynamic dimensions (input index in the graph's order, dim)."""
    from aoti_debug.codegen_patches import guards
    module, args, kwargs, dynamic_shapes, labels, dims = _forms()[form]
    ep = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes)
    ep._aoti_debug_dim_names = guards.dim_names_of(module, args, kwargs, dynamic_shapes)
    ctx = guards.context_from_exported_program(ep)
    assert (ctx.labels, ctx.dim_names) == (labels, dims)


@pytest.mark.torch_matrix
def test_the_declared_minimum_of_each_dimension_is_kept_for_the_guards():
    """What the guard's word on a raised bound is built from: each dimension's declared
    minimum (a Dim's min, a hint's 0) by input index, and only a bound of 2 over a
    declared 0 or 1 gets it."""
    from torch.export import Dim
    from aoti_debug.codegen_patches import guards
    ids, mask = torch.ones(4, 8), torch.ones(4, 8)
    b = Dim("b", min=1, max=16)
    shapes = ({0: b, 1: Dim.DYNAMIC}, {0: b, 1: Dim.AUTO})
    ep = torch.export.export(_Pair(), (ids, mask), dynamic_shapes=shapes)
    ep._aoti_debug_declared = guards.declared_of(_Pair(), (ids, mask), None, shapes)
    assert guards.context_from_exported_program(ep).declared == {
        (0, 0): (1, "with min=1"), (0, 1): (0, "Dim.DYNAMIC"), (1, 0): (1, "with min=1"), (1, 1): (0, "Dim.AUTO")}
    assert guards._below(2, "x.shape[1]", (0, "Dim.DYNAMIC")).startswith(
        " (x.shape[1] was declared Dim.DYNAMIC, but torch.export and Inductor specialise sizes 0 and 1")
    assert [guards._below(lo, "b", declared) for lo, declared in
            [(2, (2, "with min=2")), (3, (1, "with min=1")), (2, None)]] == ["", "", ""]
