"""Down to the op: `aoti-debug check` (analysis/check.py) re-runs every dumped
launch's ops in eager, in its dtype and in float64, on its recorded inputs, and
nan-origin narrows the origin launch to the op that made NaN/Inf (op_origin.py).

The dumps are real level-10 runs, each in a fresh process: `scaled` (a custom op
whose float32 path is off by 2**-10), `mullog` (log on the second line of a fused
kernel) and the mlp shared with test_flight_recorder; the commands run in a fresh
process too, as a user runs them."""

import json
import os
import re
import shutil

import pytest

from aoti_debug.analysis import ops
from aoti_debug.analysis.untrusted import InputError
from conftest import TESTS, clean_env, run_package, run_python
from test_analysis_dumps import LEVEL10, only_folder
from test_flight_recorder import run_model

torch = pytest.importorskip("torch")
models = pytest.importorskip("models")     # tests/models.py


def command(*argv):
    """`aoti-debug ARGV` in a fresh process with tests/ importable: (exit status, stdout, stderr)."""
    proc = run_python(f"""
        import sys
        from aoti_debug.cli import main
        sys.exit(main({list(argv)!r}))
    """, env=clean_env(PYTHONPATH=TESTS), check=False)
    return proc.returncode, proc.stdout, proc.stderr


def check(*argv):
    return command("check", *argv)


def level10_dump(packages, tmp_path_factory, model):
    """The dump directory of one level-10 run of tests/models.py's `model`, in a fresh process."""
    root = tmp_path_factory.mktemp(f"{model}-dump")
    run_package(packages.get(model, **LEVEL10), model, AOTI_DEBUG_LOGLEVEL="10",
                AOTI_DEBUG_DUMP_DIR=str(root / "d"), AOTI_DEBUG_LOGDEST=str(root / "log"))
    return str(root / "d")


@pytest.fixture(scope="module")
def scaled_dump(packages, tmp_path_factory):
    return level10_dump(packages, tmp_path_factory, "scaled")


@pytest.fixture(scope="module")
def mlp_dump(packages, tmp_path_factory):
    root = tmp_path_factory.mktemp("mlp-check")
    run_model(packages.get("mlp", **LEVEL10), root / "d", root / "log", AOTI_DEBUG_LOGLEVEL="10")
    return str(root / "d")


@pytest.fixture(scope="module")
def mullog_dump(packages, tmp_path_factory):
    return level10_dump(packages, tmp_path_factory, "mullog")


@pytest.mark.torch_matrix     # the ops come from Inductor's graph: every release
@pytest.mark.isa_sensitive   # compiled kernels against eager
def test_check_names_the_custom_op_that_is_slightly_wrong(scaled_dump):
    code, out, err = check("--dir", scaled_dump, "--allow-module", "models")
    folder = only_folder(scaled_dump)
    lines = out.splitlines()
    assert code == 1, out + err
    # Inductor's tanh is not ATen's on every vector ISA (AVX-512, or none: max_abs=1.19e-07, the
    # last bit): within tolerance, and a few float32 ULPs of eager at most (values in (0, 2))
    m = re.fullmatch(r"1\.1 cpp_fused_add\w*_tanh_0  ok  max_abs=(\S+) max_rel=(\S+) max_ulp=[\d.]+", lines[0])
    assert m and float(m.group(1)) <= 1e-06 and float(m.group(2)) <= 1e-06, lines[0]
    # the op is as far from float64 as its planted bug: 2**-10 relative, 2**13 float32 ULPs and more
    m = re.fullmatch(r"1\.2 aotid_test\.fast_scale\.default  BEYOND  max_abs=0 max_rel=0 "
                     r"max_ulp=([\d.e+]+) \((buf\d+): 32 of 32 beyond\)", lines[1])
    assert m and 8192 <= float(m.group(1)) <= 16384, lines[1]
    buf = m.group(2)       # Inductor's numbering: buf2 on 2.13, buf1 on 2.15
    assert re.fullmatch(r"1\.3 cpp_fused_exp_sub_1  ok  max_abs=[\d.e+-]+ max_rel=[\d.e+-]+ max_ulp=[\d.]+",
                        lines[2])
    line = models.line_of("scaled.op")
    assert lines[3:6] == ["first launch beyond tolerance: 1.2 aotid_test.fast_scale.default",
                          f"  folder: {folder}",
                          lines[5]]
    assert re.fullmatch(rf"  output {buf} \(holds fast_scale\): 32 of 32 elements beyond atol=[\d.e+-]+ "
                        r"rtol=1e-05 for float32, against float64; max_abs=0 against eager, "
                        r"max_ulp=[\d.e+]+ against float64", lines[5])
    # the worst element: the recorded value is 3 * (1 + 2**-10) times float64's / 3
    m = re.fullmatch(r"  worst at flat index (\d+): recorded ([\d.e+-]+), eager \2, float64 ([\d.e+-]+)", lines[6])
    assert m and float(m.group(2)) / float(m.group(3)) == pytest.approx(1 + 2.0 ** -10, rel=1e-6)
    assert lines[7:] == [f"  ops: aotid_test.fast_scale ({line})", f"  source: {line}",
                         "3 launch(es): 2 within tolerance, 1 beyond, 0 not checkable"]


