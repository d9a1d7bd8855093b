"""aoti-debug-run: the C++ runner for .pt2 packages, its CMake package, and
the Python side that builds and drives it.

The runner is built once per session (about 20 s) into a fresh cache folder,
by two concurrent builders, and one small package is compiled once (about
15 s); every other test reuses both.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest
import torch

from aoti_debug import runner
from conftest import REPO, clean_env, run_python

# torch_matrix (every tested torch release): the tests marked below, where the
# installed Inductor decides the result; the rest of the file runs on the default one.

slow = pytest.mark.slow

USAGE_LINE = ("usage: aoti-debug-run PACKAGE.pt2 --inputs FILE [--outputs FILE] "
              "[--model-name NAME] [--repeat N] [--library LIB.so ...]")
ACCEPTED = "(accepted: --inputs FILE, --outputs FILE, --model-name NAME, --repeat N, --library LIB.so)"

BUILD = """
    from aoti_debug import runner
    print(runner.build_runner())
"""

# Compiles the test package, saves its inputs, and records what Python's own
# loader returns and raises, for the runner to be compared against.
COMPILE = """
    import os, sys
    os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = "1"   # read once, at the first run
    import torch
    from aoti_debug.runner import save_inputs

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 32)

        def forward(self, x, y, idx):
            return torch.relu(self.lin(x)) + y, (x * 2).sum(dim=1), idx * 3 + 1

    out = sys.argv[1]
    torch.manual_seed(0)
    inputs = (torch.randn(16, 64), torch.randn(16, 32), torch.arange(6).reshape(2, 3))
    ep = torch.export.export(Model().eval(), inputs)
    pt2 = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, "model.pt2"))
    save_inputs(os.path.join(out, "inputs.pt"), inputs)
    model = torch._inductor.aoti_load_package(pt2)
    torch.save(list(model(*inputs)), os.path.join(out, "expected.pt"))

    bad = (torch.randn(4, 64), torch.randn(4, 32), inputs[2])
    save_inputs(os.path.join(out, "bad_shape.pt"), bad)
    try:
        model(*bad)
    except Exception as exc:
        open(os.path.join(out, "python_error.txt"), "w").write(str(exc))
    else:
        raise SystemExit("the wrong-shaped input did not raise under AOTI_RUNTIME_CHECK_INPUTS=1")
