"""aoti_debug/analysis/sanitizer.py: compute-sanitizer's report read, and its kernels named as
the log's launches.

The inputs follow the report formats NVIDIA documents for compute-sanitizer (memcheck,
initcheck, racecheck) and the older CUDA-MEMCHECK frame form, with values of our own.
"""

from __future__ import annotations

import random
import time

from aoti_debug.analysis import sanitizer
from aoti_debug.analysis.records import Origin, Record
from aoti_debug.analysis.sanitizer import Match, SanitizerError, bare_name, match, parse

HOST_FRAMES = """\
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2f31c0]
=========                in /usr/lib/x86_64-linux-gnu/libcuda.so.1
=========     Host Frame:main in demo.cu:40 [0x1b2c]
=========                in /home/u/demo
"""

CURRENT = f"""\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at misaligned_store()+0x90 in demo.cu:7
=========     by thread (2,0,0) in block (5,0,0)
=========     Address 0x7fa3c0a00003 is misaligned
=========     and is inside the nearest allocation at 0x7fa3c0a00000 of size 16 bytes
{HOST_FRAMES}=========
========= ERROR SUMMARY: 1 error
"""

OLDER = f"""\
========= CUDA-MEMCHECK
========= Invalid __global__ write of size 4
=========     at 0x00000048 in demo.cu:7:misaligned_store(void)
=========     by thread (2,0,0) in block (5,0,0)
=========     Address 0x400200003 is misaligned
{HOST_FRAMES}=========
========= Invalid __global__ read of size 8
=========     at 0x000001a0 in void scale<float>(float*, int)
=========     by thread (31,1,0) in block (0,2,0)
=========     Address 0x400300100 is out of bounds
=========
========= ERROR SUMMARY: 2 errors
"""

TRITON = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at triton_poi_fused_add_0+0x1d0
=========     by thread (3,0,0) in block (0,0,0)
=========     Address 0x7f10a4000410 is out of bounds
=========     and is 16 bytes after the nearest allocation at 0x7f10a4000000 of size 1,024 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at 0x2b0 in triton_poi_fused_mul_1
=========     by thread (64,0,0) in block (7,0,0)
=========     Address 0x7f10a4000800 is out of bounds
=========
========= ERROR SUMMARY: 2 errors
"""


def fields(error: SanitizerError):
    return (error.what, error.kernel, error.name, error.offset, error.location, error.thread,
            error.block, error.address)


def launch(ident: str, name: str, nodes, source, module) -> Record:
    return Record(kind="launch", id=ident, name=name, pid=1, timestamp="t", line=1,
                  origin=Origin(nodes=nodes, source=source, module=module))


# -- formats ------------------------------------------------------------------

def test_current_format_with_location():
    report = parse(CURRENT)
    assert [fields(e) for e in report.errors] == [(
        "Invalid __global__ write of size 4 bytes", "misaligned_store()", "misaligned_store", "0x90",
        "demo.cu:7", "(2,0,0)", "(5,0,0)",
        "Address 0x7fa3c0a00003 is misaligned and is inside the nearest allocation at "
        "0x7fa3c0a00000 of size 16 bytes")]
    assert report.errors[0].line == 2
    assert (report.summary, report.error_count) == ("ERROR SUMMARY: 1 error", 1)
    assert (report.truncated, report.dropped, report.notes) == (False, 0, [])


def test_older_format_with_and_without_location():
    report = parse(OLDER)
    assert [fields(e) for e in report.errors] == [
        ("Invalid __global__ write of size 4", "misaligned_store(void)", "misaligned_store", "0x00000048",
         "demo.cu:7", "(2,0,0)", "(5,0,0)", "Address 0x400200003 is misaligned"),
        ("Invalid __global__ read of size 8", "void scale<float>(float*, int)", "scale<float>",
         "0x000001a0", None, "(31,1,0)", "(0,2,0)", "Address 0x400300100 is out of bounds")]
    assert [e.line for e in report.errors] == [2, 12]
    assert (report.summary, report.error_count, report.notes) == ("ERROR SUMMARY: 2 errors", 2, [])


def test_triton_kernels_in_both_current_frame_forms():
    report = parse(TRITON)
    assert [fields(e) for e in report.errors] == [
        ("Invalid __global__ read of size 4 bytes", "triton_poi_fused_add_0", "triton_poi_fused_add_0",
         "0x1d0", None, "(3,0,0)", "(0,0,0)",
         "Address 0x7f10a4000410 is out of bounds and is 16 bytes after the nearest allocation at "
         "0x7f10a4000000 of size 1,024 bytes"),
        ("Invalid __global__ write of size 4 bytes", "triton_poi_fused_mul_1", "triton_poi_fused_mul_1",
         "0x2b0", None, "(64,0,0)", "(7,0,0)", "Address 0x7f10a4000800 is out of bounds")]
    assert report.error_count == 2


def test_triton_kernel_with_line_info():
    report = parse("========= Invalid __global__ read of size 2 bytes\n"
                   "=========     at triton_red_fused_sum_2+0x4c0 in /tmp/torchinductor_u/ab/cab12.py:31\n"
                   "=========     by thread (127,0,0) in block (3,0,0)\n"
                   "=========     Address 0x7f0000001ffe is out of bounds\n")
    (error,) = report.errors
    assert fields(error) == ("Invalid __global__ read of size 2 bytes", "triton_red_fused_sum_2",
                             "triton_red_fused_sum_2", "0x4c0", "/tmp/torchinductor_u/ab/cab12.py:31",
                             "(127,0,0)", "(3,0,0)", "Address 0x7f0000001ffe is out of bounds")
    assert (report.summary, report.error_count) == (None, None)
    assert report.notes == ["no ERROR SUMMARY line: the report may be cut short"]


def test_shared_local_and_initcheck_errors():
    text = """\
