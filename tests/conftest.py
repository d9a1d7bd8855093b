import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from aoti_debug.settings import ALL_NAMES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# -- which writer the Python runtime records through (AOTID_TEST_WRITER) ------------
#
# The Python runtime (torch.compile's wrapper, log_api) writes its records through
# the compiled core (aoti_debug/native/core.py, a library built into
# $AOTI_DEBUG_CACHE_DIR on first use) or, when that cannot be built, through the
# pure-Python format and writer (runtime/format.py, runtime/sink.py).
# AOTID_TEST_WRITER=python runs a session on the second: AOTI_DEBUG_CACHE_DIR
# names a folder under /dev/null, where nothing can be made, so the core's build
# fails (the product's own fallback, as on a machine without a compiler) in this
# process and in every process the tests start (their environments are this
# one's: clean_env keeps the variable).  The AOTI packages the session compiles
# (compile_model) are built as always, with the core object linked in from the
# cache the session started with: their records are the C++ runtime's.  The
# one warning a process without the core gives on stderr ("aoti-debug: C++
# runtime unavailable", native/core.py: the product's only Python warning) is
# filtered out by PYTHONWARNINGS, so that the tests that compare stderr compare
# what they compare with the core.  python_writer_session checks, once per
# worker, that no process has the core.
# .ci/run runs the `python_writer` tests (pyproject.toml) once more so.
WRITER = os.environ.get("AOTID_TEST_WRITER") or "core"
if WRITER not in ("core", "python"):
    raise RuntimeError(f"AOTID_TEST_WRITER={WRITER!r}: expected 'core' (the default) or 'python'")
NO_CORE_CACHE = "/dev/null/aoti-debug-cache"     # under a device, not a folder: ENOTDIR, even for root
NO_CORE_WARNING = "ignore:aoti-debug:RuntimeWarning"   # a RuntimeWarning whose message starts so
if WRITER == "python":
    # the cache the session started with (pytest-xdist's workers inherit both variables)
    os.environ.setdefault("AOTID_TEST_BUILD_CACHE", os.environ.get("AOTI_DEBUG_CACHE_DIR", ""))
    os.environ["AOTI_DEBUG_CACHE_DIR"] = NO_CORE_CACHE
    if NO_CORE_WARNING not in os.environ.get("PYTHONWARNINGS", "").split(","):
        os.environ["PYTHONWARNINGS"] = ",".join(w for w in (os.environ.get("PYTHONWARNINGS"), NO_CORE_WARNING) if w)

# -- which launch functions torch.compile's wrapper calls (AOTID_TEST_LAUNCH) ---------
#
# The generated wrapper calls launch(run, site, *values) / launch_end(...) around
# each launch (runtime/launches.py): from a model's first run at level >= 1 the
# compiled ones (native/launch_ext.py, a CPython extension built into
# $AOTI_DEBUG_CACHE_DIR beside the core, once per torch release), else, where it
# cannot be built or AOTI_DEBUG_LAUNCH_EXTENSION=0, launches.py's own, which
# write the same records through ctypes.  AOTID_TEST_LAUNCH=ctypes runs a session
# on the second: the variable reaches every process the tests start (clean_env
# keeps it); launch_session checks, once per worker, that no process loads the
# extension, and in the default session that it loads (built here once, before
# any test process looks for it).  .ci/run runs the `launch_path` tests once more so.
LAUNCH = os.environ.get("AOTID_TEST_LAUNCH") or "extension"
if LAUNCH not in ("extension", "ctypes"):
    raise RuntimeError(f"AOTID_TEST_LAUNCH={LAUNCH!r}: expected 'extension' (the default) or 'ctypes'")
if LAUNCH == "ctypes":
    os.environ["AOTI_DEBUG_LAUNCH_EXTENSION"] = "0"

# the functions a model's first run at level 1 gives the generated wrapper
_WHICH_LAUNCH = """
import torch
from aoti_debug.runtime import launches
model = launches.Model("which", 1)
model.begin_run()
print("ctypes" if model.calls == (launches.launch, launches.launch_end) else "extension")
"""


