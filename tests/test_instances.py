"""Several instances of one model in one process (a server with two loaders on two
threads): every launch record names its instance (`ranker#2:1.2`, docs/log-format.md
section 1), instances are numbered in the order they were loaded, and every analysis
command keeps instances apart."""

import re
from collections import Counter

from aoti_debug.analysis import diff, records, report, timeline
from aoti_debug.cli import main
from conftest import PLANTED, TESTS, clean_env, run_python
from test_analysis_logs import SRC, LogWriter, T


def two_instances_log(nan_in="ranker#2", extra=None):
    """Run 1 of `ranker` (thread 11) and of `ranker#2` (thread 12), their launches
    interleaved: both write `1.K` of the same kernels at once.  `nan_in`'s launch 1.2
    (the log) turns finite inputs into NaN; `extra` adds a third instance after them."""
    w = LogWriter()
    models = ["ranker", "ranker#2"]
    for thread, m in zip((11, 12), models):
        w.record("run", "1", f"{m} thread={thread}", w.items([("in x", T(1.0, 3.0, 2.0))]))
    nan = T(0.0, 1.098612, 0.5, nan=2)
    fine = T(0.0, 1.098612, 0.5)
    steps = [("cpp_fused_add_0", "add", 11, T(1.0, 3.0, 2.0), lambda m: T(2.0, 4.0, 3.0)),
             ("cpp_fused_log_1", "log", 12, T(2.0, 4.0, 3.0), lambda m: nan if m == nan_in else fine),
             ("cpp_fused_mul_2", "mul", 13, None, lambda m: T(0.0, 2.0, 1.0, nan=2) if m == nan_in
              else T(0.0, 2.0, 1.0))]
    for k, (kernel, node, line, inp, out) in enumerate(steps, 1):
        for m in models:
            given = inp if inp is not None else (nan if m == nan_in else fine)
            w.record("launch", f"{m}:1.{k}", kernel,
                     [f"  origin: nodes={node} source={SRC}:{line}"] + w.items([("in buf", given)]))
        for m in reversed(models):       # the second instance finishes first
            w.record("launch-end", f"{m}:1.{k}", kernel, w.items([("out buf", out(m))]))
    for m in models:
        w.record("run-end", "1", m, w.items([("out buf", steps[2][4](m))]))
    if extra:
        w.record("run", "1", f"{extra} thread=13")
        w.record("launch", f"{extra}:1.1", "cpp_fused_add_0",
                 [f"  origin: nodes=add source={SRC}:11"] + w.items([("in x", T(1.0, 3.0, 2.0))]))
        w.record("launch-end", f"{extra}:1.1", "cpp_fused_add_0", w.items([("out buf", T(2.0, 4.0, 3.0))]))
    return w


def cli(capsys, *argv):
    code = main(list(map(str, argv)))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- the parser --------------------------------------------------------------------

def test_launches_of_two_instances_with_the_same_ids_are_paired_within_their_instance():
    log = records.parse(two_instances_log().text())
    assert [(l.model, l.run, l.index, l.finished) for l in log.launches] == [
        ("ranker", 1, 1, True), ("ranker#2", 1, 1, True), ("ranker", 1, 2, True),
        ("ranker#2", 1, 2, True), ("ranker", 1, 3, True), ("ranker#2", 1, 3, True)]
    # each launch-end closes its own instance's launch: ranker#2's log output holds the NaN
    (bad,) = [l for l in log.launches if l.outputs[0].value.nonfinite() and l.index == 2]
    assert (bad.ident, bad.title) == ("ranker#2:1.2", "ranker#2:1.2 cpp_fused_log_1")
    # a log written before ids named the instance: the launch has none
    old = records.parse(LogWriter().record("launch", "1.2", "k").text())
    assert (old.launches[0].model, old.launches[0].run, old.launches[0].index) == (None, 1, 2)


# -- nan-origin --------------------------------------------------------------------

def test_nan_origin_names_the_instance_that_made_the_nan(tmp_path, capsys):
    path = two_instances_log().write(tmp_path / "srv.log")
    code, out, err = cli(capsys, "nan-origin", path)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == "NaN/Inf origin: launch ranker#2:1.2 cpp_fused_log_1 (pid 4242, srv.log:116)"
    assert "later launch shows NaN/Inf too (victims): ranker#2:1.3 cpp_fused_mul_2" in out
    assert "did not finish" not in out and "never finished" not in out
    # the other instance: the same launch, finite
    code, out, _ = cli(capsys, "nan-origin", two_instances_log(nan_in="ranker").write(tmp_path / "b.log"))
    assert out.splitlines()[0] == "NaN/Inf origin: launch ranker:1.2 cpp_fused_log_1 (pid 4242, b.log:100)"


# -- diff ------------------------------------------------------------------------