========= Invalid __shared__ read of size 8 bytes
=========     at tile_reduce(float const *, float*)+0x3f0 in reduce.cu:52
=========     by thread (17,0,0) in block (4,0,0)
=========     Address 0x4 is misaligned
=========
========= Out-of-range Shared or Local Address
=========     at 0x150 in stack_walk(int)
=========     by thread (0,1,0) in block (9,0,0)
=========
========= Misaligned Shared or Local Address
=========     at stage_copy+0x60
=========     by thread (8,0,0) in block (0,0,0)
=========
========= Uninitialized __global__ memory read of size 4 bytes
=========     at gather_rows(int const *, float*)+0x118 in gather.cu:14
=========     by thread (1,0,0) in block (2,0,0)
=========     Address 0x7f5c12000044
=========     Device Frame:gather_rows(int const *, float*)+0x118 in gather.cu:14
=========
========= ERROR SUMMARY: 4 errors
"""
    report = parse(text)
    assert [fields(e) for e in report.errors] == [
        ("Invalid __shared__ read of size 8 bytes", "tile_reduce(float const *, float*)", "tile_reduce",
         "0x3f0", "reduce.cu:52", "(17,0,0)", "(4,0,0)", "Address 0x4 is misaligned"),
        ("Out-of-range Shared or Local Address", "stack_walk(int)", "stack_walk", "0x150", None,
         "(0,1,0)", "(9,0,0)", None),
        ("Misaligned Shared or Local Address", "stage_copy", "stage_copy", "0x60", None, "(8,0,0)",
         "(0,0,0)", None),
        ("Uninitialized __global__ memory read of size 4 bytes", "gather_rows(int const *, float*)",
         "gather_rows", "0x118", "gather.cu:14", "(1,0,0)", "(2,0,0)", "Address 0x7f5c12000044")]
    assert (report.error_count, report.notes) == (4, [])


def test_racecheck_reports():
    text = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at 0x000000b8 in scan.cu:21:block_scan(int*)
=========     and Read access at 0x000000f0 in scan.cu:25:block_scan(int*) [32 hazards]
=========
========= Warning: Race reported between Read access at histo(unsigned int const *, int)+0x260
=========     and Write access at histo(unsigned int const *, int)+0x200 [7 hazards]
=========     and Write access at histo(unsigned int const *, int)+0x2b0 [3 hazards]
=========
========= ERROR: Potential WAW hazard detected at __shared__ 0x10 in block (1,0,0) :
=========     Write Thread (4,0,0) at 0x00000090 in scan.cu:30:block_scan(int*)
=========     Write Thread (5,0,0) at 0x00000090 in scan.cu:30:block_scan(int*)
=========     Current Value : 3, Incoming Value : 4
=========
========= RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warning)
"""
    report = parse(text)
    assert [fields(e) for e in report.errors] == [
        ("Error: Race reported between Write access and Read access [32 hazards]", "block_scan(int*)",
         "block_scan", "0x000000b8", "scan.cu:21", None, None, None),
        ("Warning: Race reported between Read access and Write access [7 hazards]",
         "histo(unsigned int const *, int)", "histo", "0x260", None, None, None, None),
        ("ERROR: Potential WAW hazard detected at __shared__ 0x10 in block (1,0,0)", "block_scan(int*)",
         "block_scan", "0x00000090", "scan.cu:30", "(4,0,0)", "(1,0,0)", None)]
    assert (report.summary, report.error_count) == (
        "RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warning)", 3)
    assert report.notes == []