def test_an_unregistered_custom_op_is_not_checkable_and_not_a_failure(scaled_dump):
    code, out, err = check(scaled_dump)
    assert code == 0, out + err
    assert re.fullmatch(   # Inductor's numbering: buf2 on 2.13, buf1 on 2.15
        r"1\.2 aotid_test\.fast_scale\.default  not checkable: buf\d+: aotid_test\.fast_scale is not "
        r"registered in this process \(load the C\+\+ library that defines it with --library LIB\.so, or "
        r"import the Python module that defines it with --allow-module MODULE\)",
        out.splitlines()[1])
    assert out.splitlines()[-1] == "3 launch(es): 2 within tolerance, 0 beyond, 1 not checkable"


@pytest.mark.torch_matrix     # the ops come from Inductor's graph: every release
@pytest.mark.isa_sensitive   # compiled kernels against eager
def test_a_clean_model_is_within_tolerance_at_every_launch(mlp_dump):
    code, out, err = check(mlp_dump)
    assert code == 0, out + err
    lines = out.splitlines()
    kernels = [line.split()[1] for line in lines[:-1]]
    assert kernels == ["aoti_torch_cpu_addmm_out", "cpp_fused_relu_0", "aoti_torch_cpu_addmm_out",
                       "cpp_fused_relu_1", "aoti_torch_cpu_addmm_out", "cpp_fused__softmax_2"]
    assert all(line.split()[2] == "ok" for line in lines[:-1]), out
    assert lines[-1] == "6 launch(es): 6 within tolerance, 0 beyond, 0 not checkable"


@pytest.fixture(scope="module")
def patches_dumps(packages, tmp_path_factory):
    """Level-10 dumps of models.Patches (dynamic batch, height and width) at a square and
    a wide image: the same artifact, every size from the run's inputs."""
    root = tmp_path_factory.mktemp("patches-dumps")
    pt2 = packages.get("patches", **LEVEL10)
    for shape in ((2, 3, 32, 32), (3, 3, 36, 60)):
        name = "x".join(map(str, shape))
        run_package(pt2, "patches", inputs=f"(torch.randn{shape},)", AOTI_DEBUG_LOGLEVEL="10",
                    AOTI_DEBUG_DUMP_DIR=str(root / name), AOTI_DEBUG_LOGDEST=str(root / f"{name}.log"))
    return {name: str(root / name) for name in ("2x3x32x32", "3x3x36x60")}


@pytest.mark.parametrize("shape", ["2x3x32x32", "3x3x36x60"])
def test_every_launch_of_a_dynamic_model_is_checked(patches_dumps, shape):
    """Each symbol is bound from the run's recorded inputs (a launch whose own tensors
    give only (s23//4) is checked all the same); a buffer the layer norm updates in
    place holds the convolution's value in the convolution's layout (a square image once
    made that a BEYOND of values read in the wrong order); the layout copies of the
    input and weights are checked as clones.  What is left names why: a kernel that
    writes a bias compiled into it reads nothing that was recorded."""
    code, out, err = check(patches_dumps[shape])
    lines = out.splitlines()
    assert code == 0, out + err
    skipped = [line for line in lines[:-1] if "not checkable" in line]
    assert [line.split()[2] for line in lines[:-1]].count("ok") == len(lines) - 1 - len(skipped), out
    assert len(skipped) == 1 and re.fullmatch(r"1\.\d+ cpp_fused_\d+  not checkable: no ops recorded .*", skipped[0]), out
    assert re.fullmatch(r"(\d+) launch\(es\): (\d+) within tolerance, 0 beyond, 1 not checkable", lines[-1]), out
    assert int(lines[-1].split()[0]) >= 10


@pytest.fixture(scope="module")
def convnext_dump(corpus_packages, tmp_path_factory):
    """A level-10 dump of transformers' ConvNeXt (tests/corpus.py: dynamic batch, height and
    width) at sizes other than the example's."""
    root = tmp_path_factory.mktemp("convnext-dump")
    run_package(corpus_packages.get("convnext", **LEVEL10), "convnext",
                inputs="(torch.randn(3, 3, 36, 44, generator=torch.Generator().manual_seed(3)),)",
                AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=str(root / "d"), AOTI_DEBUG_LOGDEST=str(root / "log"))
    return only_folder(str(root / "d"))


@pytest.mark.isa_sensitive   # compiled kernels against eager
def test_every_launch_of_transformers_convnext_is_checked(convnext_dump):
    """Code nobody here wrote, every size dynamic: each launch checked and within tolerance.
    Its layer norms' means of centred values (near zero) are judged at the scale of what
    they summed: at their own, Inductor's summation order put one 2e9 ULPs off."""
    code, out, err = check(convnext_dump)
    lines = out.splitlines()
    assert code == 0, out + err
    assert re.fullmatch(r"(\d+) launch\(es\): \1 within tolerance, 0 beyond, 0 not checkable", lines[-1]), out
    assert int(lines[-1].split()[0]) >= 15, out
    assert [line.split()[2] for line in lines[:-1]] == ["ok"] * (len(lines) - 1), out


