"""`aoti-debug nan-origin`: the first launch or call that turned finite inputs into NaN/Inf."""

import re

import pytest

from aoti_debug.analysis import nan_origin, records
from aoti_debug.cli import main
from conftest import clean_env, run_python
from test_analysis_logs import SRC, LogWriter, T, nan_model_log, write_log

CHAIN = '''
import torch
from aoti_debug import log_api

@log_api
def shift(x):
    return x - 1.0

@log_api
def scale(x, factor):
    return x * factor

@log_api
def take_log(x):
    return torch.log(x)          # log of a negative number: NaN from finite inputs

@log_api
def double(x):
    return x * 2

@log_api
def total(x):
    return x.sum()

@log_api
def model(x):
    return total(double(take_log(scale(shift(x), 2.0))))

x = torch.tensor([[0.25, 1.0, 2.0], [3.0, 4.0, 5.0]])
CALL
'''


def chain_log(tmp_path, call="total(double(take_log(scale(shift(x), 2.0))))", level=5):
    log = tmp_path / "chain.log"
    run_python(CHAIN.replace("CALL", call),
               env=clean_env(AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=log))
    return str(log)


def cli(capsys, *argv):
    code = main(["nan-origin", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def pid_of(path):
    return re.search(r"\[pid (\d+)\]", open(path).read()).group(1)


def test_the_third_call_is_named_not_the_ones_it_poisoned(tmp_path, capsys):
    log = chain_log(tmp_path)
    code, out, err = cli(capsys, log)
    pid = pid_of(log)
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        f"NaN/Inf origin: call 3 __main__.take_log (pid {pid}, chain.log:73)",
        "  inputs (all finite):",
        "    arg[0] x: shape=(2, 3) dtype=torch.float32 min=-1.500000 max=8.000000 "
        "mean=3.083333 nan_count=0 inf_count=0",
        "  outputs (NaN/Inf):",
        "    output: shape=(2, 3) dtype=torch.float32 min=-inf max=2.079442 mean=-inf "
        "nan_count=1 inf_count=1",
        "2 later calls show NaN/Inf too (victims): call 4 __main__.double, call 5 __main__.total",
    ]


def test_an_enclosing_call_is_not_the_origin(tmp_path, capsys):
    log = chain_log(tmp_path, call="model(x)")
    code, out, _ = cli(capsys, log)
    lines = out.splitlines()
    assert code == 1
    assert lines[0].startswith("NaN/Inf origin: call 4 __main__.take_log (pid ")
    assert lines[-2:] == [
        "1 enclosing call returned NaN/Inf because of it: call 1 __main__.model",
        "2 later calls show NaN/Inf too (victims): call 5 __main__.double, call 6 __main__.total"]


def test_a_clean_log_exits_0(tmp_path, capsys):
    log = chain_log(tmp_path, call="double(shift(x))")
    assert cli(capsys, log) == (0, "no NaN/Inf in the 2 calls of the log\n", "")


def test_launch_log_names_the_kernel_its_source_and_nodes(tmp_path, capsys):
    log = write_log(tmp_path, "model.log", nan_model_log())
    code, out, err = cli(capsys, log)
    assert (code, err) == (1, "")
    assert out == (
        "NaN/Inf origin: launch 1.2 cpp_fused_log_1 (pid 4242, model.log:68)\n"
        f"  source: {SRC}:12\n"
        "  nodes:  log\n"
        "  candidate ops: log (can make NaN/Inf)\n"
        "  inputs (all finite):\n"
        "    in buf0: shape=(2, 3) dtype=torch.float32 min=-2.000000 max=4.000000 mean=1.000000 "
        "nan_count=0 inf_count=0\n"
        "  outputs (NaN/Inf):\n"
        "    out buf1: shape=(2, 3) dtype=torch.float32 min=-0.693147 max=1.386294 mean=0.350000 "
        "nan_count=2 inf_count=0\n"
        "2 later launches show NaN/Inf too (victims): 1.3 cpp_fused_mul_2, 1.4 cpp_fused_sum_3\n")


def test_clean_launch_log(tmp_path, capsys):
    log = write_log(tmp_path, "model.log", nan_model_log(nan_at=0))
    assert cli(capsys, log) == (0, "no NaN/Inf in the 4 launches of the log\n", "")


def test_inputs_without_statistics_are_said_to_be_unknown(tmp_path, capsys):
    w = LogWriter()
    w.launch("1.1", "cpp_fused_div_0", "div", f"{SRC}:20",
             inputs=[("in a", T(1.0, 2.0, 1.5)), ("in b", T(skipped="device not supported")),
                     ("in e", T(shape=(0,), skipped="empty tensor"))],   # holds nothing: finite
             outputs=[("out buf0", T(1.0, "inf", "inf", inf=1))])
    code, out, _ = cli(capsys, write_log(tmp_path, "x.log", w))
    assert code == 1
    assert "  inputs (finite where known):\n" in out
    assert "    in b: shape=(2, 3) dtype=torch.float32 stats=skipped (device not supported)\n" in out
    assert out.endswith("  note: 1 input(s) have no statistics, so their finiteness is unknown: in b\n")


def test_no_nan_names_the_outputs_without_statistics(tmp_path, capsys):
    w = LogWriter()
    w.launch("1.1", "cpp_fused_relu_0", "relu", f"{SRC}:20", inputs=[("in a", T(1.0, 2.0, 1.5))],
             outputs=[("out buf0", T(1.0, 2.0, 1.5)), ("out buf1", T(shape=(0,), skipped="empty tensor"))])
    w.launch("1.2", "cpp_fused_exp_1", "exp", f"{SRC}:21", inputs=[("in buf0", T(1.0, 2.0, 1.5))],
             outputs=[("out buf2", T(skipped="device not supported"))])
    w.launch("1.3", "cpp_fused_log_2", "log", f"{SRC}:22", inputs=[("in buf0", T(1.0, 2.0, 1.5))],
             outputs=[("out buf3", T(skipped="device not supported"))])
    assert cli(capsys, write_log(tmp_path, "x.log", w)) == (0, (
        "no NaN/Inf in the 3 launches of the log where it has statistics; 2 output(s) have none, so "
        "their finiteness is unknown (first: launch 1.2 cpp_fused_exp_1 out buf2: shape=(2, 3) dtype=torch.float32 "
        "stats=skipped (device not supported))\n"), "")


def test_records_the_logger_lost_are_named(tmp_path, capsys):
    """A full disk cost the logger records (its `note - log`): no verdict hides it."""
    w = LogWriter()
    w.launch("1.1", "cpp_fused_relu_0", "relu", f"{SRC}:20", inputs=[("in a", T(1.0, 2.0, 1.5))],
             outputs=[("out buf0", T(1.0, 2.0, 1.5))])
    w.record("note", "-", "log", ["  2 records lost: writing /data/x.log failed (No space left on device)"])
    w.launch("1.4", "cpp_fused_add_3", "add", f"{SRC}:23", inputs=[("in buf0", T(1.0, 2.0, 1.5))],
             outputs=[("out buf3", T(1.0, 2.0, 1.5))])
    log = write_log(tmp_path, "x.log", w)
    line = next(n for n, text in enumerate(open(log), 1) if text.endswith("] note - log\n"))
    lost = f"{log}:{line}: pid 4242: 2 records lost: writing /data/x.log failed (No space left on device)"
    # the run is incomplete: never a clean verdict (exit 4), and what was lost is said first
    assert cli(capsys, log) == (4, "the run is incomplete: records or tensors were lost:\n"
                                f"  {lost}\nno NaN/Inf in the 2 launches of the log\n", "")
    assert main(["diff", log, log]) == 4
    assert (f"A: the run is incomplete: records or tensors were lost:\nA:   {lost}\n"
            f"B: the run is incomplete: records or tensors were lost:\nB:   {lost}\n") in capsys.readouterr().out


def test_nan_already_in_the_model_inputs(tmp_path, capsys):
    w = LogWriter()
    w.run(1, inputs=[("in arg0_1", T(0.0, 1.0, "nan", nan=3))])
    w.launch("1.1", "cpp_fused_relu_0", "relu", f"{SRC}:30",
             inputs=[("in arg0_1", T(0.0, 1.0, "nan", nan=3))],
             outputs=[("out buf0", T(0.0, 1.0, "nan", nan=3))])
    w.run_end(1)
    code, out, _ = cli(capsys, write_log(tmp_path, "x.log", w))
    assert code == 1
    assert out.splitlines()[:2] == [
        "no launch or call turned finite inputs into NaN/Inf: NaN/Inf were already in the inputs",
        "first inputs with NaN/Inf: launch 1.1 cpp_fused_relu_0 (pid 4242, x.log:23)"]


def test_a_scalar_nan_argument_is_not_a_finite_input(tmp_path, capsys):
    w = LogWriter()
    w.launch("1.1", "cpp_fused_fill_0", "fill", f"{SRC}:40",
             inputs=[("in value", "nan")], outputs=[("out buf0", T("nan", "nan", "nan", nan=6))])
    code, out, _ = cli(capsys, write_log(tmp_path, "x.log", w))
    assert code == 1 and "first inputs with NaN/Inf: launch 1.1 cpp_fused_fill_0" in out


def test_a_later_independent_origin_is_not_called_a_victim(tmp_path, capsys):
    w = nan_model_log()
    w.launch("1.5", "cpp_fused_div_4", "div", f"{SRC}:15",
             inputs=[("in arg0_1", T(-2.0, 3.0, 0.5))], outputs=[("out buf4", T(1.0, "inf", "inf", inf=1))])
    code, out, _ = cli(capsys, write_log(tmp_path, "x.log", w))
    assert out.splitlines()[-1] == ("1 later launch also turned finite inputs into NaN/Inf: "
                                    "1.5 cpp_fused_div_4")


def test_crash_trailer_and_truncated_last_record(tmp_path, capsys):
    w = nan_model_log()
    w.record("launch", "1.5", "cpp_fused_relu_4", ["  origin: nodes=relu source=-", "  in buf3:",
                                                   "    Tensor(", "      shape=("])
    w.record("crash", "1.5", "cpp_fused_relu_4", ["  signal: SIGSEGV"])
    w.record("launch", "2.1", "cpp_fused_add_0", ["  origin: nodes=add source=/srv/app/model.py:11",
                                                  "  in arg0_1:", "    Tensor(", "      shape=(2, 3)"])
    log = write_log(tmp_path, "x.log", w.text()[:-3])
    code, out, _ = cli(capsys, log)
    assert code == 1            # an origin found before the crash stands; the crash is said first
    assert out.splitlines()[:4] == [
        "the run never finished:",
        "  launch 1.5 cpp_fused_relu_4 never finished (crash: signal: SIGSEGV); its outputs are unknown",
        "  launch 2.1 cpp_fused_add_0 never finished (no end record); its outputs are unknown",
        "NaN/Inf origin: launch 1.2 cpp_fused_log_1 (pid 4242, x.log:68)"]


def test_a_run_cut_short_without_a_crash_trailer_and_a_lone_trailer(tmp_path, capsys):
    w = nan_model_log()
    w.record("launch", "2.1", "cpp_fused_add_0", ["  origin: nodes=add source=/srv/app/model.py:11"])
    code, out, _ = cli(capsys, write_log(tmp_path, "cut.log", w))
    assert (code, out.splitlines()[:2]) == (1, [      # the origin at 1.2 was found before the cut
        "the run never finished:",
        "  launch 2.1 cpp_fused_add_0 never finished (no end record); its outputs are unknown"])
    w = nan_model_log()
    w.record("crash", "7", "mylib::gather_rows", ["  signal: SIGBUS"])
    code, out, _ = cli(capsys, write_log(tmp_path, "lone.log", w))
    assert (code, out.splitlines()[:2]) == (1, [
        "the run never finished:", "  crash trailer 7 mylib::gather_rows (pid 4242): signal: SIGBUS"])


def test_a_dump_directory_with_logs(tmp_path, capsys):
    write_log(tmp_path, "debug_4242.log", nan_model_log())
    (tmp_path / "4242-model").mkdir()
    (tmp_path / "4242-model" / "manifest.jsonl").write_text("{}\n")
    code, out, _ = cli(capsys, str(tmp_path))
    assert code == 1 and out.startswith("NaN/Inf origin: launch 1.2 cpp_fused_log_1 (pid 4242, debug_4242.log:68)")


def test_a_dump_directory_with_an_unusable_manifest(tmp_path, capsys):
    (tmp_path / "manifest.jsonl").write_text("")
    assert cli(capsys, str(tmp_path)) == (2, "", (
        f"aoti-debug nan-origin: {tmp_path}: the directory holds no *.log file with records and "
        "1 manifest.jsonl file(s) with no dumped launch or call (expected *.log files written by "
        "aoti-debug, e.g. with AOTI_DEBUG_LOGDEST=<dir>/debug_%i.log, or the dump directory of a run "
        "at AOTI_DEBUG_LOGLEVEL=10)\n"))
    (tmp_path / "manifest.jsonl").write_text("{}\n")
    assert cli(capsys, str(tmp_path)) == (2, "", (
        f"aoti-debug nan-origin: {tmp_path}/manifest.jsonl:1: kind null with event null is not a line "
        "aoti-debug writes (expected one of run/run, launch/before, launch/after, run-end/run-end, "
        "call/before, call/after)\n"))


@pytest.mark.parametrize("level", [1, 3])
def test_a_log_below_level_5_is_refused(tmp_path, capsys, level):
    log = chain_log(tmp_path, level=level)
    assert cli(capsys, log) == (2, "", (
        f"aoti-debug nan-origin: {log}: has no tensor statistics (it looks like a level-{level} log); "
        "nan-origin needs a log written at level 5 (AOTI_DEBUG_LOGLEVEL=5)\n"))


def test_missing_file_and_file_without_records(tmp_path, capsys):
    assert cli(capsys, str(tmp_path / "nope.log")) == (2, "", (
        f"aoti-debug nan-origin: {tmp_path}/nope.log: no such file or directory "
        "(expected a log file written by aoti-debug, or a dump directory)\n"))
    empty = write_log(tmp_path, "empty.log", "")
    assert cli(capsys, empty) == (2, "", (
        f"aoti-debug nan-origin: {empty}: holds no aoti-debug records "
        "(expected a log written with AOTI_DEBUG_LOGLEVEL >= 1)\n"))


def test_the_installed_entry_point(tmp_path):
    import subprocess
    import sys
    log = write_log(tmp_path, "model.log", nan_model_log())
    proc = subprocess.run([sys.executable, "-m", "aoti_debug", "nan-origin", log],
                          capture_output=True, text=True, env=clean_env())
    assert proc.returncode == 1 and proc.stderr == ""
    assert proc.stdout.startswith("NaN/Inf origin: launch 1.2 cpp_fused_log_1")


def test_victims_list_is_capped():
    w = nan_model_log()
    for k in range(5, 20):
        w.launch(f"1.{k}", f"k{k}", inputs=[("in x", T(0.0, 1.0, "nan", nan=1))],
                 outputs=[("out y", T(0.0, 1.0, "nan", nan=1))])
    finding = nan_origin.find(records.parse(w.text()))
    assert nan_origin.text(finding)[-1] == (
        "17 later launches show NaN/Inf too (victims): 1.3 cpp_fused_mul_2, 1.4 cpp_fused_sum_3, "
        "1.5 k5, 1.6 k6, 1.7 k7, 1.8 k8, 1.9 k9, 1.10 k10, 1.11 k11, 1.12 k12, ... (7 more)")


def test_the_runtime_nan_checker_note_on_the_origin_is_shown(tmp_path, capsys):
    w = nan_model_log()
    w.record("note", "-", "nan-check", [
        "  launch 1.2 cpp_fused_log_1 (source /srv/app/model.py:12) wrote 2 NaN into buf1 "
        "(first at flat index 4); its inputs were finite, so this launch is where they first appear",
        "  launch 1.3 cpp_fused_mul_2 (source /srv/app/model.py:13) wrote 2 NaN into buf2"])
    code, out, _ = cli(capsys, write_log(tmp_path, "x.log", w))
    assert code == 1
    assert out.splitlines()[-2] == (
        "  runtime note: launch 1.2 cpp_fused_log_1 (source /srv/app/model.py:12) wrote 2 NaN into buf1 "
        "(first at flat index 4); its inputs were finite, so this launch is where they first appear")


def layers_log(bad_layer):
    """Three encoder layers of one model: each launch of a layer on the line all three
    share (modeling.py:224), told apart only by the module running it."""
    w = LogWriter()
    w.run(1, inputs=[("in x", T(-1.0, 1.0, 0.0))])
    for k in range(3):
        nan = 2 if k >= bad_layer else 0
        given = T(-1.0, 1.0, 0.0, nan=2 if k > bad_layer else 0)
        w.launch(f"1.{k + 1}", "aoti_torch_cpu_addmm", "addmm", "/srv/app/modeling.py:224",
                 module=f"model.vit.layers.{k}.attention.q_proj",
                 inputs=[("in buf", given)], outputs=[("out buf", T(-1.0, 1.0, 0.0, nan=nan))])
    return w.run_end(1)


def test_a_finding_names_the_layer_beside_the_line_all_layers_share(tmp_path, capsys):
    log = write_log(tmp_path, "layers.log", layers_log(1))
    code, out, err = cli(capsys, log)
    assert (code, err) == (1, "")
    assert out.splitlines()[:3] == [
        "NaN/Inf origin: launch 1.2 aoti_torch_cpu_addmm (pid 4242, layers.log:55)",
        "  source: /srv/app/modeling.py:224, module model.vit.layers.1.attention.q_proj",
        "  nodes:  addmm"], out
    origin = records.parse(layers_log(1).text()).launches[1].origin
    assert (origin.source, origin.module) == ("/srv/app/modeling.py:224", "model.vit.layers.1.attention.q_proj")