def test_program_output_is_ignored():
    text = """\
========= COMPUTE-SANITIZER
loading model from /srv/model.pt2
==========
 ========= not the sanitizer's: a row of text the program indented
step 0 loss=0.25
========= Invalid __global__ write of size 4 bytes
at not_a_frame()+0x10 in printed_by_the_program.cu:1
=========     at triton_poi_fused_add_0+0x1d0
step 1 loss=nan
=========     by thread (3,0,0) in block (0,0,0)
by thread (9,9,9) in block (9,9,9)
=========     Address 0x7f10a4000410 is out of bounds
========= ERROR SUMMARY: 1 error
done
"""
    report = parse(text)
    assert [fields(e) for e in report.errors] == [
        ("Invalid __global__ write of size 4 bytes", "triton_poi_fused_add_0", "triton_poi_fused_add_0",
         "0x1d0", None, "(3,0,0)", "(0,0,0)", "Address 0x7f10a4000410 is out of bounds")]
    assert report.errors[0].line == 6
    assert (report.error_count, report.notes) == (1, [])


def test_summary_that_disagrees_is_said():
    report = parse(TRITON.replace("ERROR SUMMARY: 2 errors", "ERROR SUMMARY: 3 errors"))
    assert (len(report.errors), report.error_count) == (2, 3)
    assert report.notes == ["the summary counts 3 errors, the text shows 2"]


def test_host_side_error_names_no_kernel():
    text = ("========= Program hit cudaErrorLaunchFailure (error 719) due to \"unspecified launch failure\" "
            "on CUDA API call to cudaStreamSynchronize.\n"
            "=========     Saved host backtrace up to driver entry point at error\n"
            "=========     Host Frame:cudaStreamSynchronize [0x4b1a2]\n"
            "=========                in /usr/local/cuda/lib64/libcudart.so.12\n"
            "=========\n"
            "========= Target application returned an error\n"
            "========= ERROR SUMMARY: 1 error\n")
    report = parse(text)
    (error,) = report.errors
    assert fields(error) == (
        "Program hit cudaErrorLaunchFailure (error 719) due to \"unspecified launch failure\" on CUDA API "
        "call to cudaStreamSynchronize.", None, None, None, None, None, None, None)
    assert error.frame_unreadable is False
    assert report.notes == ["line 6: Target application returned an error"]
    (found,) = match(report, [launch("model:1.1", "triton_poi_fused_add_0", ["add"], "model.py:12", None)])
    assert (found.launch, found.candidates) == (None, 0)
    assert found.text() == (
        "compute-sanitizer: Program hit cudaErrorLaunchFailure (error 719) due to \"unspecified launch "
        "failure\" on CUDA API call to cudaStreamSynchronize. (a host-side error: it names no kernel)")


