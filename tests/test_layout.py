"""The package's layout follows DESIGN.md's data flow: settings -> codegen ->
runtimes -> analysis -> the tools, with no import circle.  Codegen and the
runtimes sit side by side: neither imports the other; what both need (the
instrumentation plan, the native core) sits below them.

Imports are read from the source (every `import`, also those inside
functions, which are still dependencies), not by importing anything.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent
SOURCES = {"aoti_debug": PACKAGE / "aoti_debug",
           "aoti_debug.codegen_patches": PACKAGE / "codegen_patches"}

# each stage may import its own modules and the stages it names, no other
STAGES = [
    ("settings", ["aoti_debug._version", "aoti_debug.settings"], ()),
    ("plan", ["aoti_debug.plan"], ("settings",)),
    ("native core", ["aoti_debug.native"], ("settings",)),
    ("codegen", ["aoti_debug.codegen_patches", "aoti_debug._startup"], ("settings", "plan", "native core")),
    ("runtimes", ["aoti_debug.runtime"], ("settings", "plan", "native core")),
    ("analysis", ["aoti_debug.analysis"], ("settings", "plan", "native core", "runtimes")),
    ("tools", ["aoti_debug.cli", "aoti_debug.commands", "aoti_debug.runner", "aoti_debug.reference",
               "aoti_debug.demo", "aoti_debug.__main__", "aoti_debug"],
     ("settings", "plan", "native core", "codegen", "runtimes", "analysis")),
]


def modules():
    found = {}
    for prefix, root in SOURCES.items():
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([prefix] + parts)] = path
    return found


def imports(name: str, path: pathlib.Path, known) -> set:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import mod` depends on mod; `from pkg import name` on pkg
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def graph():
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def stage_of(name: str) -> int:
    best = None
    for i, (_, prefixes, _) in enumerate(STAGES):
        for p in prefixes:
            if name == p or name.startswith(p + "."):
                if best is None or len(p) > best[1]:
                    best = (i, len(p))
    assert best is not None, f"{name} belongs to no stage of the layout"
    return best[0]


def test_no_import_circle():
    g = graph()
    state, path, circles = {}, [], []

    def visit(n):
        state[n] = "open"
        path.append(n)
        for m in sorted(g[n]):
            if state.get(m) == "open":
                circles.append(path[path.index(m):] + [m])
            elif m not in state:
                visit(m)
        path.pop()
        state[n] = "done"

    for n in sorted(g):
        if n not in state:
            visit(n)
    assert circles == []


def backward_imports(g) -> list:
    out = []
    for a, deps in g.items():
        own, _, allowed = STAGES[stage_of(a)]
        for b in deps:
            other = STAGES[stage_of(b)][0]
            # a package's __init__ may name what its modules offer (lazily)
            if other != own and other not in allowed and a != "aoti_debug":
                out.append(f"{a} ({own}) imports {b} ({other})")
    return sorted(out)


def test_imports_follow_the_data_flow():
    assert backward_imports(graph()) == []


def test_a_runtime_module_importing_codegen_is_refused():
    """The check itself: a runtime reaching into codegen, codegen into a runtime,
    and the plan into codegen are each reported."""
    g = graph()
    g["aoti_debug.runtime.format"] = g["aoti_debug.runtime.format"] | {"aoti_debug.codegen_patches.hooks"}
    g["aoti_debug.codegen_patches.cpp_emit"] = g["aoti_debug.codegen_patches.cpp_emit"] | {"aoti_debug.runtime.sink"}
    g["aoti_debug.plan"] = g["aoti_debug.plan"] | {"aoti_debug.codegen_patches.adapter"}
    assert backward_imports(g) == [
        "aoti_debug.codegen_patches.cpp_emit (codegen) imports aoti_debug.runtime.sink (runtimes)",
        "aoti_debug.plan (plan) imports aoti_debug.codegen_patches.adapter (codegen)",
        "aoti_debug.runtime.format (runtimes) imports aoti_debug.codegen_patches.hooks (codegen)",
    ]


# Inside codegen the installers (codegen_patches/patch_*.py, which patch Inductor)
# call the hooks and the questions; nothing they call reaches back into them, and
# only install.py, which installs them, imports one.
INSTALLERS = "aoti_debug.codegen_patches.patch_"
INSTALLS_THEM = "aoti_debug.codegen_patches.install"


def installer_imports(g) -> list:
    return sorted(f"{a} imports {b}" for a, deps in g.items() for b in deps
                  if b.startswith(INSTALLERS) and a != INSTALLS_THEM)


def test_only_install_imports_the_installers():
    assert installer_imports(graph()) == []


def test_hooks_importing_an_installer_is_refused():
    """The check itself: the hooks reaching into an installer, and one installer
    into the other, are each reported."""
    g = graph()
    g["aoti_debug.codegen_patches.hooks"] = g["aoti_debug.codegen_patches.hooks"] | {
        "aoti_debug.codegen_patches.patch_cpp_wrapper"}
    g["aoti_debug.codegen_patches.patch_cpp_wrapper"] = g["aoti_debug.codegen_patches.patch_cpp_wrapper"] | {
        "aoti_debug.codegen_patches.patch_python_wrapper"}
    assert installer_imports(g) == [
        "aoti_debug.codegen_patches.hooks imports aoti_debug.codegen_patches.patch_cpp_wrapper",
        "aoti_debug.codegen_patches.patch_cpp_wrapper imports aoti_debug.codegen_patches.patch_python_wrapper",
    ]


def test_the_layout_check_sees_the_modules():
    g = graph()
    assert "aoti_debug.runtime.launches" in g and "aoti_debug.codegen_patches.hooks" in g
    assert "aoti_debug.native.core" in g["aoti_debug.runtime.sink"] or \
        "aoti_debug.native" in g["aoti_debug.runtime.sink"]
    assert "aoti_debug.analysis.dumps" in g["aoti_debug.analysis.load"]
    assert "aoti_debug.plan" in g["aoti_debug.runtime.format"] and "aoti_debug.plan" in g["aoti_debug.codegen_patches.hooks"]
    installers = {"aoti_debug.codegen_patches.patch_cpp_wrapper", "aoti_debug.codegen_patches.patch_python_wrapper"}
    assert installers <= g["aoti_debug.codegen_patches.install"]
    assert all("aoti_debug.codegen_patches.hooks" in g[i] for i in installers)     # installers -> hooks