@pytest.fixture(scope="session", autouse=True)
def launch_session():
    """The launch functions the session asked for, in this process and in one it
    starts (with the core: without it, AOTID_TEST_WRITER=python, there is no
    extension either).  The extension is built here, under a lock, so that the
    session's processes find it in the cache instead of building it side by side."""
    if WRITER == "python":
        yield
        return
    import fcntl
    from aoti_debug.native import build, launch_ext
    if LAUNCH == "extension":
        build.cache_dir().mkdir(parents=True, exist_ok=True)
        with open(build.cache_dir() / "aotid_pylaunch.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            launch_ext.build()
    from aoti_debug.runtime import launches
    assert ("extension" if launches._compiled_calls() is not None else "ctypes") == LAUNCH
    assert run_python(_WHICH_LAUNCH, env=clean_env(AOTI_DEBUG_LOGDEST=os.devnull)).stdout.split() == [LAUNCH]
    yield


def build_env(env):
    """`env` (a clean_env) for a process that builds what the C++ runtime runs (an AOTI
    package): the session's own AOTI_DEBUG_CACHE_DIR, whatever AOTID_TEST_WRITER says."""
    if WRITER == "python":
        env = dict(env)
        env.pop("AOTI_DEBUG_CACHE_DIR", None)
        if os.environ.get("AOTID_TEST_BUILD_CACHE"):
            env["AOTI_DEBUG_CACHE_DIR"] = os.environ["AOTID_TEST_BUILD_CACHE"]
    return env


def clean_env(**extra):
    """The test process's environment without any aoti-debug variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ALL_NAMES and k != "AOTI_DEBUG_RUNTIME_REGISTRY"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


# torch's own glog-style warnings (a CUDA build of torch on a machine with a CUDA
# toolkit but no GPU says "No CUDA runtime is found" on importing cpp_extension):
# upstream's words, not ours, so the comparisons of what aoti-debug prints skip them
TORCH_LOG_LINE = re.compile(r"^[IWE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ torch/\S+:\d+\] .*(?:\n|$)", re.M)


def without_torch_logs(text: str) -> str:
    return TORCH_LOG_LINE.sub("", text)


_FORKS = None


def run_python(code, env=None, cwd=None, timeout=300, check=True):
    """Run `code` in a fresh interpreter; returns the CompletedProcess (text mode).
    Code that starts by importing torch is forked from an interpreter that has
    imported it already (tests/forkserver.py)."""
    global _FORKS
    code, env = textwrap.dedent(code), clean_env() if env is None else env
    if _FORKS is None:
        from forkserver import ForkServer
        _FORKS = ForkServer(clean_env())
    if _FORKS.accepts(code, env):
        proc = _FORKS.run(code, env, cwd, timeout)
    else:
        proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


# What a process of the session says its Python runtime writes through.
_WHICH_WRITER = """
from aoti_debug.native import build
from aoti_debug.runtime import sink
print(build.cache_dir(), "core" if sink.native() is not None else "python")
"""


@pytest.fixture(scope="session", autouse=True)
def python_writer_session():
    """Under AOTID_TEST_WRITER=python, the proof that the session's Python runtime
    records went through the pure-Python writer: no compiled core in this process,
    before the tests and after them, nor in a process started fresh or forked
    (run_python) with the tests' environment."""
    if WRITER != "python":
        yield
        return
    import warnings
    from aoti_debug.native import core
    from aoti_debug.runtime import sink

    def here():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)    # "C++ runtime unavailable", once
            assert sink.native() is None and core.lib() is None, "the compiled core was loaded"
    here()
    said = [run_python(code).stdout.split() for code in (_WHICH_WRITER, "import torch\n" + _WHICH_WRITER)]
    assert said == [[NO_CORE_CACHE, "python"]] * 2, said
    yield
    here()


