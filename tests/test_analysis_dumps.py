"""nan-origin, diff and report on level-10 dump folders (aoti_debug/analysis/dumps.py).

The dumps are real: level-10 AOTI packages (mlp shared with test_flight_recorder,
planted compiled once) and log_api calls, each run in a fresh process with its
log written beside, so that what is read from a dump can be held against the log.
"""

import os
import re
import shutil

import pytest

from aoti_debug.analysis import closeness, dumps, load
from aoti_debug.cli import main
from aoti_debug.runtime.format import number
from conftest import clean_env, run_package, run_python
from test_analysis_diff import model_log
from test_analysis_logs import write_log
from test_analysis_nan_origin import CHAIN
from test_flight_recorder import manifest, run_model

torch = pytest.importorskip("torch")
models = pytest.importorskip("models")     # tests/models.py

LEVEL10 = dict(AOTI_DEBUG_LOGLEVEL="10")
MLP_KERNELS = ["aoti_torch_cpu_addmm_out", "cpp_fused_relu_0", "aoti_torch_cpu_addmm_out",
               "cpp_fused_relu_1", "aoti_torch_cpu_addmm_out", "cpp_fused__softmax_2"]


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def only_folder(dump_dir):
    (name,) = [d for d in os.listdir(dump_dir) if os.path.isdir(os.path.join(dump_dir, d))]
    return os.path.join(dump_dir, name)


@pytest.fixture(scope="module")
def planted_dumps(packages, tmp_path_factory):
    """Dump directories (and the logs beside them) of the level-10 planted model: sqrt and log bugs."""
    pt2 = packages.get("planted", **LEVEL10)
    root = tmp_path_factory.mktemp("planted-dumps")
    out = {}
    for bug in ("sqrt", "log"):
        dump_dir, log = root / bug, root / f"{bug}.log"
        run_package(pt2, "planted", inputs=f"models.planted_inputs({bug!r})", AOTI_DEBUG_LOGLEVEL="10",
                    AOTI_DEBUG_DUMP_DIR=str(dump_dir), AOTI_DEBUG_LOGDEST=str(log))
        out[bug] = (str(dump_dir), str(log))
    return out


@pytest.fixture(scope="module")
def mlp_dumps(packages, tmp_path_factory):
    """Two processes running the level-10 mlp on the same input: dump directories and logs."""
    pt2 = packages.get("mlp", **LEVEL10)
    root = tmp_path_factory.mktemp("mlp-dumps")
    out = []
    for side in ("a", "b"):
        run_model(pt2, root / side, root / f"{side}.log")
        out.append((str(root / side), str(root / f"{side}.log")))
    return out


def without_location(text):
    """nan-origin's text with the `(pid N, file:line)` of each heading removed, and
    the op line, which a dump says (`op:`) and a log only guesses (`candidate ops:`)."""
    text = re.sub(r"(?m)^  (op:     |candidate ops: ).*\n", "", text)
    return re.sub(r" \(pid \d+, [^)]*\)", "", text)