def test_a_launch_of_transformers_convnext_is_extracted_with_the_runs_sizes(convnext_dump, tmp_path):
    """The layer norm after the downsampling convolution: its own tensors give (s53//4), not
    s53; the run's recorded inputs give every symbol, as to check."""
    code, out, err = check(convnext_dump)
    norm = next(line.split()[0] for line in out.splitlines() if "_native_layer_norm_permute_view_" in line)
    code, out, err = command("extract", norm, "--dir", convnext_dump, "-o", str(tmp_path / "repro"))
    assert code == 0, out + err
    assert sorted(os.listdir(tmp_path / "repro")) == ["inputs.pt", "recorded.pt", "repro.py"]
    proc = run_python(f"import runpy, sys; sys.argv = ['repro.py', '--skip-compile', '--skip-aoti']; "
                      f"sys.exit(runpy.run_path({str(tmp_path / 'repro' / 'repro.py')!r}, run_name='__main__'))",
                      check=False)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines and all(re.match(r"eager: buf\d+ \(\w+\) matches the recording", line)
                                                  for line in lines), proc.stdout + proc.stderr


def test_transformers_convnext_replays_at_the_runs_sizes(convnext_dump, corpus_packages):
    code, out, err = command("replay", convnext_dump, "--package", corpus_packages.get("convnext", **LEVEL10))
    lines = out.splitlines()
    assert code == 0, out + err
    assert re.fullmatch(r"(\d+) passed, 0 failed", lines[-1]) and int(lines[-1].split()[0]) >= 15, out
    assert all(line.startswith("PASS launch convnext:1.") for line in lines[:-1]), out


