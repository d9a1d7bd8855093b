"""Hand-made logs for the analysis tests, and checks that they follow docs/log-format.md.

The C++ shim that writes launch records is not ready, so launch logs are
written here by hand.  The builders below produce the exact text of the
format; the tests at the bottom hold them against the Python logger's own
formatter, so a hand-made log cannot drift from what the runtimes write.
"""

import pytest

from aoti_debug.runtime.format import number

PID = 4242
RULE = "=" * 80


def banner(pid=PID, micro=0):
    return (f"{RULE}\n[2026-11-21 05:30:45.{micro:06d}] [pid {pid}] aoti-debug - System Information\n"
            f"{RULE}\naoti-debug version: 0.1.0\nPyTorch version: 2.13.0+cpu\n"
            f"Platform: Linux x86_64\n{RULE}\n")


class Block:
    """A value written as an indented block (tensor or container); lines at depth 0."""

    def __init__(self, lines):
        self.lines = lines


def _strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.insert(0, step)
        step *= max(size, 1)
    return tuple(strides)


def T(mn=None, mx=None, mean=None, nan=0, inf=0, *, shape=(2, 3), dtype="torch.float32",
      skipped=None, hash=None):
    """A Tensor block; no statistics (level 3) when mn is None and skipped is None; `hash`:
    the content hash, an int."""
    lines = ["Tensor(", f"  shape={shape}", f"  stride={_strides(shape)}", f"  dtype={dtype}",
             "  device=cpu", "  requires_grad=False", "  is_contiguous=True"]
    if skipped is not None:
        lines.append(f"  stats=skipped ({skipped})")
    elif mn is not None:
        if "int" in dtype:
            lines += [f"  min={mn}", f"  max={mx}", f"  mean={number(mean)}"]
        else:
            lines += [f"  min={number(mn)}", f"  max={number(mx)}", f"  mean={number(mean)}",
                      f"  nan_count={nan}", f"  inf_count={inf}"]
        if hash is not None:
            lines.append(f"  hash={hash:016x}")
    return Block(lines + [")"])


def Seq(kind, elements):
    """A container block: kind list/tuple/dict, elements [(label, value)]."""
    lines = [f"{kind}(len={len(elements)})"]
    for label, value in elements:
        lines += item(label, value, depth=1)
    return Block(lines)


def item(label, value, depth=1):
    pad = "  " * depth
    if isinstance(value, Block):
        return [f"{pad}{label}:"] + [f"{pad}  {line}" for line in value.lines]
    return [f"{pad}{label}: {value}"]


class LogWriter:
    """Appends records with increasing timestamps (10 µs apart, launches last 40 µs)."""

    def __init__(self, pid=PID, with_banner=True, start_us=100):
        self.pid = pid
        self.micro = start_us
        self.parts = [banner(pid, start_us - 1)] if with_banner else []

    def record(self, kind, ident, name, body=(), step=10):
        self.micro += step
        head = f"[2026-11-21 05:30:45.{self.micro:06d}] [pid {self.pid}] {kind} {ident} {name}\n"
        self.parts.append(head + "".join(line + "\n" for line in body))
        return self

    def items(self, pairs):
        return [line for label, value in pairs for line in item(label, value)]

    def run(self, r, model="model", inputs=()):
        return self.record("run", r, model, self.items(inputs))

    def run_end(self, r, model="model", outputs=()):
        return self.record("run-end", r, model, self.items(outputs))

    def launch(self, ident, kernel, nodes="-", source="-", inputs=(), outputs=(), end=True, module=None,
               lines=()):
        """`module`: the `module:` line; `lines`: further origin lines (output-source, ...)."""
        body = ([f"  origin: nodes={nodes} source={source}"] + ([f"  module: {module}"] if module else [])
                + list(lines) + self.items(inputs))
        self.record("launch", ident, kernel, body)
        if end:
            self.record("launch-end", ident, kernel, self.items(outputs), step=40)
        return self

    def raw(self, text):
        self.parts.append(text)
        return self

    def text(self):
        return "".join(self.parts)

    def write(self, path):
        path.write_text(self.text())
        return path