def test_diff_of_a_log_with_two_instances_compares_instance_with_instance(tmp_path, capsys):
    path = two_instances_log().write(tmp_path / "srv.log")
    code, out, err = cli(capsys, "diff", path, path)
    assert (code, err) == (0, "")
    rows = [l.split()[:2] for l in out.splitlines()[3:11]]
    assert rows == [["ranker:1.1", "ranker:1.1"], ["ranker:1.2", "ranker:1.2"], ["ranker:1.3", "ranker:1.3"],
                    ["end", "end"], ["ranker#2:1.1", "ranker#2:1.1"], ["ranker#2:1.2", "ranker#2:1.2"],
                    ["ranker#2:1.3", "ranker#2:1.3"], ["end", "end"]]
    assert out.splitlines()[11:] == [
        "compared instance by instance: A ranker with B ranker, A ranker#2 with B ranker#2",
        "the logs agree: 6 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)"]


def test_diff_finds_the_divergence_in_its_instance_and_names_an_instance_left_out(tmp_path):
    a = records.parse(two_instances_log(nan_in="none").text(), "a.log")
    b = records.parse(two_instances_log(extra="ranker#3").text(), "b.log")
    result = diff.diff(a, b)
    lines = diff.summary(result)
    assert lines[:2] == [
        "compared instance by instance: A ranker with B ranker, A ranker#2 with B ranker#2",
        "B: model instance ranker#3 (1 launch(es)) has no instance of that name in A: not compared"]
    assert "first divergence: A ranker#2:1.2 cpp_fused_log_1 / B ranker#2:1.2 cpp_fused_log_1" in lines
    # nothing of ranker was called different
    assert [r.a.title for r in result.rows if r.status == diff.DIFFERS] == [
        "ranker#2:1.2 cpp_fused_log_1", "ranker#2:1.3 cpp_fused_mul_2", "end ranker#2"]


def test_diff_refuses_instances_without_a_namesake(tmp_path, capsys):
    a = two_instances_log().write(tmp_path / "a.log")
    b = tmp_path / "b.log"
    b.write_text(a.read_text().replace("ranker", "scorer"))
    code, out, err = cli(capsys, "diff", a, b)
    assert (code, out) == (2, "")
    assert err == ("aoti-debug diff: the model instances differ and none has a namesake on the other side "
                   "(A: ranker, ranker#2; B: scorer, scorer#2); diff compares instance with instance of "
                   "the same name when a log holds several\n")


# -- report and timeline ------------------------------------------------------------

def test_report_says_each_instances_runs_and_the_run_finished(tmp_path):
    log = records.parse(two_instances_log().text(), str(tmp_path / "srv.log"))
    page = report.render(log)
    assert "<tr><th>runs</th><td>ranker: 1; ranker#2: 1</td></tr>" in page.html
    assert page.summary == "6 launches/calls; NaN/Inf origin: ranker#2:1.2 cpp_fused_log_1"


def test_timeline_puts_each_instances_launches_on_its_runs_thread():
    t = timeline.build(records.parse(two_instances_log().text()))
    assert t.notes == []
    on = {(s.args["id"], track.name) for p in t.processes for track in p.tracks for s in track.slices
          if s.kind == "launch"}
    assert on == {(f"{m}:1.{k}", f"thread {thread}") for m, thread in (("ranker", 11), ("ranker#2", 12))
                  for k in (1, 2, 3)}


# -- a real server: two copies of one package, two threads ---------------------------

DRIVER = r"""
import sys, threading
sys.path.insert(0, {tests!r})
import torch, models

first = torch._inductor.aoti_load_package({planted!r})     # loaded first: planted
second = torch._inductor.aoti_load_package({planted!r})    # loaded second: planted#2
clean, bad = models.planted_inputs(), models.planted_inputs("log")
second(*clean)          # the second one runs first: its name follows the loading, not the runs
start = threading.Barrier(2)
def serve(model, last):
    start.wait()
    for _ in range(30):
        model(*clean)
    model(*last)
threads = [threading.Thread(target=serve, args=(first, clean)),
           threading.Thread(target=serve, args=(second, bad))]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def test_two_copies_of_one_package_on_two_threads(packages, tmp_path, capsys):
    planted = packages.get("planted", **PLANTED)
    log_path = tmp_path / "srv.log"
    run_python(DRIVER.format(tests=TESTS, planted=planted), timeout=600,
               env=clean_env(AOTI_DEBUG_LOGDEST=log_path, AOTI_DEBUG_NAN_CHECK="off"))
    text = log_path.read_text()
    heads = re.findall(r"^\[[^\]]*\] \[pid \d+\] (\S+) (\S+) (\S+)", text, re.M)
    runs = [(ident, name) for kind, ident, name in heads if kind == "run"]
    assert runs[0] == ("1", "planted#2")         # loaded second, ran first
    assert Counter(name for _, name in runs) == {"planted": 31, "planted#2": 32}
    # every launch record names its instance
    ids = [ident for kind, ident, _ in heads if kind in ("launch", "launch-end")]
    assert ids and all(re.fullmatch(r"planted(#2)?:\d+\.\d+", i) for i in ids)
    log = records.parse(text)
    assert all(l.finished for l in log.launches)
    assert Counter(l.model for l in log.launches) == {"planted": 31 * 3, "planted#2": 32 * 3}
    code, out, _ = cli(capsys, "nan-origin", log_path)
    assert code == 1
    assert re.match(r"NaN/Inf origin: launch planted#2:32\.\d cpp_fused_\w*log\w* \(pid \d+, srv\.log:\d+\)$",
                    out.splitlines()[0]), out