@pytest.fixture(scope="module")
def qwen2moe_dump(corpus_packages, tmp_path_factory):
    """A level-10 dump of transformers' Qwen2-MoE (tests/corpus.py: 4 experts, top 2, dynamic
    batch and sequence) at sizes other than the example's."""
    root = tmp_path_factory.mktemp("qwen2moe-dump")
    pt2 = corpus_packages.get("qwen2moe", **LEVEL10)
    run_python(f"""
        import torch, transformers.integrations.moe   # registers transformers::grouped_mm_fallback
        m = torch._inductor.aoti_load_package({pt2!r})
        ids = torch.randint(0, 128, (3, 12), generator=torch.Generator().manual_seed(3))
        m(ids, torch.ones(3, 12, dtype=torch.int64))
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_DUMP_DIR=str(root / "d"),
                       AOTI_DEBUG_LOGDEST=str(root / "log"), HF_HUB_OFFLINE="1"))
    return only_folder(str(root / "d"))


def test_every_launch_of_transformers_qwen2moe_is_checked_but_its_scatter(qwen2moe_dump):
    """The router's histogram and its dispatch are re-run; the tokens a fused kernel
    gathers for the experts' custom op (beside a transpose of their weights) are that
    kernel's value; transformers' custom op runs as the user's code (--allow-module).
    What is left says why: a scatter into memory nobody wrote before it."""
    code, out, err = check("--allow-module", "transformers.integrations.moe", qwen2moe_dump)
    lines = out.splitlines()
    assert code == 0, out + err
    skipped = [line for line in lines[:-1] if "not checkable" in line]
    assert [line.split()[2] for line in lines[:-1] if line not in skipped] == ["ok"] * (len(lines) - 1 - len(skipped))
    assert len(skipped) == 2, out
    for line in skipped:
        assert re.fullmatch(r"1\.\d+ cpp_fused_arange_index_put_\d+  not checkable: buf\d+: empty(_\d+)? is memory that "
                            r"aten\.empty\.memory_format allocated and nobody wrote before this launch updates "
                            r"it in place: what it leaves unwritten has no value to re-run", line), line
    assert re.fullmatch(r"(\d+) launch\(es\): (\d+) within tolerance, 0 beyond, 2 not checkable", lines[-1]), out
    assert int(lines[-1].split()[0]) >= 50, out


@pytest.mark.isa_sensitive   # compiled kernels against eager
def test_one_recorded_element_off_by_a_thousandth_is_found(mlp_dump, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(only_folder(mlp_dump), folder)
    # the relu's output (the launch also copies a bias, which no op of it computes)
    name = sorted(f for f in os.listdir(folder) if f.startswith("launch000004_out_"))[0]
    t = torch.load(folder / name, weights_only=True)
    flat = t.reshape(-1)
    i = int(flat.abs().argmax())
    flat[i] = flat[i] * 1.001
    torch.save(t, folder / name)
    code, out, err = check(str(folder))
    assert code == 1, out + err
    lines = out.splitlines()
    # the bias copied into a buffer is said to be left out, never dropped silently
    assert re.fullmatch(r"1\.4 cpp_fused_relu_1  BEYOND  max_abs=[\d.e-]+ max_rel=0\.001 max_ulp=[\d.e+]+ "
                        r"\(buf\d+: 1 of 64 beyond\); not compared: buf\d+ \(no op of this launch computes fc3_bias\)",
                        lines[3]), lines[3]
    assert lines[6] == "first launch beyond tolerance: 1.4 cpp_fused_relu_1"
    assert re.match(rf"  worst at flat index {i}: recorded ", lines[9]), lines[9]
    assert re.fullmatch(r"  ops: aten\.relu \(.*models\.py:\d+\)", lines[10]), lines[10]
    assert lines[-1] == "6 launch(es): 5 within tolerance, 1 beyond, 0 not checkable"


@pytest.mark.torch_matrix     # the ops come from Inductor's graph: every release
@pytest.mark.isa_sensitive   # compiled kernels against eager
def test_nan_origin_narrows_a_fused_kernel_to_the_op_on_its_second_line(mullog_dump):
    code, out, err = command("nan-origin", "--rerun-ops", mullog_dump)
    assert code == 1, out + err
    lines = out.splitlines()
    assert re.fullmatch(r"NaN/Inf origin: launch mullog:1\.4 cpp_fused_\w+ \(pid \d+, \d+-mullog-run1/manifest\.jsonl:\d+\)",
                        lines[0]), lines[0]
    line = models.line_of("mullog.log")
    assert lines[1:4] == [f"  source: {line}", "  nodes:  mul, sub, log", f"  op:     aten.log ({line})"]
    # the kernel's NaN is eager's too: check finds every launch within tolerance
    code, out, err = check(mullog_dump)
    assert (code, out.splitlines()[-1]) == (0, "4 launch(es): 4 within tolerance, 0 beyond, 0 not checkable"), out


@pytest.mark.isa_sensitive   # compiled kernels against eager
def test_an_extracted_launch_reproduces_the_nan_in_a_fresh_process_without_aoti_debug(
        mullog_dump, packages, tmp_path):
    out_dir = tmp_path / "repro"
    code, out, err = command("extract", "1.4", "--dir", mullog_dump, "-o", str(out_dir),
                             "--package", packages.get("mullog", **LEVEL10))
    assert (code, err) == (0, ""), out + err
    assert sorted(os.listdir(out_dir)) == ["inputs.pt", "kernel.cpp", "recorded.pt", "repro.py"]
    assert out.splitlines()[-1] == f"run it: python {out_dir / 'repro.py'}"
    # the data loads without pickled code, and the kernel is the compiled one
    inputs = torch.load(out_dir / "inputs.pt", weights_only=True)
    recorded = torch.load(out_dir / "recorded.pt", weights_only=True)
    (name,) = recorded
    assert list(inputs) == [name] and torch.isnan(recorded[name]).any()
    kernel = (out_dir / "kernel.cpp").read_text()
    assert re.match(r'extern "C"\s+void\s+cpp_fused_\w+\(', kernel) and kernel.rstrip().endswith("}")
    script = (out_dir / "repro.py").read_text()
    assert "aoti_debug" not in script
    line = models.line_of("mullog.log")
    assert f"torch.ops.aten.log.default(v_sub)  # {line!r}" in script
    # run alone, with aoti_debug made unimportable, from another folder
    proc = run_python(f"""
        import runpy, sys
        sys.modules["aoti_debug"] = None
        sys.argv = [{str(out_dir / 'repro.py')!r}]
        runpy.run_path(sys.argv[0], run_name="__main__")
    """, env=clean_env(), cwd=str(tmp_path), check=False, timeout=600)
    n = int(torch.isnan(recorded[name]).sum())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [re.sub(r"max abs error [^,\s]+", "max abs error E", l) for l in lines] == [
        f"{way}: {name} (log) matches the recording: max abs error E, NaN/Inf at the same {n} place(s) as recorded"
        for way in ("eager", "torch.compile", "AOTI")], proc.stdout


@pytest.mark.parametrize("argv, says", [
    (["1.9", "--dir", "{D}"], "{D}: no dumped launch 1.9"),
    (["x; rm", "--dir", "{D}"], "launch 'x; rm': expected a launch id M:R.K or R.K as the log, nan-origin and "
                                "the manifest write it (e.g. ranker:1.4 or 1.4)"),
    (["other:1.3", "--dir", "{D}"], "{D}: no dumped launch other:1.3"),
    (["1.3", "--dir", "{D}", "--package", "{D}/manifest.jsonl"],
     "--package {D}/manifest.jsonl: cannot be read as a .pt2 package (File is not a zip file)"),
], ids=["no-launch", "bad-id", "other-instance", "bad-package"])
def test_extract_refuses_bad_arguments(mlp_dump, tmp_path, capsys, argv, says):
    from aoti_debug.cli import main
    folder = only_folder(mlp_dump)
    assert main(["extract", *[a.format(D=folder) for a in argv], "-o", str(tmp_path / "o")]) == 2
    assert capsys.readouterr() == ("", f"aoti-debug extract: {says.format(D=folder)}\n")
    assert not (tmp_path / "o").exists()


def test_extract_finds_a_launch_by_the_id_the_log_gives_it(mlp_dump):
    """nan-origin and the log name a launch M:R.K; the run folder's manifest writes R.K."""
    from aoti_debug.analysis import extract
    folder = only_folder(mlp_dump)
    model = next(json.loads(line)["model"] for line in open(os.path.join(folder, "manifest.jsonl"))
                 if json.loads(line).get("event") == "run")
    assert extract.find(folder, f"{model}:1.3") == extract.find(folder, "1.3")
    assert extract.find(folder, "1.3")[1]["id"] == "1.3"


def doctored(mlp_dump, tmp_path, change):
    """A copy of the mlp run folder whose first `before` line `change` rewrites."""
    folder = tmp_path / "run"
    shutil.copytree(only_folder(mlp_dump), folder)
    path = folder / "manifest.jsonl"
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines):
        entry = json.loads(line)
        if entry.get("kind") == "launch" and entry["event"] == "before" and "ops" in entry:
            change(entry)
            lines[n] = json.dumps(entry)
            path.write_text("\n".join(lines) + "\n")
            return str(folder), n + 1
    raise AssertionError("no launch with ops")