"""


@pytest.fixture(scope="session")
def _started(tmp_path_factory):
    """Start the package compile and two runner builders together (they
    mostly use one core each), on an empty runner cache: one builder builds,
    the other waits for it."""
    cache = tmp_path_factory.mktemp("runner_cache")
    out = tmp_path_factory.mktemp("package")

    def start(code, *args, **env):
        return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=clean_env(**env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs = {"compile": start(COMPILE, str(out), TORCHINDUCTOR_CACHE_DIR=str(out / "inductor_cache")),
             "builders": [start(BUILD, AOTI_DEBUG_CACHE_DIR=str(cache)) for _ in range(2)]}
    yield {"cache": cache, "package": out, **procs}
    for p in [procs["compile"], *procs["builders"]]:
        if p.poll() is None:
            p.kill()
        p.communicate()


def finished(proc, what):
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, f"{what} failed:\n{out}\n{err}"
    return out, err


@pytest.fixture(scope="session")
def built(_started):
    results = [finished(p, "build_runner") for p in _started["builders"]]
    exe = pathlib.Path(results[0][0].strip())
    return {"cache": _started["cache"], "exe": exe, "prefix": exe.parent.parent, "results": results}


@pytest.fixture(scope="session")
def package(_started):
    finished(_started["compile"], "compiling the test package")
    return _started["package"]


def run_exe(built, *args, env=None, cwd=None, timeout=300):
    return subprocess.run([str(built["exe"]), *map(str, args)], capture_output=True, text=True,
                          env=clean_env(**(env or {})), cwd=cwd, timeout=timeout)


# ---- building -----------------------------------------------------------------

@slow
def test_concurrent_builders_share_one_build(built):
    (out_a, err_a), (out_b, err_b) = built["results"]
    assert out_a == out_b == f"{built['exe']}\n"
    assert (err_a + err_b).count("aoti-debug: building aoti-debug-run in") == 1
    assert os.access(built["exe"], os.X_OK)
    assert built["prefix"].parent == built["cache"]
    # nothing half-built is left behind: the prefix and its lock file only
    assert sorted(p.name for p in built["cache"].iterdir()) == sorted(
        [built["prefix"].name, built["prefix"].name + ".lock"])


@slow
def test_cli_build_runner_prints_the_path(built):
    proc = run_python("import sys; from aoti_debug.cli import main; sys.exit(main(['build-runner']))",
                      env=clean_env(AOTI_DEBUG_CACHE_DIR=str(built["cache"])))
    path = pathlib.Path(proc.stdout.strip())
    assert proc.stdout.count("\n") == 1
    assert path.name == "aoti-debug-run" and path.is_file()
    assert path.parent.parent.parent == built["cache"]


def test_missing_cmake_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTI_DEBUG_CACHE_DIR", str(tmp_path))
    real_which = shutil.which
    monkeypatch.setattr(runner.shutil, "which", lambda name: None if name == "cmake" else real_which(name))
    with pytest.raises(runner.RunnerBuildError, match=r"cmake was not found on PATH; install CMake >= 3\.18"):
        runner.build_runner()


def test_cpp_runtime_dir_in_a_source_checkout():
    assert runner.cpp_runtime_dir() == pathlib.Path(REPO, "cpp_runtime")


def test_cpp_runtime_dir_in_an_installed_package(tmp_path):
    """setup.py ships cpp_runtime/ as aoti_debug/_cpp_runtime, runner sources included."""
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "-d", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    shipped = tmp_path / "aoti_debug" / "_cpp_runtime"
    for name in ("CMakeLists.txt", "cmake/aoti_debugConfig.cmake.in", "runner/aoti_debug_run.cpp",
                 "include/aoti_debug/config.h"):
        assert (shipped / name).is_file(), name
    found = run_python("import aoti_debug.runner as r; print(r.__file__); print(r.cpp_runtime_dir())",
                       env=clean_env(PYTHONPATH=str(tmp_path)), cwd=tmp_path)
    module_file, where = found.stdout.splitlines()
    assert module_file.startswith(str(tmp_path))
    assert pathlib.Path(where) == shipped


# ---- running --------------------------------------------------------------------

@pytest.mark.torch_matrix
@slow
def test_runner_matches_python_bit_for_bit(built, package, tmp_path):
    proc = run_exe(built, package / "model.pt2", "--inputs", package / "inputs.pt",
                   "--outputs", tmp_path / "out.pt")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    got = runner.load_outputs(tmp_path / "out.pt")
    expected = torch.load(package / "expected.pt")
    assert len(got) == len(expected) == 3
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape and g.stride() == e.stride()
        assert torch.equal(g, e)   # same kernels, same inputs: the same bits

    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"output 0: shape=\(16, 32\) dtype=torch\.float32 device=cpu sum=\S+ nan=0", lines[0])
    assert re.fullmatch(r"output 1: shape=\(16,\) dtype=torch\.float32 device=cpu sum=\S+ nan=0", lines[1])
    assert lines[2] == f"output 2: shape=(2, 3) dtype=torch.int64 device=cpu sum={int(expected[2].sum())}"
    assert re.fullmatch(r"ran 1 time, [0-9.]+ ms per run", lines[3])
    assert lines[4] == f"outputs written to {tmp_path / 'out.pt'}"


@slow
def test_unpacked_package_directory_runs(built, package, tmp_path):
    with zipfile.ZipFile(package / "model.pt2") as z:
        z.extractall(tmp_path / "unpacked")
    proc = run_exe(built, tmp_path / "unpacked", "--inputs", package / "inputs.pt",
                   "--outputs", tmp_path / "out.pt")
    assert proc.returncode == 0, proc.stderr
    for g, e in zip(runner.load_outputs(tmp_path / "out.pt"), torch.load(package / "expected.pt")):
        assert torch.equal(g, e)


@slow
def test_repeat_and_model_name(built, package):
    proc = run_exe(built, package / "model.pt2", "--inputs", package / "inputs.pt",
                   "--repeat=3", "--model-name", "model")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^ran 3 times, [0-9.]+ ms per run$", proc.stdout, re.M)


@slow
def test_run_package_from_python(built, package, tmp_path, monkeypatch):
    monkeypatch.setenv("AOTI_DEBUG_CACHE_DIR", str(built["cache"]))
    inputs = torch.load(package / "inputs.pt")
    proc = runner.run_package(package / "model.pt2", inputs, env=clean_env(),
                              outputs=tmp_path / "out.pt")
    assert proc.returncode == 0, proc.stderr
    for g, e in zip(runner.load_outputs(tmp_path / "out.pt"), torch.load(package / "expected.pt")):
        assert torch.equal(g, e)


@slow
def test_model_exception_text_reaches_stderr(built, package):
    proc = run_exe(built, package / "model.pt2", "--inputs", package / "bad_shape.pt",
                   env={"AOTI_RUNTIME_CHECK_INPUTS": "1"})
    python_text = (package / "python_error.txt").read_text().rstrip("\n")
    assert "unmatched dim value at 0, expected: 16, but got: 4" in python_text
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == f"aoti-debug-run: model run failed: {python_text}"
    assert proc.stdout == ""


@slow
def test_the_input_guard_reports_sizes_that_would_divide_by_zero_and_the_runner_lives(built, packages, tmp_path):
    """models.Patches' relations divide by width//8, 0 at width 6: the guard says the range,
    and the runner exits 1 with it (it once died of SIGFPE, exit 136)."""
    inputs = tmp_path / "narrow.pt"
    runner.save_inputs(inputs, (torch.randn(2, 3, 32, 6),))
    pt2 = packages.get("patches", AOTI_DEBUG_COMPILE="all")
    proc = run_exe(built, pt2, "--inputs", inputs, env={"AOTI_DEBUG_CHECK_INPUTS": "1"})
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.splitlines()[-2:] == [
        "aoti-debug-run: model run failed: aoti-debug: the inputs of model 'patches' do not match what it "
        "was compiled for:", "  img.shape[3] is 6, but this artifact was compiled for 32 <= width <= 64"]


@slow
def test_an_error_inside_the_model_is_said_without_its_backtrace(built, package, tmp_path):
    """A wrong dtype fails in an ATen op called through the C shim: the message reaches
    the runner with the op's C++ backtrace in it, which is not part of the message."""
    inputs = tmp_path / "double.pt"
    runner.save_inputs(inputs, (torch.randn(16, 64, dtype=torch.float64), torch.randn(16, 32),
                                torch.arange(6).reshape(2, 3)))
    proc = run_exe(built, package / "model.pt2", "--inputs", inputs)
    assert (proc.returncode, proc.stdout) == (1, "")
    lines = proc.stderr.splitlines()
    assert lines[-1] == ("aoti-debug-run: model run failed: "
                         "mat1 and mat2 must have the same dtype, but got Double and Float")
    # the line before is AOTI's own ("Error: ... API call failed at ..."); no frame anywhere
    assert not [line for line in lines if line.startswith(("Exception raised from", "frame #"))]


