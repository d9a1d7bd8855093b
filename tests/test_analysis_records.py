"""The log parser: records, items, tensor blocks, grouping, and tolerance of odd input."""

import math
import re

import pytest

from aoti_debug.analysis import load, records
from aoti_debug.analysis.records import Container, LogInputError, Tensor, parse
from conftest import clean_env, run_python
from test_analysis_logs import PID, LogWriter, Seq, T, nan_model_log, write_log

CHAIN = '''
import torch
from aoti_debug import log_api

@log_api
def pair(x, n=2, *, tag="t"):
    return {"sum": x.sum(), "parts": [x, n]}

pair(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), tag="a")
'''


def logger_log(tmp_path, level, code=CHAIN):
    log = tmp_path / f"level{level}.log"
    run_python(code, env=clean_env(AOTI_DEBUG_LOGLEVEL=level, AOTI_DEBUG_LOGDEST=log))
    return log


def test_python_logger_log_parses_into_calls_with_nested_containers(tmp_path):
    log = load.read(str(logger_log(tmp_path, 5)))
    assert [(r.kind, r.id, r.name) for r in log.records] == [
        ("call", "1", "__main__.pair"), ("return", "1", "__main__.pair")]
    assert len(log.banners) == 1 and log.banners[0].facts["aoti-debug version"] == "0.1.0"
    assert log.unknown_lines == [] and all(r.unparsed == [] for r in log.records)
    (call,) = log.calls
    assert call.title == "call 1 __main__.pair" and call.finished
    assert [(i.label, i.role, i.name) for i in call.inputs] == [
        ("arg[0] x", "arg", "x"), ('kwarg tag', "kwarg", "tag"), ("default n", "default", "n")]
    x = call.inputs[0].value
    assert isinstance(x, Tensor) and x.shape == "(2, 2)" and x.dtype == "torch.float32"
    assert x.stats == {"min": 1.0, "max": 4.0, "mean": 2.5, "nan_count": 0, "inf_count": 0}
    assert x.nonfinite() is False
    assert call.inputs[1].value == '"a"' and call.inputs[2].value == "2"
    (output,) = call.outputs
    assert isinstance(output.value, Container) and output.value.kind == "dict"
    assert [label for label, _ in output.tensors()] == ['output["sum"]', 'output["parts"][0]']
    assert list(output.inline_values()) == [('output["parts"][1]', "2")]
    assert log.level_hint() == 5


@pytest.mark.parametrize("level", [1, 3, 5])
def test_level_hint_says_what_the_log_holds(tmp_path, level):
    assert load.read(str(logger_log(tmp_path, level))).level_hint() == level


def test_launch_and_launch_end_are_grouped_with_origin_inputs_and_outputs():
    log = parse(nan_model_log().text(), "model.log")
    assert [l.ident for l in log.launches] == ["1.1", "1.2", "1.3", "1.4"]
    launch = log.launches[2]
    assert (launch.run, launch.index, launch.name, launch.pid) == (1, 3, "cpp_fused_mul_2", PID)
    assert launch.origin.nodes == ["mul"] and launch.origin.source == "/srv/app/model.py:13"
    assert launch.origin.file_and_line == ("/srv/app/model.py", 13)
    assert [i.label for i in launch.inputs] == ["in buf1", "in scale"]
    assert launch.inputs[1].value == "2.000000"
    assert [i.label for i in launch.outputs] == ["out buf2"]
    assert launch.outputs[0].value.stats["nan_count"] == 2
    assert launch.start.timestamp == "2026-11-21 05:30:45.000220" and launch.end.line == 116
    assert [e.ident for e in log.events] == ["1.1", "1.2", "1.3", "1.4"]
    runs = [r for r in log.records if r.kind in ("run", "run-end")]
    assert [(r.kind, r.id, [i.label for i in r.items]) for r in runs] == [
        ("run", "1", ["in arg0_1"]), ("run-end", "1", ["out buf3"])]


def test_inout_arguments_count_as_input_and_output_and_unknown_origin_parts_are_none():
    w = LogWriter()
    w.launch("1.1", "cpp_fused_add_0", inputs=[("inout buf0", T(0.0, 1.0, 0.5))],
             outputs=[("inout buf0", T(1.0, 2.0, 1.5))])
    (launch,) = parse(w.text()).launches
    assert launch.origin.nodes == [] and launch.origin.source is None
    assert [i.label for i in launch.inputs] == ["inout buf0"]
    assert launch.outputs[0].value.stats["min"] == 1.0