def in_process(capsys, *argv):
    """`aoti-debug ARGV` in this process (crafted dumps: nothing to isolate): (status, stdout, stderr)."""
    from aoti_debug.cli import main
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ops_naming_anything_but_a_torch_op_are_not_run(mlp_dump, tmp_path, capsys):
    def to_system(entry):
        entry["ops"][-1]["op"] = "os.system"
        entry["ops"][-1]["args"] = ["touch " + str(tmp_path / "ran")]
    folder, _ = doctored(mlp_dump, tmp_path, to_system)
    code, out, err = in_process(capsys, "check", folder)
    assert not (tmp_path / "ran").exists()
    assert code == 0, out + err
    assert "not checkable" in out.splitlines()[0] and "os.system" in out.splitlines()[0], out


def test_a_run_mostly_not_checkable_is_not_a_clean_verdict(mlp_dump, tmp_path, capsys):
    """Four of the mlp's six launches without their ops: nothing beyond tolerance, but the
    check judged a third of the run, so it says so and exits 4, never 0."""
    folder = tmp_path / "mostly"
    shutil.copytree(only_folder(mlp_dump), folder)
    path = folder / "manifest.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    for e in entries:
        if e.get("kind") == "launch" and e["index"] <= 4:
            e.pop("ops", None)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    code, out, err = in_process(capsys, "check", str(folder))
    assert (code, err) == (4, ""), out + err
    assert out.splitlines()[-2:] == [
        "6 launch(es): 2 within tolerance, 0 beyond, 4 not checkable",
        "not a verdict: 4 of 6 launches could not be checked (each line above says why)"]


@pytest.mark.parametrize("change, says", [
    (lambda e: e.update(ops={"node": "x"}), 'field \'ops\' is {"node": "x"} (expected a list of ops)'),
    (lambda e: e["ops"][0].update(node="a b"), "field 'ops[0]': 'node' is 'a b' (expected a new FX node name)"),
    (lambda e: e["ops"][0].update(holds="buf0"), "field 'ops[0]': 'holds' is not a list of buffer names"),
    (lambda e: e["ops"][0].update(args=[{"eval": "1"}]), "field 'ops[0]': argument {'eval': '1'} is not one the codegen writes"),
], ids=["not-a-list", "bad-node", "bad-holds", "unknown-tag"])
def test_a_doctored_ops_field_is_refused_naming_the_line(mlp_dump, tmp_path, capsys, change, says):
    folder, number = doctored(mlp_dump, tmp_path, change)
    code, out, err = in_process(capsys, "check", folder)
    assert (code, out) == (2, "")
    assert err == f"aoti-debug check: {os.path.join(folder, 'manifest.jsonl')}:{number}: {says}\n"


@pytest.mark.parametrize("argv, says", [
    (["--atol", "-1", "D"], "--atol -1: a tolerance must be a number >= 0"),
    (["--rtol", "nan", "D"], "--rtol nan: a tolerance must be a number >= 0"),
    (["--allow-module", "no_such_module_here", "D"],
     "--allow-module no_such_module_here: importing it raised ModuleNotFoundError: "
     "No module named 'no_such_module_here'"),
    (["--allow-module", "os;x", "D"], "--allow-module 'os;x': not a module name (e.g. mylib or mylib.ops)"),
    ([], "no dump directory given (expected `aoti-debug check DUMP_DIR`, or --dir DUMP_DIR)"),
    (["MISSING"], "MISSING: not a directory"),
], ids=["atol", "rtol", "module", "module-name", "none", "missing"])
def test_bad_arguments_exit_2_naming_what_is_accepted(mlp_dump, tmp_path, capsys, argv, says):
    from aoti_debug.cli import main
    argv = [mlp_dump if a == "D" else str(tmp_path / a) if a == "MISSING" else a for a in argv]
    says = says.replace("MISSING", str(tmp_path / "MISSING"))
    assert main(["check", *argv]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"aoti-debug check: {says}\n")


