"""`aoti-debug diff A B`: launch-by-launch alignment and comparison of two logs."""

from aoti_debug.analysis import diff, records
from aoti_debug.cli import main
from test_analysis_logs import SRC, LogWriter, T, write_log

# (kind of kernel, FX nodes, source line, output statistics (min, max, mean))
KERNELS = [("add", "add", 11, (-2.0, 4.0, 1.0)),
           ("mm", "mm,relu", 12, (0.0, 9.5, 2.25)),
           ("mul", "mul", 13, (-3.0, 6.0, 1.5)),
           ("sum", "sum_1", 14, (9.0, 9.0, 9.0))]


def model_log(pid=1, *, change=None, prefix="cpp_fused", extra=None, nodes=True, runs=(1,),
              level=5, hashes=None):
    """One launch per kernel and run; `change` maps a kernel kind to other output statistics,
    `extra` = (after kind, kernel kind) inserts a launch that only this side has; `hashes`
    maps a kernel kind to its output's content hash (none written for the others)."""
    w = LogWriter(pid)
    for run in runs:
        w.run(run)
        k = 0
        x = T(-2.0, 3.0, 0.5) if level >= 5 else T()
        for kind, node_names, line, stats in KERNELS:
            plan = [(kind, node_names, line, stats)]
            if extra and extra[0] == kind:
                plan.append((extra[1], extra[1], 90, (0.0, 1.0, 0.5)))
            for name, fx, src_line, (mn, mx, mean) in plan:
                nan = 0
                if change and name in change:
                    mn, mx, mean, nan = change[name]
                k += 1
                shape = () if name == "sum" else (2, 3)
                digest = (hashes or {}).get(name)
                out = T(mn, mx, mean, nan=nan, shape=shape, hash=digest) if level >= 5 else T(shape=shape)
                w.launch(f"{run}.{k}", f"{prefix}_{name}_{k - 1}",
                         fx if nodes else "-", f"{SRC}:{src_line}" if nodes else "-",
                         inputs=[("in x", x)], outputs=[(f"out buf{k - 1}", out)])
        w.run_end(run)
    return w