def test_records_of_several_processes_with_the_same_launch_number_stay_apart():
    a, b = LogWriter(pid=1, with_banner=False), LogWriter(pid=2, with_banner=False)
    a.record("launch", "1.1", "k", ["  origin: nodes=add source=-"])
    b.record("launch", "1.1", "k", ["  origin: nodes=add source=-"])
    a.record("launch-end", "1.1", "k", ["  out buf0: 1"], step=0)
    b.record("launch-end", "1.1", "k", ["  out buf0: 2"], step=0)
    text = a.parts[0] + b.parts[0] + a.parts[1] + b.parts[1]
    log = parse(text)
    assert [(l.pid, l.outputs[0].value) for l in log.launches] == [(1, "1"), (2, "2")]


def test_statistics_of_every_dtype_class_and_skipped_statistics():
    w = LogWriter(with_banner=False)
    w.launch("1.1", "k", inputs=[
        ("in f", T("-inf", "inf", "nan", nan=0, inf=2)),
        ("in i", T(-7, 18446744073709551615, 3.5, shape=(2,), dtype="torch.uint64")),
        ("in e", T(shape=(0,), skipped="empty tensor")),
        ("in c", Seq("tuple", [("[0]", T(1.0, 2.0, 1.5, shape=(2,), dtype="torch.bfloat16"))]))])
    f, i, e, c = parse(w.text()).launches[0].inputs
    assert f.value.stats["min"] == -math.inf and math.isnan(f.value.stats["mean"])
    assert f.value.nonfinite() is True
    assert i.value.stats["max"] == 18446744073709551615 and i.value.dtype_class == "int"
    assert i.value.nonfinite() is False
    assert e.value.skipped == "empty tensor" and e.value.nonfinite() is False   # holds no element
    assert e.value.summary() == "shape=(0,) dtype=torch.float32 stats=skipped (empty tensor)"
    assert [label for label, _ in c.tensors()] == ["in c[0]"]


def test_a_float8_blocks_saturation_count_is_read_and_a_bad_one_is_damage():
    """sat_count (the float8 kinds, section 3) is a statistic and a count: read as a number,
    shown with the others, and `sat_count=nan` is damage, never a number."""
    block = ["  in w:", "    Tensor(", "      shape=(2, 3)", "      dtype=torch.float8_e4m3fn",
             "      min=-448.000000", "      max=448.000000", "      mean=0.000000", "      nan_count=1",
             "      inf_count=0", "      sat_count=3", "    )"]
    w = LogWriter(with_banner=False)
    w.record("launch", "1.1", "k", ["  origin: nodes=- source=-"] + block)
    (launch,) = parse(w.text()).launches
    assert launch.start.unparsed == [] and launch.start.damage is None
    (w_,) = launch.inputs
    assert w_.value.stats["sat_count"] == 3 and w_.value.nonfinite() is True
    assert w_.value.stats_text() == ("min=-448.000000 max=448.000000 mean=0.000000 nan_count=1 inf_count=0 "
                                     "sat_count=3")
    bad = LogWriter(with_banner=False)
    bad.record("launch", "1.1", "k", ["  origin: nodes=- source=-"] + [
        line.replace("sat_count=3", "sat_count=nan") for line in block])
    (record,) = parse(bad.text(), "x.log").records
    assert record.damage == ("x.log:12: 'sat_count=nan' is not a count (expected a whole number of at "
                             "most 20 digits)")