@slow
def test_a_library_named_without_a_slash_is_the_file_in_the_current_directory(built, package, tmp_path):
    """dlopen("libok.so") would search the system's library path, not the current directory."""
    (tmp_path / "ok.c").write_text('#include <unistd.h>\n'
                                   '__attribute__((constructor)) static void loaded(void) {\n'
                                   '  (void)write(2, "libok loaded\\n", 13);\n}\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", "libok.so", "ok.c"], cwd=tmp_path, check=True)
    args = (package / "model.pt2", "--inputs", package / "inputs.pt")
    proc = run_exe(built, *args, "--library", "libok.so", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "libok loaded\n")
    # a name that is no file here is still searched for as dlopen does
    proc = run_exe(built, *args, "--library", "libm.so.6", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "")
    proc = run_exe(built, *args, "--library", "libaoti_debug_no_such.so", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2, "aoti-debug-run: cannot load library: libaoti_debug_no_such.so: "
           "cannot open shared object file: No such file or directory\n")


# (arguments, exit status, the whole of stderr); {pkg} {inputs} {tmp} are filled in
ERRORS = [
    ([], 2, f"bad arguments: missing PACKAGE.pt2 ({USAGE_LINE})"),
    (["{pkg}"], 2, f"bad arguments: missing --inputs FILE ({USAGE_LINE})"),
    (["{pkg}", "--inputs"], 2, "bad arguments: --inputs needs a value"),
    (["{pkg}", "--inputs="], 2, "bad arguments: --inputs needs a non-empty value"),
    (["{pkg}", "--inputs", "{inputs}", "--repeat", "0"], 2,
     "bad arguments: --repeat needs a whole number >= 1, got '0'"),
    (["{pkg}", "--inputs", "{inputs}", "--repeat", "2x"], 2,
     "bad arguments: --repeat needs a whole number >= 1, got '2x'"),
    (["{pkg}", "--inputs", "{inputs}", "--bogus", "x"], 2, f"bad arguments: unknown option '--bogus' {ACCEPTED}"),
    (["{pkg}", "{pkg}", "--inputs", "{inputs}"], 2,
     "bad arguments: unexpected argument '{pkg}' (only one PACKAGE.pt2 is accepted)"),
    (["{tmp}/missing.pt2", "--inputs", "{inputs}"], 2,
     "cannot read package: '{tmp}/missing.pt2': No such file or directory"),
    (["{pkg}", "--inputs", "{tmp}/missing.pt"], 2,
     "cannot read inputs: '{tmp}/missing.pt': No such file or directory"),
    (["{pkg}", "--inputs", "{tmp}/dict.pt"], 2,
     "cannot read inputs: '{tmp}/dict.pt' holds a value of type GenericDict, expected a list or tuple of tensors"),
    (["{pkg}", "--inputs", "{tmp}/int_item.pt"], 2,
     "cannot read inputs: '{tmp}/int_item.pt': item 1 has type Int, expected a tensor"),
    (["{pkg}", "--inputs", "{tmp}"], 2,
     "cannot read inputs: '{tmp}' is a directory, expected a file written by aoti_debug.runner.save_inputs"),
    # a FIFO is refused before it is opened (opening one waits for a writer forever)
    (["{tmp}/fifo", "--inputs", "{inputs}"], 2,
     "cannot read package: '{tmp}/fifo' is a FIFO (named pipe), expected a .pt2 file or a folder it was unpacked into"),
    (["{pkg}", "--inputs", "{tmp}/fifo"], 2,
     "cannot read inputs: '{tmp}/fifo' is a FIFO (named pipe), expected a file written by "
     "aoti_debug.runner.save_inputs"),
    (["{pkg}", "--inputs", "{inputs}", "--outputs", "{tmp}/no/such/dir/out.pt"], 1,
     "cannot write outputs: '{tmp}/no/such/dir/out.pt': No such file or directory"),
]


@slow
@pytest.mark.parametrize("args,status,message", ERRORS, ids=[" ".join(a) or "no-args" for a, _, _ in ERRORS])
def test_errors_exit_status_and_message(built, package, tmp_path, args, status, message):
    torch.save({"x": 1}, tmp_path / "dict.pt")
    torch.save([torch.ones(2), 3], tmp_path / "int_item.pt")
    os.mkfifo(tmp_path / "fifo")
    fill = {"pkg": package / "model.pt2", "inputs": package / "inputs.pt", "tmp": tmp_path}
    proc = run_exe(built, *(a.format(**fill) for a in args), timeout=60)
    assert proc.returncode == status
    assert proc.stderr == f"aoti-debug-run: {message.format(**fill)}\n"
    if status == 2:
        assert proc.stdout == ""


@slow
@pytest.mark.parametrize("form", ["pt2", "folder"])
def test_a_package_whose_compiled_model_is_cut_short_is_refused_before_it_is_loaded(built, package, tmp_path, form):
    """The model's .so cut to 1,000 bytes: dlopen would map it and die of SIGBUS; the runner
    names the file and exits 2 without loading it."""
    cut = tmp_path / "cut.pt2"
    with zipfile.ZipFile(package / "model.pt2") as z, zipfile.ZipFile(cut, "w") as out:
        names = [n for n in z.namelist() if n.endswith(".so")]
        assert len(names) == 1, z.namelist()
        for n in z.namelist():
            out.writestr(n, z.read(n)[:1000] if n.endswith(".so") else z.read(n))
    target = cut
    if form == "folder":
        target = tmp_path / "unpacked"
        zipfile.ZipFile(cut).extractall(target)
    proc = run_exe(built, target, "--inputs", package / "inputs.pt", timeout=60)
    assert proc.returncode == 2, proc.stderr
    record = names[0].split("/", 1)[1]          # the archive's records, without its top folder
    where = (f"'{cut}': its {record}" if form == "pt2" else f"'{target / names[0]}'")
    assert re.fullmatch(rf"aoti-debug-run: cannot read package: {re.escape(where)} has (segment \d+ ending at "
                        r"byte \d+|its section headers past its end), the file has 1000 bytes: it was cut short\n",
                        proc.stderr), proc.stderr
    assert proc.stdout == ""


@slow
def test_unreadable_inputs_and_unloadable_packages(built, package, tmp_path):
    junk = tmp_path / "junk.pt2"
    junk.write_text("not a zip archive\n")
    proc = run_exe(built, package / "model.pt2", "--inputs", junk)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"aoti-debug-run: cannot read inputs: '{junk}' is not a file written "
                                  "by torch.save / aoti_debug.runner.save_inputs (")

    proc = run_exe(built, junk, "--inputs", package / "inputs.pt")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"aoti-debug-run: cannot load package '{junk}': ")
    assert "zip archive" in proc.stderr

    proc = run_exe(built, package / "model.pt2", "--inputs", package / "inputs.pt", "--model-name", "other")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"aoti-debug-run: cannot load package '{package / 'model.pt2'}': "
                                  "Failed to find a generated cpp file or so file for model 'other'")