def cli(capsys, *argv):
    code = main(["diff", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def logs(tmp_path, a, b):
    return write_log(tmp_path, "a.log", a), write_log(tmp_path, "b.log", b)


def test_two_logs_that_agree_within_tolerance(tmp_path, capsys):
    a, b = logs(tmp_path, model_log(1), model_log(2, change={"mm": (0.0, 9.5, 2.250001, 0)}))
    assert cli(capsys, a, b) == (0, (
        f"A: {a}\n"
        f"B: {b}\n"
        "A    B    kernel           status  largest delta\n"
        "1.1  1.1  cpp_fused_add_0  ok      0\n"
        "1.2  1.2  cpp_fused_mm_1   ok      out buf1 mean delta 1e-06\n"
        "1.3  1.3  cpp_fused_mul_2  ok      0\n"
        "1.4  1.4  cpp_fused_sum_3  ok      0\n"
        "the logs agree: 4 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)\n"), "")


def test_a_perturbed_op_is_named_with_its_source_line(tmp_path, capsys):
    a, b = logs(tmp_path, model_log(1), model_log(2, change={"mm": (0.0, 9.5, 2.4, 0),
                                                            "mul": (-3.0, 6.0, 1.6, 0)}))
    code, out, err = cli(capsys, a, b)
    assert (code, err) == (1, "")
    assert out.splitlines()[2:] == [
        "A    B    kernel           status   largest delta",
        "1.1  1.1  cpp_fused_add_0  ok       0",
        "1.2  1.2  cpp_fused_mm_1   DIFFERS  out buf1 mean 2.250000 vs 2.400000 (delta 0.15)",
        "1.3  1.3  cpp_fused_mul_2  DIFFERS  out buf2 mean 1.500000 vs 1.600000 (delta 0.1)",
        "1.4  1.4  cpp_fused_sum_3  ok       0",
        "first divergence: A 1.2 cpp_fused_mm_1 / B 1.2 cpp_fused_mm_1",
        f"  source: {SRC}:12",
        "  nodes:  mm, relu",
        "  out buf1 mean 2.250000 vs 2.400000 (delta 0.15), allowed 0.00241",
        "  A out buf1: shape=(2, 3) dtype=torch.float32 min=0.000000 max=9.500000 mean=2.250000 "
        "nan_count=0 inf_count=0",
        "  B out buf1: shape=(2, 3) dtype=torch.float32 min=0.000000 max=9.500000 mean=2.400000 "
        "nan_count=0 inf_count=0",
        "1 later aligned launch(es) differ too",
    ]


def test_an_extra_launch_on_one_side_does_not_shift_the_rest(tmp_path, capsys):
    a, b = logs(tmp_path, model_log(1), model_log(2, extra=("mm", "clone")))
    code, out, _ = cli(capsys, a, b)
    assert code == 0
    assert out.splitlines()[2:] == [
        "A    B    kernel                             status     largest delta",
        "1.1  1.1  cpp_fused_add_0                    ok         0",
        "1.2  1.2  cpp_fused_mm_1                     ok         0",
        "-    1.3  cpp_fused_clone_2                  only in B  -",
        "1.3  1.4  cpp_fused_mul_2 / cpp_fused_mul_3  ok         0",
        "1.4  1.5  cpp_fused_sum_3 / cpp_fused_sum_4  ok         0",
        "0 launch(es) only in A, 1 only in B (not compared)",
        "the logs agree: 4 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)",
    ]
    # the other way round the extra launch is only in A
    code, out, _ = cli(capsys, b, a)
    assert code == 0 and "1.3  -    cpp_fused_clone_2                  only in A  -" in out


def test_kernels_named_differently_on_another_device_align_by_their_nodes(tmp_path, capsys):
    a, b = logs(tmp_path, model_log(1), model_log(2, prefix="triton_poi_fused",
                                                  change={"mul": (-3.0, 6.0, 1.5, 1)}))
    code, out, _ = cli(capsys, a, b)
    assert code == 1
    assert "1.3  1.3  cpp_fused_mul_2 / triton_poi_fused_mul_2  DIFFERS  out buf2 nan_count 0 vs 1" in out
    assert "first divergence: A 1.3 cpp_fused_mul_2 / B 1.3 triton_poi_fused_mul_2" in out


def test_without_provenance_kernels_align_by_name_stem(tmp_path):
    a = records.parse(model_log(1, nodes=False).text())
    b = records.parse(model_log(2, nodes=False, prefix="triton_poi_fused", extra=("add", "clone")).text())
    result = diff.diff(a, b)
    assert [(r.a and r.a.ident, r.b and r.b.ident, r.status) for r in result.rows] == [
        ("1.1", "1.1", "ok"), (None, "1.2", "only in B"), ("1.2", "1.3", "ok"),
        ("1.3", "1.4", "ok"), ("1.4", "1.5", "ok")]


def test_counts_must_match_exactly_and_tolerances_are_options(tmp_path, capsys):
    a, b = logs(tmp_path, model_log(1), model_log(2, change={"sum": (9.0, 9.0, 9.05, 0)}))
    assert cli(capsys, a, b)[0] == 1
    assert cli(capsys, a, b, "--atol", "0.1")[0] == 0
    assert cli(capsys, a, b, "--rtol", "0.01")[0] == 0
    assert cli(capsys, a, b, "--rtol", "-1") == (2, "", (
        "aoti-debug diff: --atol 1e-05 / --rtol -1: tolerances must be >= 0\n"))


def test_run_selection(tmp_path, capsys):
    a, b = logs(tmp_path, model_log(1, runs=(1, 2)),
                model_log(2, runs=(1, 2), change={"add": (-2.0, 4.5, 1.0, 0)}))
    code, out, _ = cli(capsys, a, b)
    assert code == 1 and "first divergence: A 1.1 cpp_fused_add_0 / B 1.1 cpp_fused_add_0" in out
    code, out, _ = cli(capsys, a, b, "--run", "2")
    assert code == 1 and "first divergence: A 2.1 cpp_fused_add_0 / B 2.1 cpp_fused_add_0" in out
    assert cli(capsys, a, b, "--run", "3") == (2, "", (
        f"aoti-debug diff: {a}: has no launches of run 3 (runs in this log: 1, 2)\n"))


def test_bad_inputs(tmp_path, capsys):
    a = write_log(tmp_path, "a.log", model_log(1))
    low = write_log(tmp_path, "low.log", model_log(2, level=3))
    assert cli(capsys, a, low) == (2, "", (
        f"aoti-debug diff: {low}: has no tensor statistics (it looks like a level-3 log); "
        "diff needs logs written at level 5 (AOTI_DEBUG_LOGLEVEL=5)\n"))
    assert cli(capsys, a, str(tmp_path / "missing.log")) == (2, "", (
        f"aoti-debug diff: {tmp_path}/missing.log: no such file or directory "
        "(expected a log file written by aoti-debug, or a dump directory)\n"))
    assert cli(capsys, a) == (2, "", "aoti-debug diff: expected two logs, A and B, and got 1 "
                                     "(or --ranks with the logs of one job)\n")


def test_a_crashed_launch_cannot_be_compared_but_does_not_stop_the_diff(tmp_path, capsys):
    w = model_log(2)
    text = w.text()
    cut = text.index("[2026-11-21 05:30:45.000260] [pid 2] launch-end 1.3")
    crashed = text[:cut] + "[2026-11-21 05:30:45.000260] [pid 2] crash 1.3 cpp_fused_mul_2\n  signal: SIGSEGV\n"
    a, b = logs(tmp_path, model_log(1), crashed)
    code, out, _ = cli(capsys, a, b)
    assert code == 3            # B never finished: no clean verdict, and what is missing is said first
    assert out.splitlines()[2:] == [
        "B: the run never finished:",
        "B:   launch 1.3 cpp_fused_mul_2 never finished (crash: signal: SIGSEGV); its outputs are unknown",
        "B:   run 1 model (pid 2) never finished (no run-end record, b.log:8); what came after launch 1.3 "
        "cpp_fused_mul_2 is missing",
        "A    B    kernel           status        largest delta",
        "1.1  1.1  cpp_fused_add_0  ok            0",
        "1.2  1.2  cpp_fused_mm_1   ok            0",
        "1.3  1.3  cpp_fused_mul_2  not compared  no outputs recorded in B",
        "1.4  -    cpp_fused_sum_3  only in A     -",
        "1 launch(es) only in A, 0 only in B (not compared)",
        "1 aligned launch(es) could not be compared (no statistics or outputs)",
        "B crashed in 1.3 cpp_fused_mul_2 (signal: SIGSEGV)",
        "no aligned launch diverges: 2 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)",
    ]


def test_python_logger_calls_are_compared_when_there_are_no_launches(tmp_path):
    def calls(pid, mean):
        w = LogWriter(pid)
        w.record("call", "1", "__main__.f", ["  arg[0] x:"] + [f"    {l}" for l in T(0.0, 1.0, 0.5).lines])
        w.record("return", "1", "__main__.f", ["  output:"] + [f"    {l}" for l in T(0.0, 2.0, mean).lines])
        return records.parse(w.text())
    assert diff.diff(calls(1, 1.0), calls(2, 1.0)).first_divergence is None
    row = diff.diff(calls(1, 1.0), calls(2, 1.5)).first_divergence
    assert row.a.title == "call 1 __main__.f" and row.largest() == "output mean 1.000000 vs 1.500000 (delta 0.5)"


def test_outputs_pair_in_argument_order_and_an_extra_output_is_named_not_compared(tmp_path, capsys):
    # as AOTI against torch.compile: B fuses a copy of a constant into the kernel (an extra
    # output that shifts the buffer numbers after it)
    a, b = LogWriter(1), LogWriter(2)
    a.launch("1.1", "cpp_fused__softmax_1", "amax,div", f"{SRC}:23", inputs=[("in buf4", T(0.0, 1.0, 0.5))],
             outputs=[("out buf5", T(0.5, 1.0, 0.75)), ("out buf6", T(0.2, 0.3, 0.25))])
    b.launch("1.1", "cpp_fused__softmax_2", "amax,div", f"{SRC}:23", inputs=[("in buf4", T(0.0, 1.0, 0.5))],
             outputs=[("out buf4", T(1.0, 1.0, 1.0, shape=(4,))), ("out buf6", T(0.5, 1.0, 0.75)),
                      ("out buf7", T(0.2, 0.3, 0.25))])
    code, out, _ = cli(capsys, *logs(tmp_path, a, b))
    assert code == 0
    assert ("1.1  1.1  cpp_fused__softmax_1 / cpp_fused__softmax_2  ok      0 (out buf4 only in B)"
            in out.splitlines())
    b.parts[-1] = b.parts[-1].replace("min=0.200000", "min=0.100000")
    code, out, _ = cli(capsys, *logs(tmp_path, a, b))
    assert code == 1 and "  out buf6/buf7 min 0.200000 vs 0.100000 (delta 0.1), allowed 0.00011\n" in out


def test_long_runs_with_local_differences_align_in_linear_time():
    def run(pid, prefix, skip):
        w = LogWriter(pid, with_banner=False)
        for k in range(1, 3001):
            if k % skip == 0:
                continue
            w.launch(f"1.{k}", f"{prefix}_op{k % 7}_{k}", f"n{k}", inputs=[("in x", T(0.0, 1.0, 0.5))],
                     outputs=[("out y", T(0.0, 1.0, 0.5))])
        return records.parse(w.text())
    result = diff.diff(run(1, "cpp_fused", 10**6), run(2, "triton_poi_fused", 100))
    statuses = [r.status for r in result.rows]
    assert statuses.count("only in A") == 30 and statuses.count("ok") == 2970
    assert all(r.a.origin.nodes == r.b.origin.nodes for r in result.rows if r.status == "ok")


# -- content hashes: identical, the first bitwise difference, --exact -------------------

ALL = {"add": 0x11, "mm": 0x22, "mul": 0x33, "sum": 0x44}


def test_equal_hashes_are_identical_bit_for_bit(tmp_path, capsys):
    a, b = logs(tmp_path, model_log(1, hashes=ALL), model_log(2, hashes=ALL))
    assert cli(capsys, a, b) == (0, (
        f"A: {a}\n"
        f"B: {b}\n"
        "A    B    kernel           status     largest delta\n"
        "1.1  1.1  cpp_fused_add_0  identical  0 (bit for bit)\n"
        "1.2  1.2  cpp_fused_mm_1   identical  0 (bit for bit)\n"
        "1.3  1.3  cpp_fused_mul_2  identical  0 (bit for bit)\n"
        "1.4  1.4  cpp_fused_sum_3  identical  0 (bit for bit)\n"
        "A and B are identical bit for bit: the outputs of 4 aligned launch(es) have equal "
        "content hashes\n"), "")


def test_the_first_bitwise_difference_is_named_even_within_tolerance(tmp_path, capsys):
    b_hashes = dict(ALL, mul=0x35, sum=0x45)       # mul's bits differ, its statistics do not
    a, b = logs(tmp_path, model_log(1, hashes=ALL), model_log(2, hashes=b_hashes))
    code, out, _ = cli(capsys, a, b)
    assert code == 0
    assert out.splitlines()[2:] == [
        "A    B    kernel           status     largest delta",
        "1.1  1.1  cpp_fused_add_0  identical  0 (bit for bit)",
        "1.2  1.2  cpp_fused_mm_1   identical  0 (bit for bit)",
        "1.3  1.3  cpp_fused_mul_2  ok         0 (bits differ)",
        "1.4  1.4  cpp_fused_sum_3  ok         0 (bits differ)",
        "first bitwise difference: A 1.3 cpp_fused_mul_2 / B 1.3 cpp_fused_mul_2 (out buf2); "
        "2 of the 2 aligned pair(s) before it identical",
        "the logs agree: 4 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)",
    ]
    code, out, _ = cli(capsys, "--exact", a, b)
    assert code == 1
    assert out.splitlines()[2:] == [
        "A    B    kernel           status     largest delta",
        "1.1  1.1  cpp_fused_add_0  identical  0 (bit for bit)",
        "1.2  1.2  cpp_fused_mm_1   identical  0 (bit for bit)",
        "1.3  1.3  cpp_fused_mul_2  DIFFERS    out buf2 hash 0000000000000033 vs 0000000000000035",
        "1.4  1.4  cpp_fused_sum_3  DIFFERS    out buf3 hash 0000000000000044 vs 0000000000000045",
        "first divergence: A 1.3 cpp_fused_mul_2 / B 1.3 cpp_fused_mul_2",
        f"  source: {SRC}:13",
        "  nodes:  mul",
        "  out buf2 hash 0000000000000033 vs 0000000000000035",
        "  A out buf2: shape=(2, 3) dtype=torch.float32 min=-3.000000 max=6.000000 mean=1.500000 "
        "nan_count=0 inf_count=0",
        "  B out buf2: shape=(2, 3) dtype=torch.float32 min=-3.000000 max=6.000000 mean=1.500000 "
        "nan_count=0 inf_count=0",
        "1 later aligned launch(es) differ too",
    ]


def test_a_launch_beyond_tolerance_is_still_the_divergence_after_a_bitwise_one(tmp_path, capsys):
    a, b = logs(tmp_path, model_log(1, hashes=ALL),
                model_log(2, hashes=dict(ALL, mm=0x23, mul=0x34), change={"mul": (-3.0, 6.0, 1.6, 0)}))
    code, out, _ = cli(capsys, a, b)
    lines = out.splitlines()
    assert code == 1
    assert lines[2:6] == [
        "A    B    kernel           status     largest delta",
        "1.1  1.1  cpp_fused_add_0  identical  0 (bit for bit)",
        "1.2  1.2  cpp_fused_mm_1   ok         0 (bits differ)",
        "1.3  1.3  cpp_fused_mul_2  DIFFERS    out buf2 mean 1.500000 vs 1.600000 (delta 0.1)",
    ]
    assert lines[7:9] == [
        "first bitwise difference: A 1.2 cpp_fused_mm_1 / B 1.2 cpp_fused_mm_1 (out buf1); "
        "1 of the 1 aligned pair(s) before it identical",
        "first divergence: A 1.3 cpp_fused_mul_2 / B 1.3 cpp_fused_mul_2"]


def test_logs_without_hashes_on_one_side_compare_statistics_only(tmp_path, capsys):
    a, b = logs(tmp_path, model_log(1, hashes=ALL), model_log(2))
    code, out, _ = cli(capsys, a, b)
    assert code == 0 and "identical" not in out and "bitwise" not in out
    assert out.splitlines()[-1] == \
        "the logs agree: 4 aligned launch(es) compared (atol=1e-05, rtol=0.001; counts exact)"
    code, out, _ = cli(capsys, "--exact", a, b)
    assert code == 0 and out.splitlines()[-2] == (
        "--exact: 4 output pair(s) without a content hash on both sides (a log older than hashes, "
        "or statistics skipped) were compared on statistics")


def test_a_malformed_hash_is_not_read():
    text = model_log(1, hashes={"add": 0x11}).text()
    for bad in ("0x11", "00000000000000111", "000000000000001G", "000000000000001 "):
        log = records.parse(text.replace("hash=0000000000000011", f"hash={bad}"))
        tensor = next(t for _, t in log.launches[0].outputs[0].tensors())
        assert tensor.hash is None and "hash" not in tensor.fields, bad


def test_pairing_by_value_names_every_output_it_cannot_pair_on_both_sides():
    """Two outputs of B hold one FX node: the first is paired, the second named, as A's would be."""
    from aoti_debug.analysis import diff
    out_a = [("out buf0", "a0"), ("out buf1", "a1")]
    out_b = [("out buf3", "b3"), ("out buf4", "b4"), ("out buf5", "b5")]
    paired, extra = diff.pair_by_value(out_a, out_b, {"buf0": "log", "buf1": "mul"},
                                       {"buf3": "log", "buf4": "log", "buf5": "mul"})
    assert [(a, b) for _, a, b in paired] == [("a0", "b3"), ("a1", "b5")]
    assert extra == "not comparable: out buf4 of B"
    paired, extra = diff.pair_by_value(out_b, out_a, {"buf3": "log", "buf4": "log", "buf5": "mul"},
                                       {"buf0": "log", "buf1": "mul"})
    assert extra == "not comparable: out buf4 of A"


def test_the_divergence_names_the_layer_beside_the_line_all_layers_share(tmp_path, capsys):
    """Three layers' launches on one shared line: the module path says which layer diverged."""
    def layers(mean_of_layer_1):
        w = LogWriter()
        w.run(1)
        for k in range(3):
            mean = mean_of_layer_1 if k == 1 else 0.5
            w.launch(f"1.{k + 1}", "aoti_torch_cpu_addmm", "addmm", "/srv/app/modeling.py:224",
                     module=f"model.vit.layers.{k}.attention.q_proj", inputs=[("in x", T(-2.0, 3.0, 0.5))],
                     outputs=[("out buf", T(-1.0, 1.0, mean))])
        return w.run_end(1)
    a, b = logs(tmp_path, layers(0.5), layers(0.9))
    code, out, err = cli(capsys, a, b)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    first = lines.index("first divergence: A 1.2 aoti_torch_cpu_addmm / B 1.2 aoti_torch_cpu_addmm")
    assert lines[first + 1] == "  source: /srv/app/modeling.py:224, module model.vit.layers.1.attention.q_proj", out


# -- what went through a narrow format --------------------------------------------

FP8 = "torch.float8_e4m3fn"


def quantised_log(*, q_mean=1.5, mm_mean=2.25, gelu_mean=1.0, add_mean=0.5, after_mean=0.25, out_mean=1.0,
                  hashed=False):
    """An fp8 linear: x quantised to float8_e4m3fn (buf0), the scaled matmul (buf1), a
    gelu of it (buf2); then a launch on the wide path only, writing buf0 again (reused),
    and one reading that buf0.  `hashed`: the fp8 tensors with their content hashes."""
    w = LogWriter()
    w.run(1)
    x, y = T(-2.0, 3.0, 0.5), T(-1.0, 1.0, 0.0)
    q = T(-2.0, 3.0, q_mean, dtype=FP8, hash=0x5EED if hashed else None)
    steps = [("cpp_fused_quant_0", "to_1", 11, [("in x", x)], "out buf0", q),
             ("aoti_torch_cpu__scaled_mm", "_scaled_mm", 12,
              [("in buf0", q), ("in w", T(-1.0, 1.0, 0.0, dtype=FP8, hash=0xF00D if hashed else None))],
              "out buf1", T(-4.0, 9.0, mm_mean)),
             ("cpp_fused_gelu_1", "gelu", 13, [("in buf1", T(-4.0, 9.0, mm_mean))], "out buf2",
              T(-0.2, 9.0, gelu_mean)),
             ("cpp_fused_add_2", "add", 14, [("in y", y)], "out buf0", T(-1.0, 2.0, add_mean)),
             ("cpp_fused_mul_3", "mul", 15, [("in buf0", T(-1.0, 2.0, add_mean))], "out buf3",
              T(-1.0, 2.0, after_mean))]
    for k, (kernel, node, line, inputs, out, value) in enumerate(steps, 1):
        w.launch(f"1.{k}", kernel, node, f"{SRC}:{line}", inputs=inputs, outputs=[(out, value)])
    return w.run_end(1, outputs=[("out buf2", T(-0.2, 9.0, out_mean))])


def test_values_through_fp8_are_judged_at_its_precision_and_the_wide_path_is_not(tmp_path, capsys):
    """A step of rounding apart in the quantised input, and what the matmul, the gelu and
    the model's output make of it, agree within float8_e4m3fn's precision; the add on the
    wide path, which writes a buffer the quantisation wrote before, is judged at the
    tolerances asked for."""
    a, b = logs(tmp_path, quantised_log(),
                quantised_log(q_mean=1.625, mm_mean=2.36, gelu_mean=1.05, add_mean=0.51, after_mean=0.26,
                              out_mean=1.05))
    code, out, err = cli(capsys, a, b)
    assert (code, err) == (1, "")
    assert out.splitlines()[2:] == [
        "A    B    kernel                     status   largest delta",
        "1.1  1.1  cpp_fused_quant_0          ok       out buf0 mean delta 0.125",
        "1.2  1.2  aoti_torch_cpu__scaled_mm  ok       out buf1 mean delta 0.11",
        "1.3  1.3  cpp_fused_gelu_1           ok       out buf2 mean delta 0.05",
        "1.4  1.4  cpp_fused_add_2            DIFFERS  out buf0 mean 0.500000 vs 0.510000 (delta 0.01)",
        "1.5  1.5  cpp_fused_mul_3            DIFFERS  out buf3 mean 0.250000 vs 0.260000 (delta 0.01)",
        "end  end  model                      ok       out buf2 mean delta 0.05",
        "4 aligned pair(s) hold values computed through float8_e4m3fn: judged at its precision "
        "(rtol at least 0.125, atol at least 0.125 times the output's largest |value|)",
        "first divergence: A 1.4 cpp_fused_add_2 / B 1.4 cpp_fused_add_2",
        f"  source: {SRC}:14",
        "  nodes:  add",
        "  out buf0 mean 0.500000 vs 0.510000 (delta 0.01), allowed 0.00052",
        "  A out buf0: shape=(2, 3) dtype=torch.float32 min=-1.000000 max=2.000000 mean=0.500000 "
        "nan_count=0 inf_count=0",
        "  B out buf0: shape=(2, 3) dtype=torch.float32 min=-1.000000 max=2.000000 mean=0.510000 "
        "nan_count=0 inf_count=0",
        "1 later aligned launch(es) differ too"]


def test_a_wrong_scale_is_named_beyond_fp8s_precision(tmp_path, capsys):
    """A scale on the wrong axis gives the matmul plausible values far beyond what one step
    of float8_e4m3fn explains: the matmul is the first divergence, with what was allowed."""
    a, b = logs(tmp_path, quantised_log(), quantised_log(mm_mean=4.5, gelu_mean=2.1))
    code, out, _ = cli(capsys, a, b)
    assert code == 1
    lines = out.splitlines()
    first = lines.index("first divergence: A 1.2 aoti_torch_cpu__scaled_mm / B 1.2 aoti_torch_cpu__scaled_mm")
    assert lines[first + 1:first + 4] == [
        f"  source: {SRC}:12", "  nodes:  _scaled_mm",
        "  out buf1 mean 2.250000 vs 4.500000 (delta 2.25), allowed 1.69"]
    assert not any("later aligned" in line for line in lines), out


def test_a_matmul_of_the_same_fp8_operands_is_judged_at_the_tolerances_asked_for(tmp_path, capsys):
    """Both sides quantised alike (equal content hashes): nothing narrow differs, so the
    matmul's 5% is a divergence (a scale beside the operands), not the format's rounding."""
    a, b = logs(tmp_path, quantised_log(hashed=True), quantised_log(hashed=True, mm_mean=2.36, gelu_mean=1.05))
    code, out, _ = cli(capsys, a, b)
    lines = out.splitlines()
    assert code == 1
    assert lines[2:5] == [
        "A    B    kernel                     status     largest delta",
        "1.1  1.1  cpp_fused_quant_0          identical  0 (bit for bit)",
        "1.2  1.2  aoti_torch_cpu__scaled_mm  DIFFERS    out buf1 mean 2.250000 vs 2.360000 (delta 0.11)"]
    assert "first divergence: A 1.2 aoti_torch_cpu__scaled_mm / B 1.2 aoti_torch_cpu__scaled_mm" in lines
    assert not any("judged at its precision" in line for line in lines), out