def test_a_float4_block_is_read_as_a_narrow_floating_one():
    """float4_e2m1fn_x2 (two e2m1 values a byte): the floating class, its sat_count read, and
    narrow (1 mantissa bit: a step is half the value), so diff judges it at rtol 0.5."""
    from aoti_debug.analysis.diff import _own
    from aoti_debug.analysis.records import MANTISSA, NARROW
    block = ["  in q:", "    Tensor(", "      shape=(2, 2)", "      dtype=torch.float4_e2m1fn_x2",
             "      min=-6.000000", "      max=6.000000", "      mean=0.500000", "      nan_count=0",
             "      inf_count=0", "      sat_count=2", "      hash=bee9976d8c555a01", "    )"]
    w = LogWriter(with_banner=False)
    w.record("launch", "1.1", "k", ["  origin: nodes=- source=-"] + block)
    (launch,) = parse(w.text()).launches
    assert launch.start.unparsed == [] and launch.start.damage is None
    (q,) = launch.inputs
    assert q.value.dtype_class == "float" and q.value.nonfinite() is False
    assert q.value.stats == {"min": -6.0, "max": 6.0, "mean": 0.5, "nan_count": 0, "inf_count": 0,
                             "sat_count": 2}
    assert (MANTISSA["float4_e2m1fn_x2"], NARROW["float4_e2m1fn_x2"]) == (1, 0.5)
    assert _own(q.value).rtol == 0.5 and _own(q.value).dtype == "float4_e2m1fn_x2"


def test_dict_keys_with_brackets_and_colons_are_read():
    text = ("[2026-11-21 05:30:45.000001] [pid 1] call 1 f\n"
            "  arg[0] d:\n    dict(len=2)\n"
            '      ["a]: b"]:\n' + "".join("        " + l + "\n" for l in T(0.0, 1.0, 0.5).lines)
            + '      [3]: {"x": nan}\n')
    (call,) = parse(text).calls
    assert [label for label, _ in call.inputs[0].tensors()] == ['arg[0] d["a]: b"]']
    assert list(call.inputs[0].inline_values()) == [("arg[0] d[3]", '{"x": nan}')]
    assert records.inline_nonfinite('{"x": nan}') and not records.inline_nonfinite('"nan"')
    assert records.inline_nonfinite("-inf") and not records.inline_nonfinite("Mode.nan")


def test_truncated_last_record_and_crash_trailer():
    w = nan_model_log(nan_at=0)
    w.record("launch", "1.5", "cpp_fused_relu_4", ["  origin: nodes=relu source=/srv/app/model.py:15"])
    w.record("crash", "1.5", "cpp_fused_relu_4", ["  signal: SIGSEGV"])
    w.record("launch", "2.1", "cpp_fused_add_0", ["  origin: nodes=add source=/srv/app/model.py:11",
                                                  "  in arg0_1:", "    Tensor(", "      shape=(2, 3)",
                                                  "      stride=(3, 1)", "      dtype=torch.flo"])
    text = w.text()[:-1]                  # the last line lost its newline too
    log = parse(text)
    relu, cut = log.launches[-2], log.launches[-1]
    assert not relu.finished and relu.crash.notes == ["signal: SIGSEGV"]
    assert log.crashes == [relu.crash]
    assert cut.start.truncated and cut.inputs[0].value.truncated
    assert cut.inputs[0].value.fields == {"shape": "(2, 3)", "stride": "(3, 1)", "dtype": "torch.flo"}


def test_crash_without_a_launch_in_flight():
    log = parse("[2026-11-21 05:30:45.000001] [pid 1] crash - -\n  signal: SIGABRT\n")
    assert log.launches == [] and log.crashes[0].notes == ["signal: SIGABRT"]


def test_foreign_lines_are_kept_aside_and_bad_body_lines_are_kept_in_the_record():
    w = nan_model_log()
    text = ("program says hello\n" + w.text().replace(
        "  origin: nodes=mul", "  something odd\n  origin: nodes=mul", 1)
        + "[not a header]\n" + RULE_LINE + "\nTraceback (most recent call last):\n")
    log = parse(text)
    assert log.unknown_lines == [(1, "program says hello"), (179, "[not a header]"),
                                 (180, "=" * 80), (181, "Traceback (most recent call last):")]
    launch = log.launches[2]
    assert launch.start.unparsed == ["  something odd", "  origin: nodes=mul source=/srv/app/model.py:13"]
    assert len(log.launches) == 4 and len(log.banners) == 1


RULE_LINE = "=" * 80


def test_no_prefix_of_a_log_makes_the_parser_raise():
    text = nan_model_log().text()
    for cut in range(0, len(text), 7):
        log = parse(text[:cut])
        assert len(log.launches) <= 4


