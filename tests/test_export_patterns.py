"""Instrumentation never fails a compile that succeeds without it, nor changes a result.

Each pattern of tests/export_patterns.py is exported, compiled with everything compiled in
(`AOTI_DEBUG_COMPILE=all`), and run with everything on (level 10 dumps, the input guard, the
NaN check, the memory check) on its example inputs and on other inputs within its dynamic
shapes; the outputs must match eager's (float32's tolerance: Inductor's kernels
round their own way).  One process compiles them all.
"""

import re

import pytest

from conftest import TESTS, clean_env, run_python
from export_patterns import PATTERNS

pytestmark = pytest.mark.torch_matrix

SCRIPT = '''
import copy, sys, traceback
sys.path.insert(0, TESTS)
import torch
import torch.utils._pytree as pytree
from export_patterns import PATTERNS

def same(got, want):
    got, want = pytree.tree_leaves(got), pytree.tree_leaves(want)
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            # Inductor's fused kernels round as they do without aoti-debug: eager's
            # float32 tolerance, not bit equality
            torch.testing.assert_close(g, w, equal_nan=True)
        else:
            assert g == w, (g, w)

for name in PATTERNS:
    try:
        model, example, dynamic, other = PATTERNS[name]()
        reference = copy.deepcopy(model)
        ep = torch.export.export(model, example, dynamic_shapes=dynamic)
        configs = {"aot_inductor.use_runtime_constant_folding": True} if name == "folded" else {}
        pt2 = torch._inductor.aoti_compile_and_package(ep, package_path=f"{OUT}/{name}.pt2",
                                                       inductor_configs=configs)
        loaded = torch._inductor.aoti_load_package(pt2)
        for args in (example, other):
            same(loaded(*copy.deepcopy(args)), reference(*copy.deepcopy(args)))
        print("OK", name, flush=True)
    except Exception as exc:
        print("FAIL", name, type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "",
              flush=True)
        traceback.print_exc()
'''

EVERYTHING = dict(AOTI_DEBUG_COMPILE="all", AOTI_DEBUG_LOGLEVEL="10", AOTI_DEBUG_CHECK_INPUTS="1",
                  AOTI_DEBUG_NAN_CHECK="warn:naninf", AOTI_DEBUG_MEMCHECK="warn")


def test_every_export_pattern_compiles_and_matches_eager_with_everything_in(tmp_path, aoti_cache):
    env = clean_env(TORCHINDUCTOR_CACHE_DIR=aoti_cache, AOTI_DEBUG_LOGDEST=str(tmp_path / "patterns.log"),
                    AOTI_DEBUG_DUMP_DIR=str(tmp_path / "dumps"), **EVERYTHING)
    code = SCRIPT.replace("TESTS", repr(TESTS)).replace("{OUT}", str(tmp_path))
    proc = run_python(code, env=env, timeout=1500, check=False)
    said = proc.stdout.splitlines()
    assert said == [f"OK {name}" for name in PATTERNS], proc.stdout + proc.stderr[-6000:]
    # every pattern ran instrumented: its launches are in the log, and no check complained
    log = (tmp_path / "patterns.log").read_text()
    models = set(re.findall(r"\] launch ([A-Za-z_]+):", log))
    assert models == set(PATTERNS), sorted(models)
    assert "nan-check" not in log and "input-check" not in log and "memcheck" not in log