HELP = USAGE_LINE + """

Runs an AOT Inductor package (a .pt2 file or the directory it was unpacked into) the way
a C++ server does, on inputs written by aoti_debug.runner.save_inputs.
  --inputs FILE      the inputs (torch.save of a list or tuple of tensors)
  --outputs FILE     write the outputs there (a tuple of tensors, for torch.load)
  --model-name NAME  the model in the package (default: model)
  --repeat N         run N times (default: 1) and print the time per run
  --library LIB.so   load a library first, e.g. one that registers custom ops
                     (repeatable); a name without '/' that is a file in the current
                     directory is loaded as that file, other names without '/' are
                     searched for on the system's library path, as dlopen does
exit status: 0 ran, 1 the package or the run failed, 2 bad arguments or input files
"""


@slow
def test_help_exits_zero_when_built(built):
    proc = run_exe(built, "--help")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, HELP, "")


# ---- file format helpers ----------------------------------------------------------

def test_save_inputs_rejects_non_tensors(tmp_path):
    with pytest.raises(TypeError, match=r"save_inputs: input 1 is a int; only tensors can be passed"):
        runner.save_inputs(tmp_path / "in.pt", [torch.ones(1), 3])


def test_save_inputs_keeps_strides_and_drops_autograd(tmp_path):
    weight = torch.nn.Parameter(torch.randn(4, 3))
    runner.save_inputs(tmp_path / "in.pt", [weight, torch.randn(3, 4).t()])
    saved = torch.load(tmp_path / "in.pt")
    assert type(saved[0]) is torch.Tensor and not saved[0].requires_grad
    assert saved[1].stride() == (1, 4)