def test_nan_origin_on_dumps_names_the_planted_kernel(planted_dumps, capsys):
    dump_dir, log = planted_dumps["sqrt"]
    folder = only_folder(dump_dir)
    pid = os.path.basename(folder).split("-")[0]
    launches = [e for e in manifest(folder) if e["event"] == "after"]
    sqrt, cumsum = launches[0]["kernel"], launches[1]["kernel"]
    assert re.fullmatch(r"cpp_fused_\w*sqrt\w*", sqrt) and cumsum == "aoti_torch_cpu_cumsum"
    code, out, err = cli(capsys, "nan-origin", "--rerun-ops", dump_dir)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[:2] == [
        f"NaN/Inf origin: launch planted:1.1 {sqrt} (pid {pid}, {pid}-planted-run1/manifest.jsonl:2)",
        f"  source: {models.line_of('planted.sqrt')}"]
    # what holds on every release; the kernel's other nodes and outputs are Inductor's
    # choice (2.15 fuses the model's other branch into this kernel)
    assert "sqrt" in lines[2].removeprefix("  nodes:  ").split(", ")
    # its ops re-run one at a time on the dumped inputs: sqrt makes the NaN, at its line
    assert lines[3] == f"  op:     aten.sqrt ({models.line_of('planted.sqrt')})"
    assert lines[4] == "  inputs (all finite):"
    assert ("    in b: shape=(5,) dtype=torch.float32 min=-4.000000 max=1.000000 mean=0.000000 "
            "nan_count=0 inf_count=0") in lines[5:lines.index("  outputs (NaN/Inf):")]
    assert [l for l in lines if re.fullmatch(
        r"    out buf\d+: shape=\(5,\) dtype=torch\.float32 min=2\.000000 max=2\.000000 "
        r"mean=2\.000000 nan_count=1 inf_count=0", l)] != []
    assert lines[-1] == f"1 later launch shows NaN/Inf too (victims): planted:1.2 {cumsum}"
    # a dump reads as the log the same run wrote; the log alone lists the candidate ops
    from_log = cli(capsys, "nan-origin", log)[1]
    assert re.fullmatch(r"  candidate ops: (\w+, )*sqrt(, \w+)* \(can make NaN/Inf\).*", from_log.splitlines()[3])
    assert without_location(from_log) == without_location(out)


def test_nan_origin_on_dumps_skips_clean_launches(planted_dumps, capsys):
    dump_dir, log = planted_dumps["log"]
    code, out, _ = cli(capsys, "nan-origin", "--rerun-ops", only_folder(dump_dir))   # one run folder will do too
    lines = out.splitlines()
    assert code == 1
    # the launch's number is Inductor's fusion (1.3 on 2.13; 2.15 fuses it into 1.1)
    assert re.fullmatch(r"NaN/Inf origin: launch planted:1\.\d+ cpp_fused_\w*log\w* \(pid \d+, "
                        r"\d+-planted-run1/manifest\.jsonl:\d+\)", lines[0])
    assert lines[1] == f"  source: {models.line_of('planted.log')}"
    assert lines[3] == f"  op:     aten.log ({models.line_of('planted.log')})"
    assert "    in a: shape=(6,) dtype=torch.float32 min=-1.000000 max=1.000000 mean=0.666667 " \
           "nan_count=0 inf_count=0" in lines
    assert without_location(out) == without_location(cli(capsys, "nan-origin", log)[1])


def test_logs_with_statistics_are_preferred_to_dumps(planted_dumps, tmp_path, capsys):
    dump_dir, log = planted_dumps["sqrt"]
    both = tmp_path / "both"
    shutil.copytree(dump_dir, both)
    shutil.copy(log, both / "debug.log")
    code, out, _ = cli(capsys, "nan-origin", str(both))
    assert code == 1 and re.match(r"NaN/Inf origin: launch planted:1\.1 \S+ \(pid \d+, debug\.log:\d+\)\n", out)
    # a log without statistics is not: the dumps have them
    write_log(both, "debug.log", model_log(level=3))
    code, out, _ = cli(capsys, "nan-origin", str(both))
    assert code == 1 and re.match(r"NaN/Inf origin: launch planted:1\.1 \S+ \(pid \d+, \d+-planted-run1/manifest", out)


def test_diff_of_two_dumps_of_the_same_run_is_identical_bit_for_bit(mlp_dumps, capsys):
    (a, _), (b, _) = mlp_dumps
    assert [e["kernel"] for e in manifest(only_folder(a)) if e["event"] == "after"] == MLP_KERNELS
    assert cli(capsys, "diff", a, b) == (0, (
        f"A: {a}\n"
        f"B: {b}\n"
        "A        B        kernel                    status     max abs  max rel  largest delta\n"
        + "".join(f"mlp:1.{k}  mlp:1.{k}  {name:<24}  identical  0        0        0 (bit for bit)\n"
                  for k, name in enumerate(MLP_KERNELS, 1))
        + "A and B are identical bit for bit: the outputs of 6 aligned launch(es) have equal "
        "content hashes\n"), "")


