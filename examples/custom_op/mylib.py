"""Build and load the example op libraries (gather_rows.cpp, memory_bugs.cpp).

    python examples/custom_op/mylib.py              # builds gather_rows, prints the library's path
    python examples/custom_op/mylib.py memory_bugs  # the same for the ops with memory bugs

`load()` builds once (torch.utils.cpp_extension caches by source hash) and
registers torch.ops.mylib.gather_rows in this process.  A C++ program loads
the same file: `aoti-debug-run ... --library PATH`.
"""

import os
import pathlib

HERE = pathlib.Path(__file__).resolve().parent


def build(build_dir=None) -> str:
    """Compile gather_rows.cpp against the installed torch and aoti-debug's headers."""
    from torch.utils import cpp_extension

    import aoti_debug

    build_dir = pathlib.Path(build_dir or os.environ.get("MYLIB_BUILD_DIR")
                             or pathlib.Path.home() / ".cache" / "aoti_debug" / "examples")
    build_dir.mkdir(parents=True, exist_ok=True)
    return cpp_extension.load(name="mylib", sources=[str(HERE / "gather_rows.cpp")],
                              extra_include_paths=[aoti_debug.cpp_include_dir()],
                              build_directory=str(build_dir), is_python_module=False)


def build_memory_bugs(build_dir=None) -> str:
    """Compile memory_bugs.cpp (torch.ops.membugs.*: ops with memory bugs)."""
    from torch.utils import cpp_extension

    build_dir = pathlib.Path(build_dir or os.environ.get("MYLIB_BUILD_DIR")
                             or pathlib.Path.home() / ".cache" / "aoti_debug" / "examples") / "membugs"
    build_dir.mkdir(parents=True, exist_ok=True)   # its own folder: each build writes a build.ninja
    return cpp_extension.load(name="membugs", sources=[str(HERE / "memory_bugs.cpp")],
                              build_directory=str(build_dir), is_python_module=False)


def load(build_dir=None) -> str:
    import torch

    path = build(build_dir)
    torch.ops.load_library(path)
    return path


if __name__ == "__main__":
    import sys
    print(build_memory_bugs() if sys.argv[1:] == ["memory_bugs"] else build())
