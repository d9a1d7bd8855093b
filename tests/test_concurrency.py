"""Real artifacts in one process, as an AOTI server runs them: two packages
compiled with different options (each carrying its own copy of the runtime)
and a Python `log_api` function, called from 8 threads, 100 runs each, into
one file.  One banner; every record whole, counted and parsed."""

import re
from collections import Counter

import pytest

from aoti_debug.analysis import records as parsed
from conftest import BANNER, PLANTED, TESTS, clean_env, run_python

DRIVER = r"""
import sys, threading
sys.path.insert(0, {tests!r})
import torch, models, aoti_debug

mlp = torch._inductor.aoti_load_package({mlp!r})
planted = torch._inductor.aoti_load_package({planted!r})
x = models.example("mlp")[1]
clean = models.planted_inputs()

@aoti_debug.log_api(name="app::postprocess")
def postprocess(y):
    return y.argmax(-1)

errors = []
def worker():
    try:
        for _ in range(100):
            postprocess(mlp(*x))
            planted(*clean)
    except Exception as exc:
        errors.append(exc)

threads = [threading.Thread(target=worker) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
"""


@pytest.fixture(scope="module")
def server_log(packages, tmp_path_factory):
    mlp = packages.get("mlp", AOTI_DEBUG_LOGLEVEL="10")
    planted = packages.get("planted", **PLANTED)
    log = tmp_path_factory.mktemp("server") / "server.log"
    run_python(DRIVER.format(tests=TESTS, mlp=mlp, planted=planted), timeout=600,
               env=clean_env(AOTI_DEBUG_LOGLEVEL="3", AOTI_DEBUG_LOGDEST=log, AOTI_DEBUG_NAN_CHECK="off"))
    return log.read_text()


def test_one_banner_and_every_record_whole(server_log):
    assert len(BANNER.findall(server_log)) == 1 and server_log.startswith("=" * 80)
    log = parsed.parse(server_log)
    heads = Counter(re.sub(r"(?<=[ :])\d+(\.\d+)? ", "N ", r.split("] ", 2)[2].splitlines()[0].split(" thread=")[0])
                    for r in re.findall(r"^\[[^\n]*\] \[pid \d+\] [^\n]*(?:\n  [^\n]*)*", server_log, re.M)
                    if "System Information" not in r)
    # per mlp run: run, 6 launches, 6 launch-ends, run-end; per planted run the same with 3
    # each model under its package's name, its launches under that instance (`mlp:R.K`)
    assert heads["run N mlp"] == heads["run-end N mlp"] == 800
    assert heads["run N planted"] == heads["run-end N planted"] == 800
    assert heads["call N app::postprocess"] == 800 and heads["return N app::postprocess"] == 800
    for kind in ("launch", "launch-end"):
        assert sum(n for h, n in heads.items() if h.startswith(f"{kind} mlp:N ")) == 800 * 6
        assert sum(n for h, n in heads.items() if h.startswith(f"{kind} planted:N ")) == 800 * 3
    assert len(log.launches) == 800 * 9 and all(l.finished for l in log.launches)
    assert len(log.calls) == 800 and all(c.finished for c in log.calls)
    # each run and call names its thread: the eight workers
    assert len({r.thread for r in log.records if r.kind in ("run", "call")}) == 8


def test_each_model_counts_its_own_runs_and_each_call_number_once(server_log):
    log = parsed.parse(server_log)
    # both models number their runs 1..800 (launches 1..6 and 1..3): every
    # model:R.K is there once
    ids = Counter((launch.model, launch.run, launch.index) for launch in log.launches)
    assert ids == Counter([("mlp", r, k) for r in range(1, 801) for k in range(1, 7)]
                          + [("planted", r, k) for r in range(1, 801) for k in range(1, 4)])
    # one call counter for the process
    assert sorted(int(c.first.id) for c in log.calls) == list(range(1, 801))