# -- a small model: add, log (makes NaN from finite inputs), mul, sum -------------------

SRC = "/srv/app/model.py"


def nan_model_log(pid=PID, nan_at=2):
    """Launches 1.1-1.4 of one run; launch `nan_at` turns finite inputs into NaN."""
    w = LogWriter(pid)
    w.run(1, inputs=[("in arg0_1", T(-2.0, 3.0, 0.5))])
    w.launch("1.1", "cpp_fused_add_0", "add", f"{SRC}:11",
             inputs=[("in arg0_1", T(-2.0, 3.0, 0.5)), ("in arg1_1", T(0.0, 1.0, 0.5))],
             outputs=[("out buf0", T(-2.0, 4.0, 1.0))])
    bad = nan_at == 2
    w.launch("1.2", "cpp_fused_log_1", "log", f"{SRC}:12",
             inputs=[("in buf0", T(-2.0, 4.0, 1.0))],
             outputs=[("out buf1", T(-0.693147, 1.386294, 0.35, nan=2) if bad
                       else T(0.0, 1.609438, 0.7))])
    w.launch("1.3", "cpp_fused_mul_2", "mul", f"{SRC}:13",
             inputs=[("in buf1", T(-0.693147, 1.386294, 0.35, nan=2) if bad
                      else T(0.0, 1.609438, 0.7)), ("in scale", "2.000000")],
             outputs=[("out buf2", T(-1.386294, 2.772589, 0.7, nan=2) if bad
                       else T(0.0, 3.218876, 1.4))])
    w.launch("1.4", "cpp_fused_sum_3", "sum_1", f"{SRC}:14",
             inputs=[("in buf2", T(-1.386294, 2.772589, 0.7, nan=2) if bad
                      else T(0.0, 3.218876, 1.4))],
             outputs=[("out buf3", T("nan", "nan", "nan", nan=1, shape=()) if bad
                       else T(8.4, 8.4, 8.4, shape=()))])
    w.run_end(1, outputs=[("out buf3", T("nan", "nan", "nan", nan=1, shape=()) if bad
                           else T(8.4, 8.4, 8.4, shape=()))])
    return w


def write_log(tmp_path, name, writer_or_text):
    path = tmp_path / name
    path.write_text(writer_or_text if isinstance(writer_or_text, str) else writer_or_text.text())
    return str(path)


# -- the builders agree with the Python logger's formatter -----------------------

def test_tensor_blocks_match_the_python_formatter():
    torch = pytest.importorskip("torch")
    from aoti_debug.runtime import format as fmt
    from test_content_hash import reference_hash as h
    x = torch.tensor([[-1.0, 3.0, 0.0], [1.0, 2.0, 1.0]])
    assert fmt.item("in x", x, 5) == item("in x", T(-1.0, 3.0, 1.0, hash=h(x)))
    assert fmt.item("in x", x, 3) == item("in x", T())
    assert fmt.item("out e", torch.zeros(0), 5) == item("out e", T(shape=(0,), skipped="empty tensor"))
    n = torch.tensor([1, 5], dtype=torch.int64)
    assert fmt.item("in n", n, 5) == item("in n", T(1, 5, 3.0, shape=(2,), dtype="torch.int64", hash=h(n)))
    assert fmt.item("arg[0] xs", [x, 3], 5) == item("arg[0] xs", Seq("list", [("[0]", T(-1.0, 3.0, 1.0, hash=h(x))),
                                                                          ("[1]", "3")]))


def test_written_log_has_the_record_shape_of_the_format():
    text = nan_model_log().text()
    lines = text.splitlines()
    assert lines[:7] == banner(PID, 99).splitlines()
    assert lines[7] == "[2026-11-21 05:30:45.000110] [pid 4242] run 1 model"
    assert "[2026-11-21 05:30:45.000120] [pid 4242] launch 1.1 cpp_fused_add_0\n" \
           "  origin: nodes=add source=/srv/app/model.py:11\n  in arg0_1:\n    Tensor(\n" in text
    assert all(line.startswith(("[", "  ", "=")) or ": " in line for line in lines)
