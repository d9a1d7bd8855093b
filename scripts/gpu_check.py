"""The steps of scripts/gpu-check.sh that need an interpreter (docs/gpu.md).

    python scripts/gpu_check.py usable            # exit 0 when this torch is a tested CUDA build
    python scripts/gpu_check.py preflight         # one line a tool the GPU tests use
    python scripts/gpu_check.py layer VENV        # aoti-debug from this tree, offline, in VENV
    python scripts/gpu_check.py report LOG JUNIT  # each test's outcome, the failures and errors, a summary

Standard library only until `usable` has said torch is there; nothing here
reaches a network.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTED = ((2, 11), (2, 15))      # codegen_patches/adapter.py's TESTED, read without importing torch


def _release(version):
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:2])


def usable():
    """Exit 0 if this interpreter's torch is a tested CUDA build, else say why (exit 1)."""
    try:
        import torch
    except Exception as exc:        # an import that fails in any way: not usable, say why
        print(f"torch does not import ({type(exc).__name__}: {exc})")
        return 1
    if not TESTED[0] <= _release(torch.__version__) <= TESTED[1]:
        print(f"torch {torch.__version__} is not a tested release (2.11-2.15)")
        return 1
    if torch.version.cuda is None:
        print(f"torch {torch.__version__} is a CPU-only build")
        return 1
    return 0


def _version_of(command, pattern=r"(\d+\.\d+(?:\.\d+)?)"):
    path = shutil.which(command) if os.sep not in command else (command if os.path.exists(command) else None)
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{path} (--version failed: {exc})"
    found = re.search(pattern, out)
    return f"{found.group(1) if found else out.strip()[:60]} ({path})"


def _module_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return None


def preflight():
    """What the GPU tests will use, one line each; exit 1 only where torch itself fails."""
    line = lambda what, text: print(f"{what + ':':15} {text}", flush=True)
    venv = " (a venv)" if sys.prefix != sys.base_prefix else ""
    line("python", f"{sys.version.split()[0]} {sys.executable}{venv}")
    import torch
    tested = TESTED[0] <= _release(torch.__version__) <= TESTED[1]
    line("torch", f"{torch.__version__}, CUDA {torch.version.cuda or 'none (a CPU-only build)'}"
                  f"{'' if tested else ', NOT a tested release'}")
    if torch.cuda.is_available():
        gpus = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append(f"{p.name}, sm_{p.major}{p.minor}, {p.total_memory // 2**30} GiB")
        line("GPU", "; ".join(gpus))
    else:
        line("GPU", "none: torch.cuda.is_available() is False (the GPU tests will be skipped)")
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            drv = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
        except (OSError, subprocess.SubprocessError):
            drv = []
        line("driver", drv[0] if drv else "nvidia-smi gave no driver version")
    else:
        line("driver", "no nvidia-smi on PATH")
    line("triton", _module_version("triton") or "missing: Triton kernels cannot be compiled")
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    nvcc = _version_of(os.path.join(cuda_home, "bin", "nvcc"), r"release (\d+\.\d+)") \
        or _version_of("nvcc", r"release (\d+\.\d+)")
    line("nvcc", nvcc or f"missing (not at {cuda_home}/bin nor on PATH): AOTI compiles CUDA wrappers with it")
    for tool, needed_by in (("cmake", "the C++ runner's tests"), ("ninja", "faster C++ builds"),
                            ("gcc", "every C++ build"), ("g++", "every C++ build")):
        line(tool, _version_of(tool) or f"missing ({needed_by})")
    for module, needed_by in (("pytest", "the tests"), ("pytest-timeout", "a per-test timeout"),
                              ("numpy", "torch's numpy interop")):
        line(module, _module_version(module) or f"missing ({needed_by})")
    line("OUT", os.environ.get("OUT") or "unset: results are printed only")
    return 0


def _stamp(base):
    h = hashlib.sha256()
    for name in ("pyproject.toml", "setup.py", os.path.join("aoti_debug", "settings.py")):
        with open(os.path.join(ROOT, name), "rb") as f:
            h.update(f.read())
    h.update(f"{ROOT}\0{base}".encode())
    return h.hexdigest()[:16]


def layer(venv):
    """A venv over this interpreter's packages (its torch, pytest, setuptools), with
    aoti-debug from this tree installed editable: no index, no build isolation, no
    dependencies resolved.  Idempotent; prints the venv's python last."""
    base = sys.executable
    python = os.path.join(venv, "bin", "python")
    stamp_path = os.path.join(venv, ".aoti-debug-installed")
    want = _stamp(base)
    if os.path.exists(stamp_path) and open(stamp_path).read() == want and os.path.exists(python):
        print(f"set-up: {venv} is up to date (over {base})")
        return 0
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base, "-m", "venv", "--without-pip", venv], check=True)
    # the base's site folders, added where this venv starts (its .pth files run too);
    # "00-" sorts before the editable install's and aoti-debug's own start-up hook
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    import site as _site
    dirs = list(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                               *_site.getsitepackages()]))
    with open(os.path.join(site, "00-aoti-debug-base.pth"), "w") as f:
        f.write("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs) + "\n")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                           "--no-build-isolation", "-e", ROOT], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout + proc.stderr)
        print(f"set-up: installing aoti-debug into {venv} failed (pip without an index, no build isolation: "
              "the interpreter needs pip, setuptools>=68 and wheel)")
        return 1
    check = subprocess.run([python, "-c", "import torch, aoti_debug; print(torch.__version__)"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        print(check.stdout + check.stderr)
        print(f"set-up: {venv} does not import torch and aoti_debug")
        return 1
    with open(stamp_path, "w") as f:
        f.write(want)
    print(f"set-up: aoti-debug installed in {venv}, over {base} (torch {check.stdout.strip()})")
    return 0


def report(log, junit):
    """Each test's outcome (from the JUnit XML), the text of every failure and error,
    and one summary line.  Without the XML (the run was ended), the log's tail."""
    if not os.path.exists(junit):
        print("no JUnit XML (pytest ended before writing it); the end of its log:")
        with open(log, errors="replace") as f:
            print("".join(f.readlines()[-60:]), end="")
        return 0
    import xml.etree.ElementTree as ET
    counts = dict(passed=0, failed=0, error=0, skipped=0)
    problems = []
    seconds = 0.0
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name")
        seconds += float(case.get("time") or 0)
        outcome, detail = "passed", ""
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                outcome = {"failure": "failed"}.get(kind, kind)
                detail = node.get("message") or ""
                if kind != "skipped":
                    problems.append((outcome.upper(), name, (node.text or detail).rstrip()))
                break
        counts[outcome] += 1
        shown = f": {detail}" if outcome == "skipped" else ""
        print(f"{outcome.upper():8} {name}{shown}")
    for outcome, name, text in problems:
        lines = text.splitlines()
        print(f"---- {outcome}: {name} ----")
        print("\n".join(lines if len(lines) <= 80 else lines[:20] + ["..."] + lines[-60:]))
    print(f"summary: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors, "
          f"{counts['skipped']} skipped in {seconds:.0f} s")
    return 0


def main(argv):
    commands = {"usable": usable, "preflight": preflight, "layer": layer, "report": report}
    if not argv or argv[0] not in commands:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    return commands[argv[0]](*argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