# -- the pieces, alone --------------------------------------------------------------

@pytest.mark.parametrize("expr, value", [
    ("4", 4), ("s0", 6), ("2*s0 + 1", 13), ("s0**2", 36), ("(s0 + 1)//2", 3),
    ("FloorDiv(s0, 4)", 1), ("Max(s0, 8)", 8), ("Min(s0, 8) - s1", 3),
])
def test_symbolic_sizes_evaluate(expr, value):
    assert ops.evaluate(expr, {"s0": 6, "s1": 3}) == value


@pytest.mark.parametrize("expr", ["__import__('os')", "s0.__class__", "[1][0]", "lambda: 1", "s9", "'a'"])
def test_symbolic_sizes_refuse_anything_but_arithmetic_on_known_symbols(expr):
    with pytest.raises(ops.NotCheckable):
        ops.evaluate(expr, {"s0": 6})


def test_decode_keeps_what_the_codegen_wrote():
    program = ops.decode([
        {"node": "tanh", "op": "aten.tanh.default", "args": [{"input": "x", "shape": ["4", "s0"]}],
         "kwargs": {}, "own": True, "shape": ["4", "s0"], "dtype": "float32", "line": "m.py:3"},
        {"node": "add", "op": "aten.add.Tensor", "args": [{"node": "tanh"}, 1], "kwargs": {},
         "own": True, "line": "m.py:3", "holds": ["buf0"]},
    ], "where")
    assert [(op.node, op.short, op.inputs(), op.holds) for op in program.ops] == [
        ("tanh", "aten.tanh", [], []), ("add", "aten.add", ["tanh"], ["buf0"])]
    with pytest.raises(InputError, match=r"^where: field 'ops\[1\]': 'node' is 'tanh' \(expected a new FX node name\)$"):
        ops.decode([{"node": "tanh", "op": "aten.tanh.default"}] * 2, "where")


def test_an_output_without_a_float64_run_is_judged_against_eager_and_says_so():
    """When the float64 re-run cannot compute an output, eager is the reference, and no line
    calls it float64."""
    import torch
    from aoti_debug.analysis import check as checkmod
    out = checkmod.Output("buf1", "mul")
    got = torch.tensor([1.0, 2.0, 3.5])
    checkmod.judge(out, got, torch.tensor([1.0, 2.0, 3.0]), None, False, None, None,
                   "the float64 run: mylib.mul raised TypeError: float64 is not supported")
    assert (out.against, out.outside, out.tolerance) == ("eager", 1, "atol=3e-05 rtol=1e-05 for float32, against eager")
    assert out.worst == "worst at flat index 2: recorded 3.5, eager 3"
    launch = checkmod.Launch("1.2", "mylib.mul.default", "", "d", 3, None, outputs=[out])
    assert launch.line_text() == (
        "1.2 mylib.mul.default  BEYOND  max_abs=0.5 max_rel=0.167 max_ulp=2.1e+06 (buf1: 1 of 3 beyond); "
        "against eager, not float64: buf1 (the float64 run: mylib.mul raised TypeError: float64 is not supported)")


def test_an_fp8_output_is_judged_at_one_step_of_its_format():
    """A quantisation one step of float8_e4m3fn apart from eager's (1.5 against 1.625) is
    the format's rounding, not a finding; a sign lost is beyond it."""
    import torch
    from aoti_debug.analysis import check as checkmod
    eager = torch.tensor([1.5, 2.0, 3.0]).to(torch.float8_e4m3fn)
    for got, outside in (([1.625, 2.0, 3.0], 0), ([1.5, 2.0, -3.0], 1)):
        out = checkmod.Output("buf0", "to_1")
        checkmod.judge(out, torch.tensor(got).to(torch.float8_e4m3fn), eager, None, False, None, None,
                       "no float64 run")
        assert (out.outside, out.tolerance) == (
            outside, "atol=0.375 rtol=0.125 for float8_e4m3fn, against eager"), got
    assert out.worst == "worst at flat index 2: recorded -3, eager 3"


# -- attention: random only through dropout -------------------------------------------

SDPA = "aten._scaled_dot_product_flash_attention_for_cpu.default"


