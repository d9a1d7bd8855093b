"""TORCH_TRACE: the instrumentation plan appears in tlparse's output."""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.torch_matrix



def tlparse():
    found = shutil.which("tlparse") or os.path.join(os.path.dirname(sys.executable), "tlparse")
    if not os.path.exists(found):
        pytest.fail("the tlparse binary is missing: scripts/setup.sh installs the tlparse package")
    return found


def test_plan_is_in_tlparse_output(tmp_path, dynamic, dynamic_trace):
    out = tmp_path / "tl"
    logs = sorted(glob.glob(os.path.join(dynamic_trace, "*.log")), key=os.path.getmtime)
    assert logs, f"no TORCH_TRACE log in {dynamic_trace}"
    proc = subprocess.run([tlparse(), logs[-1], "--no-browser", "-o", str(out), "--overwrite"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    plans = glob.glob(str(out / "**" / "aoti_debug_plan_*.json"), recursive=True)
    assert len(plans) == 1, sorted(glob.glob(str(out / "**"), recursive=True))
    plan = json.loads(open(plans[0]).read())
    assert plan["settings"] == {"level": 3, "kernels": [], "check_inputs": True, "nan_check": "raise:nan",
                                "compile": "selected"}
    assert [(i["label"], i["sizes"], i["dtype"]) for i in plan["inputs"]] == [
        ("x", [plan["inputs"][0]["sizes"][0], "4"], "torch.float32"),
        ("y", [f"2*{plan['inputs'][0]['sizes'][0]}", "4"], "torch.float32")]
    symbol = plan["inputs"][0]["sizes"][0]
    assert plan["inputs"][0]["ranges"] == {symbol: ["2", "64"]}
    launches = plan["launches"]
    assert [l["index"] for l in launches] == list(range(1, len(launches) + 1))
    from models import line_of
    assert any(l["source"] == line_of("dynamic.sum") for l in launches)
    for l in launches:
        assert {a["role"] for a in l["args"]} <= {"in", "out", "inout"}
    # the index page links to it
    assert os.path.basename(plans[0]) in open(out / "index.html").read()