def perturb(folder, index, element, delta):
    """Add `delta` to one element of launch `index`'s first output file; (before, after) values."""
    after = next(e for e in manifest(folder) if e["event"] == "after" and e["index"] == index)
    path = os.path.join(folder, after["files"][0]["file"])
    t = torch.load(path, weights_only=True)
    before = t[element].item()
    t[element] += delta
    torch.save(t, path)
    return before, t[element].item()


def test_diff_names_the_perturbed_launch_with_its_measured_error(mlp_dumps, tmp_path, capsys):
    (a, _), (b, _) = mlp_dumps
    shutil.copytree(b, tmp_path / "b")
    b = str(tmp_path / "b")
    va, vb = perturb(only_folder(b), 3, (1, 5), 0.25)
    err, allowed = abs(vb - va), 1e-5 + 1e-3 * abs(vb)
    code, out, stderr = cli(capsys, "diff", a, b)
    assert (code, stderr) == (1, "")
    lines = out.splitlines()
    stats = [line for line in lines if line.startswith(("  A out buf2:", "  B out buf2:"))]
    # the launches whose dumped outputs are untouched are identical (content hashes);
    # the perturbed one is compared element by element
    assert lines[2:] == [
        "A        B        kernel                    status     max abs  max rel  largest delta",
        "mlp:1.1  mlp:1.1  aoti_torch_cpu_addmm_out  identical  0        0        0 (bit for bit)",
        "mlp:1.2  mlp:1.2  cpp_fused_relu_0          identical  0        0        0 (bit for bit)",
        f"mlp:1.3  mlp:1.3  aoti_torch_cpu_addmm_out  DIFFERS    {err:<7.6g}  {err / abs(vb):<7.6g}  "
        f"out buf2 [1, 5] {number(va)} vs {number(vb)} (delta {err:.3g})",
        "mlp:1.4  mlp:1.4  cpp_fused_relu_1          identical  0        0        0 (bit for bit)",
        "mlp:1.5  mlp:1.5  aoti_torch_cpu_addmm_out  identical  0        0        0 (bit for bit)",
        "mlp:1.6  mlp:1.6  cpp_fused__softmax_2      identical  0        0        0 (bit for bit)",
        "first bitwise difference: A mlp:1.3 aoti_torch_cpu_addmm_out / B mlp:1.3 aoti_torch_cpu_addmm_out "
        "(out buf2); 2 of the 2 aligned pair(s) before it identical",
        "first divergence: A mlp:1.3 aoti_torch_cpu_addmm_out / B mlp:1.3 aoti_torch_cpu_addmm_out",
        f"  source: {models.line_of('mlp.fc2')}, module fc2",
        "  nodes:  addmm_1",
        f"  out buf2 [1, 5] {number(va)} vs {number(vb)} (delta {err:.3g}), allowed {allowed:.3g}; "
        f"1 of 64 element(s) outside the tolerance, max abs {err:.6g}, max rel {err / abs(vb):.6g}",
        *stats,
    ]
    assert f"{err:.6g}" == "0.25"
    assert re.fullmatch(r"  A out buf2: shape=\(4, 16\) dtype=torch\.float32 min=\S+ max=\S+ mean=\S+ "
                        r"nan_count=0 inf_count=0", stats[0])
    # a tolerance that covers the perturbation: they agree
    assert cli(capsys, "diff", a, b, "--atol", "0.3")[0] == 0