def test_masked_logs_parse_too():
    from aoti_debug.analysis.mask import mask
    log = parse(mask(nan_model_log().text()))
    assert log.launches[0].pid == -1 and log.launches[0].start.timestamp == "TIMESTAMP"
    assert len(log.banners) == 1


def test_read_errors_name_the_path_and_what_is_accepted(tmp_path):
    with pytest.raises(LogInputError) as missing:
        load.read(str(tmp_path / "nope.log"))
    assert str(missing.value) == (f"{tmp_path}/nope.log: no such file or directory (expected a log "
                                  "file written by aoti-debug, or a dump directory)")
    empty = write_log(tmp_path, "empty.log", "hello\n")
    with pytest.raises(LogInputError) as no_records:
        load.read(empty)
    assert str(no_records.value) == (f"{empty}: holds no aoti-debug records "
                                     "(expected a log written with AOTI_DEBUG_LOGLEVEL >= 1)")


def test_a_dump_directory_reads_its_logs_merged_by_time(tmp_path):
    dump = tmp_path / "dumps"
    (dump / "11-model").mkdir(parents=True)
    (dump / "11-model" / "manifest.jsonl").write_text("")      # a folder with nothing dumped yet
    first, second = LogWriter(pid=11), LogWriter(pid=12, start_us=105)
    first.launch("1.1", "a").launch("1.2", "b")
    second.launch("1.1", "c")
    write_log(dump / "11-model", "debug_11.log", first)
    write_log(dump, "debug_12.log", second)
    log = load.read(str(dump))
    assert [(l.pid, l.name) for l in log.launches] == [(11, "a"), (12, "c"), (11, "b")]
    assert all(l.finished for l in log.launches) and len(log.banners) == 2


def test_a_directory_without_logs_or_usable_dumps_says_so(tmp_path):
    (tmp_path / "11-model").mkdir()
    (tmp_path / "11-model" / "manifest.jsonl").write_text("")
    with pytest.raises(LogInputError) as err:
        load.read(str(tmp_path))
    assert str(err.value) == (
        f"{tmp_path}: the directory holds no *.log file with records and 1 manifest.jsonl file(s) "
        "with no dumped launch or call (expected *.log files written by aoti-debug, e.g. with "
        "AOTI_DEBUG_LOGDEST=<dir>/debug_%i.log, or the dump directory of a run at AOTI_DEBUG_LOGLEVEL=10)")
    (tmp_path / "11-model" / "manifest.jsonl").unlink()
    with pytest.raises(LogInputError) as err:
        load.read(str(tmp_path))
    assert str(err.value).startswith(f"{tmp_path}: the directory holds no *.log file with records and "
                                     "no dump folder (manifest.jsonl) (expected ")


def test_parsing_needs_no_torch():
    proc = run_python("""
        import sys
        import aoti_debug.cli, aoti_debug.analysis.records, aoti_debug.analysis.load
        import aoti_debug.analysis.nan_origin
        import aoti_debug.analysis.diff, aoti_debug.analysis.report
        from aoti_debug.commands import nan_origin, diff, report
        print(sorted(m for m in ("torch", "numpy") if m in sys.modules))
    """)
    assert proc.stdout == "[]\n"


def test_module_lines_name_each_outputs_layer_and_a_bad_one_is_not_read():
    """`module:` after the origin line; `output-module:` for an output of another line
    (docs/log-format.md 1.1): where_of names each output's own line with its own module."""
    w = LogWriter()
    w.launch("1.1", "cpp_fused_add_mul_0", "add,mul", "/srv/app/model.py:11", module="blocks.0.norm",
             lines=["  source-line: /srv/app/model.py:11 nodes=add", "  source-line: /srv/app/model.py:40 nodes=mul",
                    "  output-source: buf1 /srv/app/model.py:40", "  output-module: buf1 head.proj"],
             outputs=[("out buf0", T(0.0, 1.0, 0.5)), ("out buf1", T(0.0, 1.0, 0.5))])
    w.launch("1.2", "k", "add", "/srv/app/model.py:11", module="two words")
    first, second = parse(w.text()).launches
    origin = first.origin
    assert (origin.module, origin.output_modules) == ("blocks.0.norm", {"buf1": "head.proj"})
    assert origin.where_of(["out buf0"]) == "/srv/app/model.py:11, module blocks.0.norm"
    assert origin.where_of(["out buf1"]) == "/srv/app/model.py:40, module head.proj"
    assert origin.where_of(["out buf0", "out buf1"]) == \
        "/srv/app/model.py:11, module blocks.0.norm; /srv/app/model.py:40, module head.proj"
    assert first.start.unparsed == []
    # a module path has no space: the line is kept aside, not read as a module
    assert second.origin.module is None and second.start.unparsed == ["  module: two words"]


