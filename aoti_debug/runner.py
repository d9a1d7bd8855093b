"""Build and drive `aoti-debug-run`, the C++ runner for `.pt2` packages.

The runner loads a package with libtorch's `AOTIModelPackageLoader`, exactly
as a C++ server does, so an artifact can be checked outside Python.  It is
built with CMake against the installed torch, once per (sources, torch), into
a cache folder:

    $AOTI_DEBUG_CACHE_DIR/runner-<hash>   (default ~/.cache/aoti_debug/runner-<hash>)

which is an install prefix: `bin/aoti-debug-run`, `include/aoti_debug/`,
`lib/cmake/aoti_debug/` (for `find_package(aoti_debug)`).

Input/output files (docs/cpp.md): inputs are `torch.save(list_of_tensors)`,
which libtorch's `torch::pickle_load` reads; outputs are a tuple of tensors
written by `torch::pickle_save`, which plain `torch.load` reads.  Use
`save_inputs` / `load_outputs` and never think about it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Iterator, List, Mapping, Optional, Sequence, Union

PathLike = Union[str, "os.PathLike[str]"]

RUNNER_NAME = "aoti-debug-run"
CACHE_ENV = "AOTI_DEBUG_CACHE_DIR"
# What the CMake project builds and installs; the rest of cpp_runtime/ (the
# Python extension's sources) does not change the runner.
_BUILD_INPUTS = ("CMakeLists.txt", "cmake", "include", "runner")


class RunnerBuildError(RuntimeError):
    """The C++ runner could not be built: a tool is missing or CMake failed."""


def cpp_runtime_dir() -> pathlib.Path:
    """The CMake project: `<repo>/cpp_runtime` in a source checkout (and an
    editable install), `aoti_debug/_cpp_runtime` in an installed wheel."""
    here = pathlib.Path(__file__).resolve().parent
    candidates = [here.parent / "cpp_runtime", here / "_cpp_runtime"]
    for candidate in candidates:
        if (candidate / "CMakeLists.txt").is_file():
            return candidate
    raise RunnerBuildError("the C++ sources are missing: looked for CMakeLists.txt in "
                           + " and ".join(str(c) for c in candidates)
                           + " (reinstall aoti-debug)")


def cache_root() -> pathlib.Path:
    if os.environ.get(CACHE_ENV):
        return pathlib.Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(xdg) / "aoti_debug"


def _source_files(src: pathlib.Path) -> List[pathlib.Path]:
    files = []
    for name in _BUILD_INPUTS:
        top = src / name
        if top.is_file():
            files.append(top)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            files.extend(pathlib.Path(dirpath, f) for f in sorted(filenames))
    return files


def _build_key(src: pathlib.Path) -> str:
    # Every file is hashed, headers included: they are installed with the
    # runner, so a changed header must give a fresh prefix.
    import torch
    import torch.utils
    h = hashlib.sha256()
    for part in (torch.__version__, torch.utils.cmake_prefix_path, sys.platform):
        h.update(part.encode() + b"\0")
    for path in _source_files(src):
        h.update(path.relative_to(src).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def prefix_dir() -> pathlib.Path:
    """The install prefix for the current sources and torch (built or not)."""
    return cache_root() / f"runner-{_build_key(cpp_runtime_dir())}"


def runner_path() -> pathlib.Path:
    """Where the runner for the current sources and torch lives; it exists
    once `build_runner()` has run."""
    return prefix_dir() / "bin" / RUNNER_NAME


@contextlib.contextmanager
def _locked(lock_path: pathlib.Path) -> Iterator[None]:
    """One builder per prefix at a time, across processes; others wait."""
    try:
        import fcntl
    except ImportError:     # no flock: building to a temp dir + rename still keeps it safe
        yield
        return
    with open(lock_path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_runner(force: bool = False) -> pathlib.Path:
    """Build (once) and return the path of `aoti-debug-run`.

    Safe for concurrent callers: builds are serialized by a lock file, and a
    build is installed to a temporary prefix that is renamed into place only
    when complete, so nobody ever sees a half-built runner.
    """
    src = cpp_runtime_dir()
    prefix = prefix_dir()
    exe = prefix / "bin" / RUNNER_NAME
    if exe.is_file() and not force:
        return exe
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with _locked(prefix.parent / f"{prefix.name}.lock"):
        if exe.is_file() and not force:     # another process built it while we waited
            return exe
        print(f"aoti-debug: building {RUNNER_NAME} in {prefix} (once; 20 s to 90 s measured on 2 cores)", file=sys.stderr)
        start = time.monotonic()
        work = pathlib.Path(tempfile.mkdtemp(prefix=f"{prefix.name}.tmp-", dir=prefix.parent))
        try:
            _cmake_build(src, work / "build", work / "prefix", work / "build.log",
                         prefix.parent / f"{prefix.name}.build.log")
            if prefix.exists():             # force: move the old one aside first
                old = work / "old"
                os.rename(prefix, old)
            try:
                os.rename(work / "prefix", prefix)
            except OSError:
                # only without flock: another builder finished first; theirs is as good
                if not exe.is_file():
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"aoti-debug: built {exe} in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return exe


def _cmake_build(src: pathlib.Path, build: pathlib.Path, prefix: pathlib.Path,
                 log: pathlib.Path, kept_log: pathlib.Path) -> None:
    import torch.utils
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RunnerBuildError("cmake was not found on PATH; install CMake >= 3.18 "
                               "(your system's package, or `pip install cmake`)")
    configure = [cmake, "-S", str(src), "-B", str(build),
                 f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
                 "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    steps = [("configure", configure),
             ("build", [cmake, "--build", str(build), "--parallel", str(os.cpu_count() or 1)]),
             ("install", [cmake, "--install", str(build), "--prefix", str(prefix)])]
    failed = None
    with open(log, "w") as out:
        for step, cmd in steps:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            returncode = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
            if returncode != 0:
                failed = (step, returncode)
                break
    if failed:
        # the work folder is removed: keep the log where the user can read it
        shutil.copyfile(log, kept_log)
        tail = "".join(log.read_text(errors="replace").splitlines(True)[-20:])
        raise RunnerBuildError(f"CMake {failed[0]} step failed (exit {failed[1]}); "
                               f"full log: {kept_log}\n{tail}")


def save_inputs(path: PathLike, tensors: Sequence) -> None:
    """Write model inputs for `aoti-debug-run --inputs`: a list of CPU
    tensors, strides kept (AOTI may check them)."""
    import torch
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    items = []
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"save_inputs: input {i} is a {type(t).__name__}; "
                            f"only tensors can be passed to a .pt2 model")
        # detach(): a plain tensor, not a Parameter subclass libtorch cannot unpickle
        items.append(t.detach().cpu())
    torch.save(items, path)


def load_outputs(path: PathLike) -> List:
    """Read what `aoti-debug-run --outputs` wrote: a list of CPU tensors
    (None where the model returned no tensor)."""
    import torch
    value = torch.load(path, weights_only=True)
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"{path}: expected a tuple of tensors written by {RUNNER_NAME}, "
                         f"found a {type(value).__name__}")
    return list(value)


def run_package(pt2: PathLike, inputs, env: Optional[Mapping[str, str]] = None, *,
                outputs: Optional[PathLike] = None, model_name: Optional[str] = None,
                repeat: Optional[int] = None, libraries: Sequence[PathLike] = (),
                timeout: Optional[float] = None) -> subprocess.CompletedProcess:
    """Run `pt2` with `aoti-debug-run` (built if needed) and return the
    CompletedProcess (text, stdout/stderr captured; a non-zero exit is not
    raised).  `inputs` is a file from `save_inputs` or a sequence of tensors;
    `env`, when given, is the runner's whole environment (the place for
    AOTI_DEBUG_LOGLEVEL and friends); `libraries` are loaded into the runner
    first (custom-op libraries the package calls through the proxy executor)."""
    exe = build_runner()
    with tempfile.TemporaryDirectory(prefix="aoti_debug_run-") as tmp:
        if isinstance(inputs, (str, os.PathLike)):
            inputs_file = os.fspath(inputs)
        else:
            inputs_file = os.path.join(tmp, "inputs.pt")
            save_inputs(inputs_file, inputs)
        cmd = [str(exe), os.fspath(pt2), "--inputs", inputs_file]
        if outputs is not None:
            cmd += ["--outputs", os.fspath(outputs)]
        if model_name is not None:
            cmd += ["--model-name", model_name]
        if repeat is not None:
            cmd += ["--repeat", str(repeat)]
        for lib in libraries:
            cmd += ["--library", os.fspath(lib)]
        return subprocess.run(cmd, env=None if env is None else dict(env),
                              capture_output=True, text=True, timeout=timeout)