def test_bad_input_is_exit_2(mlp_dumps, tmp_path, capsys):
    (a, _), (b, _) = mlp_dumps
    assert cli(capsys, "diff", a, b, "--run", "2") == (2, "", (
        f"aoti-debug diff: {only_folder(a)}: has no launches of run 2 (runs in this log: 1)\n"))
    assert cli(capsys, "diff", a, str(tmp_path)) == (2, "", (
        f"aoti-debug diff: {tmp_path}: the directory holds no *.log file with records and no dump "
        "folder (manifest.jsonl) (expected *.log files written by aoti-debug, e.g. with "
        "AOTI_DEBUG_LOGDEST=<dir>/debug_%i.log, or the dump directory of a run at AOTI_DEBUG_LOGLEVEL=10)\n"))


def test_element_by_element_rule():
    nan, inf = float("nan"), float("inf")
    def t(values, dtype=torch.float64):
        return torch.tensor(values, dtype=dtype)
    same = closeness.tensors(t([1.0, inf, -inf, nan]), t([1.0, inf, -inf, nan]), 0, 0)
    assert (same.ok, same.max_abs, same.max_rel, same.outside) == (True, 0, 0, 0)
    # the element furthest outside the tolerance is named, not the largest difference
    c = closeness.tensors(t([100.0, 0.001]), t([100.05, 0.002]), 1e-5, 1e-3)
    assert (c.ok, c.outside, c.worst[0], c.worst[1:3]) == (False, 1, (1,), (0.001, 0.002))
    assert (c.max_abs, c.max_rel) == pytest.approx((0.05, 1.0))
    for expected, got in (([1.0, nan], [1.0, 2.0]), ([1.0, inf], [1.0, 5.0]), ([inf], [-inf])):
        c = closeness.tensors(t(expected), t(got), 1e-5, 1e-3)
        assert (c.ok, c.outside, c.worst[3]) == (False, 1, 0.0), (expected, got)
    assert closeness.tensors(t([0.0]), t([1e-9]), 0, 0).max_rel == inf
    assert closeness.tensors(t([1.0]), t([1], torch.int64), 1, 1).reason == \
        "dtype mismatch torch.float64 vs torch.int64"


def test_a_log_against_a_dump_compares_statistics(mlp_dumps, capsys):
    (_, log_a), (b, _) = mlp_dumps
    code, out, _ = cli(capsys, "diff", log_a, b)
    assert code == 0
    assert out.splitlines()[2:] == [
        "A        B        kernel                    status     largest delta",
        *[f"mlp:1.{k}  mlp:1.{k}  {name:<24}  identical  0 (bit for bit)" for k, name in enumerate(MLP_KERNELS, 1)],
        "the model's outputs are only in A (B: its run-end record holds none: a dump does not keep them): "
        "not compared",
        "A and B are identical bit for bit: the outputs of 6 aligned launch(es) have equal content hashes",
    ]


def test_a_dumped_launch_reads_as_its_log_records(mlp_dumps):
    dump_dir, log = mlp_dumps[0]
    dumped, logged = load.read(dump_dir), load.read(log)
    assert [l.title for l in dumped.launches] == [l.title for l in logged.launches]
    for d, g in zip(dumped.launches, logged.launches):
        assert d.origin == g.origin
        for side in ("inputs", "outputs"):
            assert [(i.label, i.value.fields) for i in getattr(d, side)] == \
                   [(i.label, i.value.fields) for i in getattr(g, side)]
            assert all(i.value.dump is not None for i in getattr(d, side))
    first = dumped.launches[0].outputs[0].value
    assert torch.equal(dumps.load_ref(first.dump),
                       torch.load(os.path.join(only_folder(dump_dir), "launch000001_out_buf0.pt")))