# -- a long run's log: read a block at a time, values read again when asked ------------------

def big_record_log(path, launches, tensors, nan_at):
    """`launches` launches, each reading a list of `tensors` tensors (a record of ~330 bytes
    per tensor); launch `nan_at` turns them into NaN."""
    w = LogWriter()
    with open(path, "w") as f:
        for k in range(1, launches + 1):
            many = Seq("list", [(f"[{i}]", T(0.0, 1.0, 0.5)) for i in range(tensors)])
            w.launch(f"model:1.{k}", f"cpp_fused_add_{k}", "add", f"/srv/app/model.py:{k}",
                     inputs=[("in bufs", many)], outputs=[("out buf", T(0.0, 1.0, 0.5, nan=int(k == nan_at)))])
            f.write(w.text())
            w.parts = []
    return path


PEAK = '''
import resource
from aoti_debug.cli import main
code = main(["nan-origin", LOG])
print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
'''


def test_nan_origin_memory_grows_with_the_records_not_with_what_they_hold(tmp_path):
    small = big_record_log(tmp_path / "small.log", 1, 1, 1)
    large = big_record_log(tmp_path / "large.log", 60, 1000, 50)
    size = large.stat().st_size
    assert size > 17 * 2**20
    peaks = {}
    for log, k in ((small, 1), (large, 50)):
        header = f"launch model:1.{k} cpp_fused_add_{k}"
        line = next(n for n, text in enumerate(open(log), 1) if text.endswith(header + "\n"))
        out = run_python(PEAK.replace("LOG", repr(str(log))), env=clean_env()).stdout.splitlines()
        assert out[0] == f"NaN/Inf origin: {header} (pid {PID}, {log.name}:{line})"
        code, peak = out[-1].split()
        assert code == "1"
        peaks[log] = int(peak)
    # held whole, the parsed values took 11 times the log (+208 MB); now a few records' worth
    assert peaks[large] - peaks[small] < size, (peaks, size)


def test_a_log_rewritten_while_it_is_read_is_refused_not_misread(tmp_path):
    path = write_log(tmp_path, "x.log", nan_model_log())
    log = load.read(path)
    launch = log.launches[1]
    assert [i.label for i in launch.inputs] == ["in buf0"]
    text = open(path).read()
    open(path, "w").write(text.replace("launch model:1.2 ", "launch model:1.9 ").replace("launch 1.2 ", "launch 1.9 "))
    header = launch.start.line
    with pytest.raises(records.InputError) as info:
        records._reread.cache_clear()
        launch.inputs
    assert str(info.value) == (f"{path}:{header}: the file changed while it was being read "
                               "(read a log once its process has stopped writing it, or a copy)")


@pytest.mark.parametrize("command", ["report", "timeline"])
def test_a_page_or_trace_of_a_log_rewritten_meanwhile_is_not_left_half_written(tmp_path, capsys, monkeypatch,
                                                                               command):
    from aoti_debug.analysis import report, timeline
    from aoti_debug.cli import main
    path = write_log(tmp_path, "x.log", nan_model_log())
    module, name = (report, "render") if command == "report" else (timeline, "build")
    made = getattr(module, name)

    def then_rewritten(*args, **kwargs):       # the log changes after it was read, before it is written
        got = made(*args, **kwargs)
        text = open(path).read()
        open(path, "w").write(text.replace("launch model:1.", "launch other:1.").replace("launch 1.", "launch 9."))
        records._reread.cache_clear()
        return got

    monkeypatch.setattr(module, name, then_rewritten)
    out = tmp_path / "out"
    code = main([command, path, "-o", str(out)])
    _, err = capsys.readouterr()
    assert code == 2 and not out.exists()
    assert re.fullmatch(rf"aoti-debug {command}: {re.escape(path)}:\d+: the file changed while it was being "
                        r"read \(read a log once its process has stopped writing it, or a copy\)\n", err), err