def two_refused_compiles(tmp_path, **env):
    """A process that asks to compile twice and is refused by torch both times (nothing
    compiles): what aoti-debug says at the first compile, and only there, is on its stderr."""
    return run_python("""
        import torch
        for _ in range(2):
            try:
                torch._inductor.aoti_compile_and_package(None)
            except ValueError:
                pass
        """, env=clean_env(**env), cwd=tmp_path)


BANNER = re.compile(r"^={80}\n\[[^\n]*\] aoti-debug - System Information\n={80}\n(?:[^\n]*\n)*?={80}\n", re.M)


def banners(text):
    return BANNER.findall(text)


def records(text):
    """Split log text into records (header line + body lines), banners dropped."""
    out = []
    for line in BANNER.sub("", text).splitlines(keepends=True):
        if line.startswith("[") or not out:
            out.append(line)
        else:
            out[-1] += line
    return out


@pytest.fixture
def tmp_log(tmp_path):
    return tmp_path / "log.txt"


TESTS = os.path.dirname(os.path.abspath(__file__))


def shared_dir(tmp_path_factory, name):
    """A folder of this test run that every pytest-xdist worker of the run sees (each
    worker's own base folder lies inside the run's), or the folder AOTID_TEST_SHARED
    names, for pytest processes that run side by side on one torch and one vector ISA
    (.ci/run splits the suite so): what is built there is built once."""
    base = tmp_path_factory.getbasetemp()
    given = os.environ.get("AOTID_TEST_SHARED")
    root = (pathlib.Path(given) if given else
            base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
    path = root / f"shared-{name}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def built_once(path, build):
    """`build()` run by one worker only: the others wait on the lock, then find `path`
    (a file `build` writes; it is written last, so it exists only when whole)."""
    import fcntl
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path):
            build()
    return str(path)


@pytest.fixture(scope="session")
def aoti_cache(tmp_path_factory):
    """One Inductor cache for the run: kernels compiled once are reused (Inductor writes
    its cache entries atomically, so the workers share it)."""
    return str(shared_dir(tmp_path_factory, "inductor-cache"))


class Packages:
    """AOTI packages compiled once per test run, keyed by model and compile-time
    variables, shared by the run's workers."""

    def __init__(self, root, cache, module="models"):
        self.root, self.cache, self.module = root, cache, module

    def get(self, model, **compile_env):
        import hashlib
        key = repr((self.module, model, sorted(compile_env.items())))
        # <key>/<model>.pt2: records name the model after the package's stem
        out = os.path.join(self.root, hashlib.sha256(key.encode()).hexdigest()[:16], f"{model}.pt2")
        os.makedirs(os.path.dirname(out), exist_ok=True)

        def build():   # whole or absent: a failed compile leaves nothing another worker would take
            part = os.path.join(os.path.dirname(out), "part", os.path.basename(out))
            os.makedirs(os.path.dirname(part), exist_ok=True)
            compile_model(model, part, self.cache, module=self.module, **compile_env)
            os.replace(part, out)
        return built_once(out, build)


def compile_model(model, out, cache, module="models", **compile_env):
    """Compile `model` of tests/models.py (or tests/corpus.py: module="corpus") in a
    fresh process with only `compile_env` set."""
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, {module} as models
        ep = models.export({model!r})
        torch._inductor.aoti_compile_and_package(ep, package_path={out!r})
    """, env=build_env(clean_env(TORCHINDUCTOR_CACHE_DIR=cache, **compile_env)), timeout=600)


@pytest.fixture(scope="session")
def packages(tmp_path_factory, aoti_cache):
    return Packages(str(shared_dir(tmp_path_factory, "packages")), aoti_cache)


def run_package(pt2, model, inputs="models.example({model!r})[1]", check=True, **env):
    """Load and run a package in a fresh process with run-time variables `env`.

    Prints each output's shape, sum and content hash (or the exception text
    after 'RAISED: '); returns
    the CompletedProcess.
    """
    code = f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        m = torch._inductor.aoti_load_package({pt2!r})
        args = {inputs.format(model=model)}
        try:
            outs = m(*args)
        except RuntimeError as exc:
            print("RAISED: " + str(exc), flush=True)
        else:
            import hashlib
            for o in (outs,) if isinstance(outs, torch.Tensor) else outs:
                digest = hashlib.sha256(o.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
                print("OUTPUT", tuple(o.shape), repr(o.double().sum().item()), digest[:16], flush=True)
    """
    return run_python(code, env=clean_env(**env), check=check)