def attention_dump(root, sdpa_args, perturb=0.0):
    """A level-10 run folder of one attention launch as the codegen records it (the op
    reads its query, key and value; dropout_p is left at its default unless `sdpa_args`
    gives it), its recorded output eager's (without dropout) plus `perturb` at element 5."""
    folder = os.path.join(root, "4242-model-run1")
    os.makedirs(folder)
    gen = torch.Generator().manual_seed(0)
    qkv = {n: torch.randn(2, 2, 4, 8, generator=gen) for n in ("q", "k", "v")}
    out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*qkv.values(), 0.0, *sdpa_args[1:2])[0].clone()
    out.view(-1)[5] += perturb
    files = [{"name": n, "role": "in", "file": f"launch000001_in_{n}.pt"} for n in qkv]
    for f in files:
        torch.save(qkv[f["name"]], os.path.join(folder, f["file"]))
    torch.save(out, os.path.join(folder, "launch000001_out_buf2.pt"))
    shape = ["2", "2", "4", "8"]
    ops_ = [{"node": "sdpa", "op": SDPA, "own": True, "line": "m.py:8", "kwargs": {},
             "args": [{"input": n, "shape": shape} for n in qkv] + sdpa_args},
            {"node": "getitem_3", "op": "getitem", "args": [{"node": "sdpa"}, 0], "kwargs": {}, "own": False,
             "shape": shape, "dtype": "float32", "line": "m.py:8"}]
    base = {"kind": "launch", "run": 1, "index": 1, "id": "1.1", "source": "m.py:8", "bytes": 0,
            "kernel": "aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu",
            "nodes": "_scaled_dot_product_flash_attention_for_cpu"}
    lines = [{"event": "run", "status": "ok", "kind": "run", "run": 1, "model": "model", "pid": 4242,
              "inputs": [], "files": [], "bytes": 0, "time": 1000.0},
             {**base, "event": "before", "status": "running", "time": 1001.0, "ops": ops_,
              "lines": "  holds: buf2=getitem_3\n", "files": files},
             {**base, "event": "after", "status": "ok", "time": 1001.5,
              "files": [{"name": "buf2", "role": "out", "file": "launch000001_out_buf2.pt"}]},
             {"event": "run-end", "status": "ok", "kind": "run-end", "run": 1, "model": "model",
              "launches": 1, "files": [], "bytes": 0, "time": 1002.0}]
    with open(os.path.join(folder, "manifest.jsonl"), "w") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    return root


KERNEL = "1.1 aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu"


@pytest.mark.parametrize("sdpa_args", [[], [0.0], [0, True]], ids=["default", "zero", "zero-causal"])
def test_attention_without_dropout_is_re_run_and_compared(tmp_path, capsys, sdpa_args):
    """dropout_p left at its default (as Inductor records it) or 0: the launch is re-run, and
    its recorded output judged against the recomputed one."""
    code, out, err = in_process(capsys, "check", attention_dump(str(tmp_path / "ok"), sdpa_args))
    assert code == 0, out + err
    line, summary = out.splitlines()
    assert re.fullmatch(rf"{KERNEL}  ok  max_abs=[\d.e-]+ max_rel=[\d.e-]+ max_ulp=[\d.]+", line), out
    assert summary == "1 launch(es): 1 within tolerance, 0 beyond, 0 not checkable"
    # one element off by a thousandth: found, so the output really was compared
    code, out, err = in_process(capsys, "check", attention_dump(str(tmp_path / "off"), sdpa_args, 1e-3))
    assert code == 1, out + err
    assert re.fullmatch(rf"{KERNEL}  BEYOND  max_abs=0\.001 max_rel=[\d.e-]+ max_ulp=[\d.e+]+ "
                        r"\(buf2: 1 of 128 beyond\)", out.splitlines()[0]), out
    assert "worst at flat index 5: recorded " in out


def test_attention_with_dropout_is_not_re_run_and_says_which_argument(tmp_path, capsys):
    code, out, err = in_process(capsys, "check", attention_dump(str(tmp_path / "d"), [0.1]))
    assert (code, err) == (4, "")      # the run's one launch unjudged: not a clean verdict
    assert out.splitlines() == [
        f"{KERNEL}  not checkable: buf2: aten._scaled_dot_product_flash_attention_for_cpu is not re-run: "
        "it draws random numbers (dropout_p=0.1; re-run only when dropout_p=0)",
        "1 launch(es): 0 within tolerance, 0 beyond, 1 not checkable",
        "not a verdict: 1 of 1 launches could not be checked (each line above says why)"]


@pytest.mark.parametrize("op, args, kwargs, says", [
    ("native_dropout.default", ["X", 0.0, True], {}, ""),
    ("native_dropout.default", ["X", 0.5, False], {}, ""),
    ("native_dropout.default", ["X", 0.5, None], {},
     "draws random numbers (p=0.5, train=None; re-run only when p=0 or train=False)"),
    ("dropout.default", ["X", 0.2], {"train": False}, ""),
    ("dropout.default", ["X", 0.2, True], {},
     "draws random numbers (p=0.2, train=True; re-run only when p=0 or train=False)"),
    ("scaled_dot_product_attention.default", ["X", "X", "X"], {"dropout_p": 0.0}, ""),
    ("scaled_dot_product_attention.default", ["X", "X", "X", None, {"sym": "s0"}], {},
     "draws random numbers (dropout_p=<not a recorded constant>; re-run only when dropout_p=0)"),
    ("_scaled_dot_product_efficient_attention.default", ["X", "X", "X", None, False], {"dropout_p": {"float": "nan"}},
     "draws random numbers (dropout_p=nan; re-run only when dropout_p=0)"),
    ("lstm.input", ["X", ["X"], ["X"], True, 2, 0.0, True, False, True], {}, ""),
    ("bernoulli.p", ["X", 0.0], {}, "draws random numbers"),       # random by more than dropout
    ("_fused_dropout.default", ["X", 0.0], {}, "draws random numbers"),   # its p keeps, not drops
], ids=["native-p0", "native-eval", "native-train-none", "dropout-eval", "dropout-train", "sdpa-kw0",
        "sdpa-sym", "efficient-nan", "lstm-p0", "bernoulli", "fused-dropout"])