def test_a_scales_block_is_read_and_a_bad_count_or_name_is_damage():
    """A scale's lines after its statistics (section 3): which of its op's scales it is and
    its zero and subnormal counts, read as whole numbers; `zero_count=-1` is damage, and a
    `scale=` naming no scale argument is a line that cannot be read."""
    block = ["  in constant3:", "    Tensor(", "      shape=()", "      dtype=torch.float32",
             "      min=0.000000", "      max=0.000000", "      mean=0.000000", "      nan_count=0",
             "      inf_count=0", "      hash=0000000000000000", "      scale=scale_a", "      zero_count=1",
             "      subnormal_count=0", "    )"]
    w = LogWriter(with_banner=False)
    w.record("launch", "1.2", "k", ["  origin: nodes=- source=-"] + block)
    (launch,) = parse(w.text()).launches
    assert launch.start.unparsed == [] and launch.start.damage is None
    (scale,) = launch.inputs
    assert scale.value.scale == "scale_a"
    assert scale.value.scale_counts() == {"zero_count": 1, "subnormal_count": 0}
    bad = LogWriter(with_banner=False)
    bad.record("launch", "1.2", "k", ["  origin: nodes=- source=-"] + [
        line.replace("zero_count=1", "zero_count=-1") for line in block])
    (record,) = parse(bad.text(), "x.log").records
    assert record.damage == "x.log:14: 'zero_count=-1' is not a count (expected a whole number of at most 20 digits)"
    odd = LogWriter(with_banner=False)
    odd.record("launch", "1.2", "k", ["  origin: nodes=- source=-"] + [
        line.replace("scale=scale_a", "scale=bias") for line in block])
    (launch,) = parse(odd.text()).launches
    assert launch.inputs[0].value.scale is None and launch.start.unparsed != []


def test_an_operands_dequant_lines_are_read_and_a_bad_count_is_damage():
    """A scaled operand's lines after its statistics (section 3.3): scaled_by=, the
    dequantized min/max/mean as numbers and their NaN/Inf counts as whole numbers;
    `dequant_nan_count=nan` is damage, a `dequant=skipped (...)` is kept with its reason."""
    block = ["  in buf0:", "    Tensor(", "      shape=(4, 32)", "      dtype=torch.float8_e4m3fn",
             "      min=-448.000000", "      max=448.000000", "      mean=1.500000", "      nan_count=0",
             "      inf_count=0", "      sat_count=2", "      hash=0000000000000000",
             "      scaled_by=scale_a (block 1x32, swizzled)", "      dequant_min=-22.400000",
             "      dequant_max=inf", "      dequant_mean=0.075000", "      dequant_nan_count=1",
             "      dequant_inf_count=2", "    )"]
    w = LogWriter(with_banner=False)
    w.record("launch", "1.2", "k", ["  origin: nodes=- source=-"] + block)
    (launch,) = parse(w.text()).launches
    assert launch.start.unparsed == [] and launch.start.damage is None
    (operand,) = launch.inputs
    assert operand.value.scaled_by == "scale_a (block 1x32, swizzled)"
    assert operand.value.dequant() == {"dequant_min": -22.4, "dequant_max": math.inf, "dequant_mean": 0.075,
                                       "dequant_nan_count": 1, "dequant_inf_count": 2}
    bad = LogWriter(with_banner=False)
    bad.record("launch", "1.2", "k", ["  origin: nodes=- source=-"] + [
        line.replace("dequant_nan_count=1", "dequant_nan_count=nan") for line in block])
    (record,) = parse(bad.text(), "x.log").records
    assert record.damage == ("x.log:18: 'dequant_nan_count=nan' is not a count (expected a whole number of at "
                             "most 20 digits)")
    skipped = LogWriter(with_banner=False)
    skipped.record("launch", "1.2", "k", ["  origin: nodes=- source=-"] + block[:12] + [
        "      dequant=skipped (device not supported)", "    )"])
    (launch,) = parse(skipped.text()).launches
    assert launch.start.unparsed == [] and launch.inputs[0].value.dequant() == {}
    assert launch.inputs[0].value.fields["dequant"] == "skipped (device not supported)"