def test_load_outputs_names_what_it_found(tmp_path):
    torch.save({"a": torch.ones(1)}, tmp_path / "out.pt")
    with pytest.raises(ValueError, match=r"expected a tuple of tensors written by aoti-debug-run, found a dict"):
        runner.load_outputs(tmp_path / "out.pt")


# ---- the installed CMake package --------------------------------------------------

def cmake(*args, cwd=None):
    proc = subprocess.run(["cmake", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"cmake {' '.join(map(str, args))}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_headers_only_install_copies_the_whole_include_tree(tmp_path):
    """-DAOTI_DEBUG_BUILD_RUNNER=OFF needs no libtorch and installs every header."""
    src = pathlib.Path(REPO, "cpp_runtime")
    cmake("-S", src, "-B", tmp_path / "build", "-DAOTI_DEBUG_BUILD_RUNNER=OFF")
    cmake("--install", tmp_path / "build", "--prefix", tmp_path / "prefix")

    def tree(root):
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert tree(tmp_path / "prefix" / "include") == tree(src / "include")
    assert not (tmp_path / "prefix" / "bin").exists()
    # the package resolves its include dir relative to where it was installed
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "CMakeLists.txt").write_text(textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.18)
        project(user NONE)
        find_package(aoti_debug REQUIRED)
        get_target_property(dirs aoti_debug::aoti_debug INTERFACE_INCLUDE_DIRECTORIES)
        message(STATUS "include=${dirs} var=${aoti_debug_INCLUDE_DIR}")
        """))
    moved = tmp_path / "moved"
    os.rename(tmp_path / "prefix", moved)
    out = cmake("-S", tmp_path / "user", "-B", tmp_path / "user" / "build", f"-DCMAKE_PREFIX_PATH={moved}").stdout
    assert f"include={moved}/include var={moved}/include" in out


@slow
def test_user_program_builds_against_find_package(built, tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.18)
        project(consumer CXX)
        find_package(aoti_debug REQUIRED)
        add_executable(consumer main.cpp)
        target_link_libraries(consumer PRIVATE aoti_debug::aoti_debug)
        target_compile_definitions(consumer PRIVATE PACKAGE_VERSION="${aoti_debug_VERSION}")
        """))
    (tmp_path / "main.cpp").write_text(textwrap.dedent("""\
        #include <aoti_debug/config.h>
        #include <cstdio>
        int main() { std::printf("%s %s\\n", AOTI_DEBUG_VERSION, PACKAGE_VERSION); }
        """))
    cmake("-S", tmp_path, "-B", tmp_path / "build", f"-DCMAKE_PREFIX_PATH={built['prefix']}")
    cmake("--build", tmp_path / "build")
    out = subprocess.run([str(tmp_path / "build" / "consumer")], capture_output=True, text=True, check=True).stdout
    header_version, package_version = out.split()
    assert header_version == package_version
    assert re.fullmatch(r"\d+\.\d+\.\d+", header_version)