def test_dropout_is_judged_by_the_recorded_arguments(op, args, kwargs, says):
    fn = getattr(getattr(torch.ops.aten, op.split(".")[0]), op.split(".")[1])
    node = {"node": "x"}
    args = [node if a == "X" else [node] if a == ["X"] else a for a in args]
    assert ops.refusal(fn, (args, kwargs)) == says
    assert ops.refusal(fn) == "draws random numbers"      # the arguments unknown (replay)


# -- views of one buffer, placed by where each starts ---------------------------

@pytest.fixture(scope="module")
def fused_qkv_dump(packages, tmp_path_factory):
    return level10_dump(packages, tmp_path_factory, "attention")


SDPA_KERNEL = "aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu"


def test_attention_handed_q_k_v_as_views_of_one_projection_is_checked(fused_qkv_dump):
    """q, k and v are three views of the projection's buffer, alike in shape and strides:
    each is placed by its storage offset, so attention is re-run on the views it was handed."""
    code, out, err = check(fused_qkv_dump)
    assert (code, err) == (0, ""), out + err
    lines = out.splitlines()
    assert re.fullmatch(r"1\.2 " + SDPA_KERNEL + r"  ok  max_abs=\S+ max_rel=\S+ max_ulp=\S+; not compared: buf3 "
                        r"\(the records do not say which op's value it holds\)", lines[1]), out
    assert lines[-1] == "2 launch(es): 2 within tolerance, 0 beyond, 0 not checkable"


def test_a_changed_k_view_is_found_so_the_views_are_the_ones_used(fused_qkv_dump, tmp_path):
    copy = tmp_path / "d"
    shutil.copytree(fused_qkv_dump, copy)
    (k,) = (tmp_path / "d").glob("*/launch000002_in_buf0_view2.pt")
    t = torch.load(k, weights_only=True)
    t[0, 0, 0, 0] += 4.0
    torch.save(t, k)
    code, out, err = check(str(copy))
    assert code == 1, out + err
    assert out.splitlines()[1].startswith(f"1.2 {SDPA_KERNEL}  BEYOND"), out


def test_a_placed_view_is_taken_only_with_its_strides():
    op = ops.Op("getitem", "getitem", [], {}, False, shape=["2", "3"], same_as="v", stride=["1", "2"])
    same = torch.arange(6.0).view(3, 2).t()            # shape (2, 3), strides (1, 2)
    assert ops.handed_view(op, {"v": same}, {}) is same
    assert ops.handed_view(op, {"v": same.contiguous()}, {}) is None   # same shape, other strides
    unplaced = ops.Op("getitem", "getitem", [], {}, False, shape=["2", "3"], same_as="v")
    assert ops.handed_view(unplaced, {"v": same.contiguous()}, {}) is not None


def test_a_finding_of_check_names_the_layer_beside_the_line():
    from aoti_debug.analysis import check as checkmod
    # the manifest's `before` line of a launch in the second of three layers that share a line,
    # fusing an op of another line (its output-source) from the model's top level
    before = {"id": "1.4", "kernel": "cpp_fused_add_tanh_2", "nodes": "addmm_1,tanh_1,add_1",
              "source": "/m/encoder.py:29",
              "lines": "  module: layers.1.fc\n  source-line: /m/encoder.py:29 nodes=addmm_1,tanh_1\n"
                       "  source-line: /m/encoder.py:40 nodes=add_1\n"
                       "  output-source: buf6 /m/encoder.py:40\n  holds: buf5=tanh_1 buf6=add_1\n"}
    launch = checkmod.Launch("1.4", before["kernel"], before["source"], "/d", 3, None,
                             origin=checkmod.origin_of(before))
    assert launch.where("buf5") == "/m/encoder.py:29, module layers.1.fc"
    assert launch.where("buf6") == "/m/encoder.py:40"          # another line: never the launch's module
    assert checkmod.origin_of(before).holds == {"buf5": "tanh_1", "buf6": "add_1"}
    # a manifest without lines (a launch compiled with none) names the line alone
    bare = dict(before, lines="")
    assert checkmod.Launch("1.4", "k", bare["source"], "/d", 3, None,
                           origin=checkmod.origin_of(bare)).where("buf5") == "/m/encoder.py:29"
