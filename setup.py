"""Build steps pyproject.toml cannot express.

- ship cpp_runtime/ (the C++ shim headers) inside the package as
  aoti_debug/_cpp_runtime, so a non-editable install can compile it in;
- install aoti_debug.pth, the process-start hook, at the root of
  site-packages (uninstall removes it with the rest of the package).
"""

import os
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

HERE = pathlib.Path(__file__).parent.resolve()
PTH_NAME = "aoti_debug.pth"


def pth_line() -> str:
    namespace: dict = {}
    exec((HERE / "aoti_debug" / "settings.py").read_text(), namespace)
    names = tuple(namespace["ALL_NAMES"])
    others = tuple(namespace["OTHER_NAMES"])
    # One line: .pth files execute lines that start with "import".  The check
    # runs before anything of ours is imported; an unknown AOTI_DEBUG_* name (a
    # misspelling) runs the hook too, which names it.
    return ("import os; (any(n in os.environ for n in %r) or any(n.startswith('AOTI_DEBUG_') and n not in %r "
            "for n in os.environ)) and "
            "__import__('aoti_debug._startup', fromlist=['activate']).activate()\n" % (names, others))


class BuildPy(build_py):
    def run(self):
        super().run()
        build_lib = pathlib.Path(self.build_lib)
        (build_lib / PTH_NAME).write_text(pth_line())
        if not self.editable_mode:
            target = build_lib / "aoti_debug" / "_cpp_runtime"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(HERE / "cpp_runtime", target,
                            ignore=shutil.ignore_patterns("build", "__pycache__", "*.o", "*.so"))

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH_NAME)]


class EditableWheel(editable_wheel):
    """PEP 660 installs do not carry build_py's extra files: add the hook here."""

    def _select_strategy(self, name, tag, build_lib):
        return _WithStartupHook(super()._select_strategy(name, tag, build_lib))


class _WithStartupHook:
    def __init__(self, strategy):
        self.strategy = strategy

    def __call__(self, wheel, files, mapping):
        self.strategy(wheel, files, mapping)
        wheel.writestr(PTH_NAME, pth_line())

    def __enter__(self):
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc_info):
        return self.strategy.__exit__(*exc_info)


setup(cmdclass={"build_py": BuildPy, "editable_wheel": EditableWheel})
