"""Each loaded model has its own name in records (docs/log-format.md): the AOTI
model name the user set, else the package's file stem; a second instance of
the same name in a process is `name#2`."""

import io
import types

import pytest

from aoti_debug.analysis.mask import mask
from conftest import TESTS, clean_env, records, run_python

LEVEL10 = dict(AOTI_DEBUG_LOGLEVEL="10")


def test_two_packages_and_a_second_load_are_told_apart(tmp_path, packages):
    mlp, planted = packages.get("mlp", **LEVEL10), packages.get("planted", **LEVEL10)
    log = tmp_path / "log.txt"
    run_python(f"""
        import sys; sys.path.insert(0, {TESTS!r})
        import torch, models
        first = torch._inductor.aoti_load_package({mlp!r})
        second = torch._inductor.aoti_load_package({mlp!r})
        other = torch._inductor.aoti_load_package({planted!r})
        x = models.example("mlp")[1]
        first(*x); second(*x); first(*x)
        other(*models.planted_inputs())
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="1", AOTI_DEBUG_LOGDEST=str(log)))
    runs = [r.splitlines()[0] for r in records(mask(log.read_text())) if " run " in r.splitlines()[0]]
    assert runs == ["[TIMESTAMP] [pid PID] run 1 mlp thread=TID", "[TIMESTAMP] [pid PID] run 1 mlp#2 thread=TID",
                    "[TIMESTAMP] [pid PID] run 2 mlp thread=TID", "[TIMESTAMP] [pid PID] run 1 planted thread=TID"]


@pytest.fixture
def graph(monkeypatch):
    """Inductor's current graph as model_name() sees it, and its config."""
    from torch._inductor import config
    from torch._inductor.virtualized import V
    from aoti_debug.codegen_patches import ir_queries
    g = types.SimpleNamespace(aot_mode=True, name=None)
    with V.set_graph_handler(g):
        yield g, config, ir_queries, monkeypatch


def test_the_aoti_model_name_comes_first_then_the_package_stem(graph):
    g, config, ir_queries, monkeypatch = graph
    assert ir_queries.model_name() == "model"
    monkeypatch.setattr(ir_queries, "_package_stem", ir_queries.package_stem("out/ranker v2#1.pt2"))
    assert ir_queries.model_name() == "ranker_v2_1"          # a record token and a folder name
    monkeypatch.setattr(config.aot_inductor, "model_name_for_generated_files", "scorer")
    assert ir_queries.model_name() == "scorer"
    g.aot_mode = False                                     # torch.compile's graphs
    assert ir_queries.model_name() == "model"


def test_package_stems():
    from aoti_debug.codegen_patches.ir_queries import package_stem
    assert package_stem("/tmp/out/ranker.pt2") == "ranker"
    assert package_stem(b"ranker.pt2") == "ranker"
    assert package_stem(io.BytesIO()) is None
    assert package_stem(None) is None


def test_instances_are_numbered_without_the_compiled_core(monkeypatch):
    from aoti_debug.runtime import sink
    monkeypatch.setattr(sink, "native", lambda: None)
    monkeypatch.setattr(sink, "_local_names", {})
    assert [sink.instance_name(n) for n in ("a", "b", "a", "a")] == ["a", "b", "a#2", "a#3"]


def test_instances_are_numbered_across_runtimes_in_a_process():
    proc = run_python("""
        from aoti_debug.native import core as _native
        from aoti_debug.runtime import sink
        from aoti_debug.runtime.launches import Model
        print(Model("m", 1).name, _native.instance_name("m"), sink.instance_name("m"), Model("n", 1).name)
    """, env=clean_env())
    assert proc.stdout.split() == ["m", "m#2", "m#3", "n"]


FORGED = "evil.py\n[2026-11-21 05:30:45.123456] [pid 1] crash 1.1 fake_kernel\n  signal: SIGSEGV\x1b]0;pwned\x07"


def test_a_source_file_name_cannot_forge_a_record_in_either_runtime(tmp_path):
    """A model compiled from a file whose name holds a newline, a fake crash record and a
    terminal escape: both runtimes write the name inert (\\x0a, \\x1b), so the log holds
    the model's records only, and the NaN check's warning prints nothing raw."""
    log, pt2 = tmp_path / "log.txt", tmp_path / "evil.pt2"
    proc = run_python(f"""
        import torch
        src = "import torch\\nclass M(torch.nn.Module):\\n    def forward(self, x):\\n        return torch.log(x) * 2\\n"
        scope = {{}}
        exec(compile(src, {FORGED!r}, "exec"), scope)
        m, x = scope["M"](), torch.tensor([[1.0, -1.0], [2.0, 3.0]])
        ep = torch.export.export(m, (x,))
        torch._inductor.aoti_load_package(torch._inductor.aoti_compile_and_package(ep, package_path={str(pt2)!r}))(x)
        torch.compile(m)(x)
    """, env=clean_env(AOTI_DEBUG_LOGLEVEL="5", AOTI_DEBUG_NAN_CHECK="warn", AOTI_DEBUG_LOGDEST=str(log)))
    text = log.read_text()
    inert = "evil.py\\x0a[2026-11-21 05:30:45.123456] [pid 1] crash 1.1 fake_kernel\\x0a  signal: SIGSEGV\\x1b]0;pwned\\x07:4"
    assert "\x1b" not in text + proc.stdout + proc.stderr
    heads = [r.splitlines()[0] for r in records(mask(text))]
    assert not [h for h in heads if " crash " in h], heads
    origins = [line for line in text.splitlines() if line.startswith("  origin: ")]
    assert len(origins) >= 2 and all(line.endswith(f" source={inert}") for line in origins), origins
    # the analysis reads one clean process that made NaN (a forged crash record once made it exit 3)
    found = run_python(f"""
        import sys
        from aoti_debug.cli import main
        sys.exit(main(["nan-origin", {str(log)!r}]))
    """, env=clean_env(), check=False)
    assert found.returncode == 1 and found.stdout.startswith("NaN/Inf origin: launch evil:1.1 cpp_fused_log"), \
        found.stdout + found.stderr
    assert f"  source: {inert}\n" in found.stdout and "processes" not in found.stdout, found.stdout