def saved_inputs(tmp_path, expr):
    """Inputs for the C++ runner: tests/models.py's `expr` (e.g. "models.example('mlp')[1]"),
    saved with aoti_debug.runner.save_inputs; returns the file's path."""
    import torch
    from aoti_debug import runner
    sys.path.insert(0, TESTS)
    import models
    path = tmp_path / "inputs.pt"
    runner.save_inputs(path, list(eval(expr, {"models": models, "torch": torch})))
    return str(path)


# What the shared artifacts are compiled with.
FULL = dict(AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_NAN_CHECK="warn:nan", AOTI_DEBUG_CHECK_INPUTS="1")
PLANTED = dict(AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_CHECK_INPUTS="1", AOTI_DEBUG_NAN_CHECK="raise:naninf")
DYNAMIC = dict(AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_CHECK_INPUTS="1", AOTI_DEBUG_NAN_CHECK="raise:nan")


@pytest.fixture(scope="session")
def dynamic_trace(packages):
    """TORCH_TRACE of the dynamic model's instrumented compile (read by test_trace.py)."""
    return os.path.join(packages.root, "trace-dynamic")


@pytest.fixture(scope="session")
def dynamic(packages, dynamic_trace):
    return packages.get("dynamic", TORCH_TRACE=dynamic_trace, **DYNAMIC)


@pytest.fixture(scope="session")
def mylib_so(tmp_path_factory):
    """examples/custom_op built once per session with torch.utils.cpp_extension."""
    build = shared_dir(tmp_path_factory, "mylib")

    def make():
        proc = run_python(f"""
            import sys; sys.path.insert(0, {os.path.join(REPO, 'examples', 'custom_op')!r})
            import mylib
            print(mylib.build({str(build)!r}))
        """, timeout=600)
        with open(build / "built.txt.tmp", "w") as f:
            f.write(proc.stdout.strip().splitlines()[-1])
        os.replace(build / "built.txt.tmp", build / "built.txt")
    with open(built_once(build / "built.txt", make)) as f:
        return f.read()


@pytest.fixture(scope="session")
def membugs_so(mylib_so):
    """examples/custom_op/memory_bugs.cpp (torch.ops.membugs.*), built once per session
    beside mylib (MYLIB_BUILD_DIR of the tutorial finds both)."""
    build = os.path.dirname(mylib_so)

    def make():
        proc = run_python(f"""
            import sys; sys.path.insert(0, {os.path.join(REPO, 'examples', 'custom_op')!r})
            import mylib
            print(mylib.build_memory_bugs({str(build)!r}))
        """, timeout=600)
        with open(os.path.join(build, "membugs.txt.tmp"), "w") as f:
            f.write(proc.stdout.strip().splitlines()[-1])
        os.replace(os.path.join(build, "membugs.txt.tmp"), os.path.join(build, "membugs.txt"))
    with open(built_once(os.path.join(build, "membugs.txt"), make)) as f:
        return f.read()


def raised(proc):
    """The exception text a run_package() run printed."""
    assert "RAISED: " in proc.stdout, proc.stdout + proc.stderr
    return proc.stdout[proc.stdout.index("RAISED: ") + len("RAISED: "):].rstrip("\n")


# -- the transformers corpus (tests/corpus.py) ----------------------------------

@pytest.fixture(scope="session")
def corpus_packages(tmp_path_factory, aoti_cache):
    return Packages(str(shared_dir(tmp_path_factory, "corpus-packages")), aoti_cache, module="corpus")
