"""A C++ custom op that logs through the public API (examples/custom_op),
built with torch.utils.cpp_extension: its records join the model's log in
eager runs and inside an AOTI package run by the proxy executor, from Python
and from the C++ runner; a crash inside it leaves its inputs and the trailer."""

import os
import re
import signal

import pytest

from aoti_debug import runner
from aoti_debug.analysis.mask import mask
from conftest import TESTS, clean_env, records, run_package, run_python, saved_inputs

pytestmark = pytest.mark.torch_matrix


def heads(text):
    return [r.splitlines()[0] for r in records(mask(text))]


def renumber(record, number):
    """A record with its call number replaced, to compare two calls."""
    first, _, body = record.partition("\n")
    head, thread, tid = first.partition(" thread=")
    kind, ident, name = head.rsplit(" ", 2)
    assert ident == str(number), first
    return f"{kind} N {name}{thread}{tid}\n{body}"


@pytest.fixture(scope="module")
def gather(packages, mylib_so):
    return packages.get("gather", MYLIB_SO=mylib_so, AOTI_DEBUG_LOGLEVEL="5")


def saved(tmp_path, crash=False):
    return saved_inputs(tmp_path, f"models.gather_inputs({crash})")


@pytest.mark.parametrize("level", ["3", "5"])
def test_eager_records_equal_the_python_loggers(tmp_path, mylib_so, level):
    log = tmp_path / "log.txt"
    run_python(f"""
        import torch, aoti_debug
        torch.ops.load_library({mylib_so!r})
        x = torch.arange(12, dtype=torch.float32).reshape(4, 3) - 5
        idx = torch.tensor([3, 0])

        @aoti_debug.log_api(name="mylib::gather_rows")
        def gather_rows(x, idx):
            return x[idx]

        assert torch.equal(torch.ops.mylib.gather_rows(x, idx), gather_rows(x, idx))
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=log))
    recs = records(mask(log.read_text()))
    assert [r.splitlines()[0] for r in recs] == [
        "[TIMESTAMP] [pid PID] call 1 mylib::gather_rows thread=TID", "[TIMESTAMP] [pid PID] return 1 mylib::gather_rows",
        "[TIMESTAMP] [pid PID] call 2 mylib::gather_rows thread=TID", "[TIMESTAMP] [pid PID] return 2 mylib::gather_rows"]
    # the C++ scope labels its arguments as the Python signature does
    assert "\n  arg[0] x:\n" in recs[0] and "\n  arg[1] idx:\n" in recs[0]
    assert ("      mean=0.500000\n" in recs[1]) == (level == "5")
    assert [renumber(r, 1) for r in recs[:2]] == [renumber(r, 2) for r in recs[2:]]


def test_eager_op_follows_level_and_filter(tmp_path, mylib_so):
    code = f"""
        import torch
        torch.ops.load_library({mylib_so!r})
        torch.ops.mylib.gather_rows(torch.ones(2, 2), torch.tensor([1]))
    """
    one, other = tmp_path / "one.txt", tmp_path / "other.txt"
    run_python(code, env=clean_env(AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=one))
    run_python(code, env=clean_env(AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST=other,
                                   AOTI_DEBUG_KERNELS="*softmax*"))
    assert records(mask(one.read_text())) == ["[TIMESTAMP] [pid PID] call 1 mylib::gather_rows thread=TID\n"]
    assert not other.exists()


def test_op_inside_a_package_logs_within_its_proxy_launch(gather, mylib_so):
    import models
    log = gather + ".py.log"
    proc = run_package(gather, "gather", AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST=log, MYLIB_SO=mylib_so)
    assert proc.stdout.startswith("OUTPUT (3,)"), proc.stdout + proc.stderr
    recs = records(mask(open(log).read()))
    names = [r.splitlines()[0].split("] ", 2)[2] for r in recs]
    k = names.index("launch gather:1.4 mylib.gather_rows.default")
    assert names[k:k + 4] == ["launch gather:1.4 mylib.gather_rows.default", "call 1 mylib::gather_rows thread=TID",
                              "return 1 mylib::gather_rows", "launch-end gather:1.4 mylib.gather_rows.default"]
    assert recs[k].splitlines()[1] == f"  origin: nodes=gather_rows source={models.line_of('gather.op')}"
    # what the launch passed in is what the op received, what it returned is the launch's output
    launch_in = recs[k].split("  in ")[1:]
    assert [b.split(":", 1)[1] for b in launch_in] == [b.split(":", 1)[1] for b in recs[k + 1].split("  arg[")[1:]]
    # (the buffer's name is Inductor's, which numbers buffers differently from release to release)
    assert recs[k + 2].split("  output:", 1)[1] == re.split(r"  out buf\d+:", recs[k + 3], maxsplit=1)[1]


@pytest.mark.parametrize("level", ["1", "3", "5"])
def test_python_and_cpp_runner_write_the_same_log(tmp_path, gather, mylib_so, level):
    inputs = saved(tmp_path)
    py_log, cpp_log = tmp_path / "py.log", tmp_path / "cpp.log"
    py = run_package(gather, "gather", inputs=f"torch.load({str(inputs)!r})", MYLIB_SO=mylib_so,
                     AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=py_log)
    cpp = runner.run_package(gather, inputs, libraries=[mylib_so],
                             env=clean_env(AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=cpp_log))
    assert cpp.returncode == 0, cpp.stderr
    assert py.stdout.startswith("OUTPUT (3,)")
    assert "call 1 mylib::gather_rows" in cpp_log.read_text()
    assert mask(py_log.read_text()) == mask(cpp_log.read_text())


def test_crash_in_the_op_ends_the_log_with_its_inputs_and_the_trailer(tmp_path, gather, mylib_so):
    inputs = saved(tmp_path, crash=True)
    logs = {}
    for side in ("python", "cpp"):
        log = tmp_path / f"{side}.log"
        env = dict(AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST=log)
        if side == "python":
            proc = run_package(gather, "gather", inputs=f"torch.load({str(inputs)!r})", check=False,
                               MYLIB_SO=mylib_so, **env)
        else:
            proc = runner.run_package(gather, inputs, libraries=[mylib_so], env=clean_env(**env))
        assert proc.returncode == -signal.SIGSEGV, (side, proc.stdout, proc.stderr)
        logs[side] = mask(log.read_text())
    assert logs["python"] == logs["cpp"]
    recs = records(logs["cpp"])
    assert recs[-1] == "[TIMESTAMP] [pid PID] crash 1 mylib::gather_rows\n  signal: SIGSEGV\n"
    call = recs[-2].splitlines()
    assert call[0] == "[TIMESTAMP] [pid PID] call 1 mylib::gather_rows thread=TID"
    assert call[1] == "  arg[0] x:" and "  arg[1] idx:" in call
    assert recs[-3].splitlines()[0] == "[TIMESTAMP] [pid PID] launch gather:1.4 mylib.gather_rows.default"


def test_runner_names_a_library_it_cannot_load(tmp_path, gather, mylib_so):
    inputs = saved(tmp_path)
    missing = tmp_path / "nowhere.so"
    proc = runner.run_package(gather, inputs, libraries=[missing], env=clean_env())
    assert proc.returncode == 2
    assert proc.stderr == (f"aoti-debug-run: cannot load library: {missing}: "
                           "cannot open shared object file: No such file or directory\n")
    proc = runner.run_package(gather, inputs, env=clean_env())   # the op's library not loaded
    assert proc.returncode == 1
    assert proc.stderr == (f"aoti-debug-run: cannot load package '{gather}': "
                           "Could not find schema for mylib::gather_rows.\n")


def op_records(text, model):
    """The op's launch and its own records, with buffer names and the launch ids
    of `model` (which depend on how many kernels came before, and name the model:
    `model` for torch.compile, the package's stem for AOTI) normalised."""
    recs = records(mask(text))
    k = next(i for i, r in enumerate(recs) if f" launch {model}:1." in r and "mylib.gather_rows.default" in r)
    return [re.sub(r"\bbuf\d+\b", "bufN", re.sub(rf"(launch(?:-end)?) {re.escape(model)}:1\.\d+ ", r"\1 M:1.K ", r))
            for r in recs[k:k + 4]]


def test_torch_compile_logs_the_op_as_the_aoti_package_does(tmp_path, gather, mylib_so):
    py_log, aoti_log = tmp_path / "compile.log", tmp_path / "aoti.log"
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        model, args, _ = models.seeded("gather")
        model.requires_grad_(False)
        with torch.no_grad():
            torch.compile(model)(*args)
    """, env=clean_env(MYLIB_SO=mylib_so, AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=py_log,
                       TORCHINDUCTOR_FX_GRAPH_CACHE="0"))   # a cached graph keeps another checkout's paths
    run_package(gather, "gather", MYLIB_SO=mylib_so, AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_LOGDEST=aoti_log)
    compiled, aoti = op_records(py_log.read_text(), "model"), op_records(aoti_log.read_text(), "gather")
    assert [r.splitlines()[0] for r in compiled] == [
        "[TIMESTAMP] [pid PID] launch M:1.K mylib.gather_rows.default", "[TIMESTAMP] [pid PID] call 1 mylib::gather_rows thread=TID",
        "[TIMESTAMP] [pid PID] return 1 mylib::gather_rows", "[TIMESTAMP] [pid PID] launch-end M:1.K mylib.gather_rows.default"]
    assert "      nan_count=0\n" in compiled[1]
    assert compiled == aoti
    # the kernel before the op computes relu, the op's input, not the op (the
    # AOTI package, which also copies the bias for addmm: test_provenance)
    nodes = re.findall(r"^  origin: nodes=(\S+) ", py_log.read_text(), re.M)
    assert nodes == ["addmm", "relu", "gather_rows", "mul,sum_1"]


# -- custom ops handed views: recorded, checked, their library loaded by check --------------

@pytest.fixture(scope="module")
def gather_view(packages, mylib_so):
    return packages.get("gather_view", MYLIB_SO=mylib_so, AOTI_DEBUG_LOGLEVEL="10")


@pytest.fixture(scope="module")
def gather_view_dump(gather_view, mylib_so, tmp_path_factory):
    """(log text, dump directory) of one level-10 run."""
    root = tmp_path_factory.mktemp("gather-view")
    run_package(gather_view, "gather_view", MYLIB_SO=mylib_so, AOTI_DEBUG_LOGLEVEL="10",
                AOTI_DEBUG_DUMP_DIR=root / "d", AOTI_DEBUG_LOGDEST=root / "log")
    return (root / "log").read_text(), str(root / "d")


def aoti_debug(*argv, cwd=None):
    """`aoti-debug ARGV` in a fresh process with tests/ importable: (exit status, stdout, stderr)."""
    proc = run_python(f"""
        import sys
        from aoti_debug.cli import main
        sys.exit(main({list(argv)!r}))
    """, env=clean_env(PYTHONPATH=TESTS), cwd=cwd, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def launch_record(text, kernel):
    return next(r for r in records(mask(text)) if " launch " in r.splitlines()[0]
                and r.splitlines()[0].endswith(" " + kernel))


def in_lines(record):
    """(name, shape, stride) of each `in` argument of a launch record."""
    return re.findall(r"^  in (\S+):\n    Tensor\(\n      shape=(\(.*\))\n      stride=(\(.*\))", record, re.M)


def test_a_custom_op_handed_views_records_each_and_check_reruns_it(gather_view_dump, mylib_so, tmp_path):
    text, dump = gather_view_dump
    # the C++ op is handed h.t(): its own line, with the view's shape and stride
    op = in_lines(launch_record(text, "mylib.gather_rows.default"))
    assert [(re.sub(r"\d+", "N", n), shape, stride) for n, shape, stride in op] == [
        ("bufN", "(8, 6)", "(1, 8)"), ("idx", "(3,)", "(1,)")]
    # two slices of that same buffer: two lines, two names
    pair = in_lines(launch_record(text, "aotid_test.pair_sub.default"))
    assert [n for n, _, _ in pair] == [op[0][0], op[0][0] + "_view2"]
    assert [(shape, stride) for _, shape, stride in pair] == [("(6, 4)", "(8, 1)")] * 2
    code, out, err = aoti_debug("check", dump, "--library", mylib_so, "--allow-module", "models")
    assert code == 0, out + err
    lines = out.splitlines()
    # the op re-runs on exactly the view recorded (float64 it refuses: judged against eager)
    assert any(re.fullmatch(r"1\.\d+ mylib\.gather_rows\.default  ok  max_abs=0 max_rel=0 max_ulp=0; against eager, "
                            r"not float64: buf\d+ \(the float64 run: mylib\.gather_rows raised RuntimeError: "
                            r"gather_rows: x must be a 2-D float32 tensor\)", line) for line in lines), out
    # two slices of one buffer, each placed by its storage offset: a - b re-run on exactly
    # the slices handed (swapped, the result would be b - a and differ from the dump's)
    assert any(re.fullmatch(r"1\.\d+ aotid_test\.pair_sub\.default  ok  max_abs=0 max_rel=0 max_ulp=[0-9.e+-]+",
                            line) for line in lines), out
    ident = next(line.split()[0] for line in lines if "mylib.gather_rows.default" in line)
    code, out, err = aoti_debug("extract", ident, "--dir", dump, "-o", str(tmp_path / "x"), "--library", mylib_so)
    assert code == 0, out + err
    import torch
    inputs = torch.load(tmp_path / "x" / "inputs.pt", weights_only=True)
    assert sorted((k, tuple(v.shape), v.stride()) for k, v in inputs.items()) == [
        (op[0][0], (8, 6), (1, 8)), ("idx", (3,), (1,))]


def test_check_loads_a_cpp_op_library_as_the_runner_does(gather_view_dump, mylib_so, tmp_path):
    _, dump = gather_view_dump
    code, out, err = aoti_debug("check", dump, "--allow-module", "models")
    assert code == 0, out + err
    assert re.search(r"^1\.\d+ mylib\.gather_rows\.default  not checkable: buf\d+: mylib\.gather_rows is not "
                     r"registered in this process \(load the C\+\+ library that defines it with --library "
                     r"LIB\.so, or import the Python module that defines it with --allow-module MODULE\)$",
                     out, re.M), out
    # a bare name that is a file of the current directory is that file
    folder, name = os.path.split(mylib_so)
    code, out, err = aoti_debug("check", dump, "--library", name, "--allow-module", "models", cwd=folder)
    assert code == 0 and re.search(r"^1\.\d+ mylib\.gather_rows\.default  ok ", out, re.M), out + err
    for lib, why in [(str(tmp_path / "nowhere.so"), f"{tmp_path / 'nowhere.so'}: cannot open shared object file"),
                     ("libaotid_nowhere.so", "libaotid_nowhere.so: cannot open shared object file")]:
        code, out, err = aoti_debug("check", dump, "--library", lib)
        assert (code, out, err) == (2, "", f"aoti-debug check: --library {lib}: cannot load it: {why}: "
                                           "No such file or directory\n")