# ---- libtorch: CPU and CUDA builds of torch, with and without a CUDA toolkit ----

CUDA_BUILD = torch.version.cuda is not None
TORCH_PREFIX = torch.utils.cmake_prefix_path
CPU_USE = "aoti_debug: torch is a CUDA build and AOTI_DEBUG_TORCH_CUDA=OFF: building for CPU use"

SERVER_CMAKE = """\
    cmake_minimum_required(VERSION 3.18)
    project(server CXX)
    find_package(aoti_debug REQUIRED)
    aoti_debug_find_torch()
    add_executable(server server.cpp)
    target_link_libraries(server PRIVATE ${TORCH_LIBRARIES} aoti_debug::aoti_debug)
    set_property(TARGET server PROPERTY CXX_STANDARD 17)
    """

# docs/cpp.md's server, on the test package's inputs
SERVER_CPP = """\
    #include <torch/csrc/inductor/aoti_package/model_package_loader.h>
    #include <torch/torch.h>
    #include <aoti_debug/config.h>
    #include <cstdio>

    int main(int argc, char** argv) {
      torch::inductor::AOTIModelPackageLoader loader(argv[1]);
      std::vector<at::Tensor> inputs = {torch::ones({16, 64}), torch::ones({16, 32}),
                                        torch::arange(6).reshape({2, 3})};
      for (const at::Tensor& out : loader.run(inputs))
        std::printf("%s %lld\\n", out.sizes() == at::IntArrayRef({16, 32}) ? "relu" : "other",
                    static_cast<long long>(out.numel()));
      std::printf("aoti_debug %s\\n", AOTI_DEBUG_VERSION);
    }
    """


