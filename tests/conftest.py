import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from aoti_debug.settings import ALL_NAMES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    """, env=clean_env(TORCHINDUCTOR_CACHE_DIR=cache, **compile_env), timeout=600)


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