def test_bare_names():
    assert [bare_name(f) for f in (
        "unaligned_kernel()", "unaligned_kernel(void)", "void foo<int>(float*, int)", "triton_poi_fused_add_0",
        "std::iterator_traits<T2>::value_type ns::load<(ns::Mode)2, const int *>(T2)",
        "ns::Functor<main::[lambda(int, double &) (instance 1)]>::operator ()() const",
        "void cmp::operator<(int)", "cut_short(int, fl",
    )] == ["unaligned_kernel", "unaligned_kernel", "foo<int>", "triton_poi_fused_add_0",
           "ns::load<(ns::Mode)2, const int *>",
           "ns::Functor<main::[lambda(int, double &) (instance 1)]>::operator ()",
           "cmp::operator<(int)", "cut_short(int, fl"]


# -- matching -----------------------------------------------------------------

LAUNCHES = [
    launch("model:1.1", "triton_poi_fused_add_0", ["add"], "model.py:12", "layers.0"),
    launch("model:1.2", "triton_poi_fused_mul_1", ["mul", "mul_1"], "model.py:14", None),
    Record(kind="launch-end", id="model:1.2", name="triton_poi_fused_mul_1", pid=1, timestamp="t", line=9),
    launch("model:1.3", "triton_poi_fused_add_0", ["add_1"], "model.py:12", "layers.1"),
]


def test_match_names_the_last_launch_of_the_kernel():
    found = match(parse(TRITON), LAUNCHES)
    assert [(m.launch.id, m.candidates) for m in found] == [("model:1.3", 2), ("model:1.2", 1)]
    assert found[0].text() == (
        "compute-sanitizer: Invalid __global__ read of size 4 bytes in triton_poi_fused_add_0 "
        "(thread (3,0,0) block (0,0,0); Address 0x7f10a4000410 is out of bounds and is 16 bytes after the "
        "nearest allocation at 0x7f10a4000000 of size 1,024 bytes) = launch model:1.3, the last of 2 "
        "launches of this kernel (nodes=add_1 source=model.py:12, module layers.1)")
    assert found[1].text() == (
        "compute-sanitizer: Invalid __global__ write of size 4 bytes in triton_poi_fused_mul_1 "
        "(thread (64,0,0) block (7,0,0); Address 0x7f10a4000800 is out of bounds) = launch model:1.2 "
        "(nodes=mul,mul_1 source=model.py:14)")


def test_unmatched_kernel_is_not_guessed():
    report = parse(CURRENT.replace("misaligned_store", "triton_poi_fused_add"))
    (found,) = match(report, LAUNCHES)
    assert isinstance(found, Match)
    assert (found.launch, found.candidates) == (None, 0)
    assert found.text() == (
        "compute-sanitizer: Invalid __global__ write of size 4 bytes in triton_poi_fused_add "
        "(thread (2,0,0) block (5,0,0); Address 0x7fa3c0a00003 is misaligned and is inside the nearest "
        "allocation at 0x7fa3c0a00000 of size 16 bytes; at demo.cu:7): no launch of the log has this "
        "kernel's name (a kernel outside the model, or a log from another run)")


def test_launch_without_origin_and_escaped_names():
    report = parse("========= Invalid __global__ write of size 1 bytes\n"
                   "=========     at k\x1b[31m+0x8\n")
    record = Record(kind="launch", id="model:2.1", name="k\x1b[31m", pid=1, timestamp="t", line=3)
    (found,) = match(report, [record])
    assert found.launch is record
    assert found.text() == ("compute-sanitizer: Invalid __global__ write of size 1 bytes in k\\x1b[31m "
                            "= launch model:2.1 (the log names no origin for it)")


# -- hostile input -------------------------------------------------------------