def test_python_calls_dump(tmp_path, capsys):
    dump_dir = tmp_path / "dumps"
    run_python(CHAIN.replace("CALL", "total(double(take_log(scale(shift(x), 2.0))))"),
               env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=str(dump_dir),
                             AOTI_DEBUG_LOGDEST=str(tmp_path / "log.txt")))
    folder = only_folder(dump_dir)
    pid = os.path.basename(folder).split("-")[0]
    code, out, _ = cli(capsys, "nan-origin", str(dump_dir))
    assert code == 1
    assert out.splitlines() == [
        f"NaN/Inf origin: call 3 __main__.take_log (pid {pid}, {pid}-calls/manifest.jsonl:5)",
        "  inputs (all finite):",        # a dump keeps the arguments, not the parameter names
        "    arg[0] arg0: shape=(2, 3) dtype=torch.float32 min=-1.500000 max=8.000000 "
        "mean=3.083333 nan_count=0 inf_count=0",
        "  outputs (NaN/Inf):",
        "    output: shape=(2, 3) dtype=torch.float32 min=-inf max=2.079442 mean=-inf "
        "nan_count=1 inf_count=1",
        "2 later calls show NaN/Inf too (victims): call 4 __main__.double, call 5 __main__.total",
    ]


def test_report_of_a_dump_directory(planted_dumps, tmp_path, capsys):
    page = tmp_path / "r.html"
    code, out, _ = cli(capsys, "report", planted_dumps["sqrt"][0], "-o", str(page))
    assert code == 0 and "NaN/Inf origin: planted:1.1" in out
    path, line = models.line_of("planted.sqrt").rsplit(":", 1)
    assert f'href="file://{path}#L{line}">{path}:{line}</a>' in page.read_text()


TORCH_LOADED = """
import sys
from aoti_debug.cli import main
code = main(["nan-origin", {path!r}])
print("exit", code, "torch" in sys.modules)
"""


def test_torch_is_imported_only_to_read_dumped_tensors(planted_dumps):
    dump_dir, log = planted_dumps["sqrt"]
    for path, loaded in ((log, False), (dump_dir, True)):
        proc = run_python(TORCH_LOADED.format(path=path))
        assert proc.stdout.splitlines()[-1] == f"exit 1 {loaded}"


def test_a_run_also_in_a_black_box_dump_is_read_once(mlp_dumps, tmp_path, capsys):
    """Level 10 and a black box dump of the same process hold the same run: read twice, its
    launches would pair with the wrong ends and never finish."""
    (a, _), _ = mlp_dumps
    dump_dir = tmp_path / "d"
    shutil.copytree(a, dump_dir)
    folder = only_folder(str(dump_dir))
    name = os.path.basename(folder)
    box = dump_dir / f"{name.split('-')[0]}-blackbox"
    shutil.copytree(folder, box / name)
    assert cli(capsys, "nan-origin", str(dump_dir)) == (0, (
        "no NaN/Inf in the 6 launches of the log\n"
        f"note: {box / name}: a copy of {folder}, which is read instead (left out)\n"), "")
    # check and replay read the run folders of the directory itself, and name the dump inside it
    box_note = f"{box}: a dump directory inside {dump_dir}, not {{}} ({{}} it on its own)"
    code, out, err = cli(capsys, "check", str(dump_dir))
    assert (code, err) == (0, "note: " + box_note.format("checked", "check") + "\n"), out + err
    code, out, err = cli(capsys, "replay", str(dump_dir), "--trust-dump-code")
    assert (code, out.splitlines()[-1]) == (0, "6 passed, 0 failed"), out + err
    assert err == box_note.format("replayed", "replay") + "\n"
    only = tmp_path / "only"
    shutil.copytree(box, only / box.name)
    assert cli(capsys, "replay", str(only)) == (2, "", (
        f"aoti-debug replay: {only}: no dump folder (no manifest.jsonl in it or its subfolders); the dump "
        f"directories in it: {only / box.name} (give one of them)\n"))


def test_a_launch_site_may_name_its_module():
    """A dump's `lines` carry the record's `module:` and `output-module:` lines (docs/log-format.md 1.1)."""
    from aoti_debug.analysis import manifest
    check, _ = manifest.SITE_LINES
    assert check("  module: model.vit.layers.1.attention\n  source-line: /srv/m.py:3 nodes=log\n"
                 "  output-source: buf2 /srv/m.py:9\n  output-module: buf2 head\n")
    assert not check("  module: a\n  something else\n")