@pytest.mark.torch_matrix
@slow
def test_server_builds_with_aoti_debug_find_torch_and_runs_a_package(built, package, tmp_path):
    """find_package(aoti_debug) + aoti_debug_find_torch(): with a CUDA build of torch,
    built for CPU use (no CUDA toolkit needed), else plain find_package(Torch)."""
    (tmp_path / "CMakeLists.txt").write_text(textwrap.dedent(SERVER_CMAKE))
    (tmp_path / "server.cpp").write_text(textwrap.dedent(SERVER_CPP))
    mode = ["-DAOTI_DEBUG_TORCH_CUDA=OFF"] if CUDA_BUILD else []
    out = cmake("-S", tmp_path, "-B", tmp_path / "build", *mode,
                f"-DCMAKE_PREFIX_PATH={TORCH_PREFIX};{built['prefix']}").stdout
    assert (CPU_USE in out) == CUDA_BUILD, out
    cmake("--build", tmp_path / "build")
    proc = subprocess.run([str(tmp_path / "build" / "server"), str(package / "model.pt2")],
                          capture_output=True, text=True, env=clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:3] == ["relu 512", "other 16", "other 6"]


@pytest.mark.torch_matrix
def test_a_bad_aoti_debug_torch_cuda_is_named(tmp_path):
    proc = subprocess.run(["cmake", "-S", os.path.join(REPO, "cpp_runtime"), "-B", str(tmp_path / "build"),
                           f"-DCMAKE_PREFIX_PATH={TORCH_PREFIX}", "-DAOTI_DEBUG_TORCH_CUDA=maybe"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "aoti_debug: AOTI_DEBUG_TORCH_CUDA='maybe' is not valid: expected AUTO, ON or OFF" in \
        " ".join(proc.stderr.split())


def _cuda_toolkit():
    """(root, NVRTC library) of an installed CUDA toolkit, or None.  NVRTC, which
    libtorch's config links, may come from torch's own CUDA wheels."""
    import glob
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            break
    else:
        return None
    site = os.path.dirname(os.path.dirname(torch.__file__))
    found = (glob.glob(os.path.join(root, "lib*", "libnvrtc.so*"))
             + glob.glob(os.path.join(root, "targets", "*", "lib", "libnvrtc.so*"))
             + glob.glob(os.path.join(site, "nvidia", "*", "lib", "libnvrtc.so.*")))
    found = [f for f in found if "builtins" not in f]
    return (root, found[0]) if found else None


@pytest.mark.torch_matrix
@slow
@pytest.mark.skipif(not CUDA_BUILD or _cuda_toolkit() is None, reason="a CUDA build of torch and a CUDA toolkit")
def test_runner_builds_with_the_cuda_toolkit_where_there_is_one(tmp_path):
    root, nvrtc = _cuda_toolkit()
    src = os.path.join(REPO, "cpp_runtime")
    out = cmake("-S", src, "-B", tmp_path / "build", f"-DCMAKE_PREFIX_PATH={TORCH_PREFIX}",
                "-DAOTI_DEBUG_TORCH_CUDA=ON", f"-DCUDA_TOOLKIT_ROOT_DIR={root}",
                f"-DCUDA_nvrtc_LIBRARY={nvrtc}").stdout
    assert "building for CPU use" not in out
    assert "PyTorch: CUDA detected" in out         # libtorch's own toolkit search ran and found it
    cmake("--build", tmp_path / "build")
    proc = subprocess.run([str(tmp_path / "build" / "aoti-debug-run"), "--help"], capture_output=True,
                          text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, HELP)