def test_binary_junk_never_raises():
    rng = random.Random(7)
    junk = bytes(rng.getrandbits(8) for _ in range(200_000))
    for text in (junk.decode("latin-1"), junk.decode("utf-8", "replace"), junk):
        report = parse(text)
        assert report.errors == [] or all(isinstance(e, SanitizerError) for e in report.errors)
    pieces = ["=========", " ", "     ", "at ", "+0x", "0x1f", " in ", ":", "7", "(", ")", "<", ">", "void ",
              "by thread ", " in block ", "Address ", "and is ", "and Read access at ", "Error: ",
              "Race reported between Write access at ", "ERROR SUMMARY: ", "\n", "\x00", "\udcff", "k"]
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 80)))
        for m in match(parse(text), LAUNCHES):
            assert "\n" not in m.text()


def test_huge_single_lines_are_cut_and_said():
    started = time.monotonic()
    plain = parse("x" * 10_000_000)
    assert (plain.errors, plain.notes, plain.truncated) == ([], [], False)
    headline = parse("========= " + "Invalid " * 1_250_000 + "\n"
                     "=========     at " + "k" * 10_000_000 + "+0x10\n")
    (error,) = headline.errors
    assert (len(error.what), error.what[:16], error.kernel) == (1000, "Invalid Invalid ", None)
    assert headline.truncated is True
    assert headline.notes == [
        "line 1: 10000010 characters, only the first 65536 read",
        "line 1: a field of 65526 characters cut to 1000",
        "line 2: 10000022 characters, only the first 65536 read",
        "line 2: a frame that cannot be read: " + "k" * 80 + "... (65519 characters)",
        "no ERROR SUMMARY line: the report may be cut short"]
    assert time.monotonic() - started < 5


def test_long_kernel_name_is_capped():
    name = "void f<" + "int, " * 400 + "int>(int)"
    report = parse(f"========= Invalid __global__ read of size 4 bytes\n=========     at {name}+0x10\n")
    (error,) = report.errors
    assert (len(error.kernel), error.kernel, error.name) == (1000, name[:1000], name[:1000])
    assert report.truncated is True
    assert report.notes[0] == f"line 2: a field of {len(name)} characters cut to 1000"


def test_many_errors_are_capped_and_counted():
    one = ("========= Invalid __global__ write of size 4 bytes\n"
           "=========     at triton_poi_fused_add_0+0x1d0\n"
           "=========     by thread (1,0,0) in block (0,0,0)\n"
           "=========     Address 0x10 is out of bounds\n"
           "=========\n")
    report = parse(one * 5000 + "========= ERROR SUMMARY: 5000 errors\n")
    assert (len(report.errors), report.dropped, report.truncated) == (1000, 4000, True)
    assert (report.errors[-1].line, report.errors[-1].kernel) == (4996, "triton_poi_fused_add_0")
    assert (report.summary, report.error_count) == ("ERROR SUMMARY: 5000 errors", 5000)
    assert report.notes == ["4000 errors after the first 1000 counted, not kept"]
    found = match(report, LAUNCHES)
    assert (len(found), {m.launch.id for m in found}) == (1000, {"model:1.3"})


def test_cut_report_and_frames_without_headline():
    text = ("=========     at triton_poi_fused_add_0+0x1d0\n"
            "=========     by thread (1,0,0) in block (0,0,0)\n"
            "========= Invalid __global__ write of size 4 bytes\n"
            "=========     at triton_poi_fused_mul_1+0x")
    report = parse(text)
    (error,) = report.errors
    assert fields(error) == ("Invalid __global__ write of size 4 bytes", None, None, None, None, None, None,
                             None)
    assert error.frame_unreadable is True
    (found,) = match(report, LAUNCHES)
    assert found.text() == ("compute-sanitizer: Invalid __global__ write of size 4 bytes "
                            "(its frame cannot be read: no kernel named)")
    assert report.notes == [
        "line 1: a frame outside any error (the report's start is cut?)",
        "line 4: a frame that cannot be read: triton_poi_fused_mul_1+0x",
        "no ERROR SUMMARY line: the report may be cut short"]


def test_notes_are_bounded():
    report = parse("========= Warning: something the tool says\n" * 100)
    assert len(report.notes) == sanitizer.MAX_NOTES + 1
    assert report.notes[-1] == "... and 68 more notes"
    assert report.errors == []
