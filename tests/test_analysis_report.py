"""`aoti-debug report`: one self-contained HTML page, checked as text and in a headless browser."""

import html.parser
import os
import shutil
import subprocess

import pytest

from aoti_debug.analysis import diff, records, report
from aoti_debug.cli import main
from test_analysis_diff import model_log
from test_analysis_logs import SRC, LogWriter, T, nan_model_log, write_log


def cli(capsys, *argv):
    code = main(["report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_page_is_self_contained_and_marks_the_nan_origin_with_its_source_link():
    page = report.render(records.parse(nan_model_log().text(), "/logs/model.log"))
    text = page.html
    assert page.summary == "4 launches/calls; NaN/Inf origin: 1.2 cpp_fused_log_1"
    for external in ("http://", "https://", "<script", "<link", "src=", "@import", "url("):
        assert external not in text
    assert text.startswith("<!DOCTYPE html>") and "<style>" in text
    assert '<tr id="event-2" class="nan-origin" data-index="1.2">' in text
    assert '<tr id="event-3" class="nan" data-index="1.3">' in text
    assert f'<a class="source" href="file://{SRC}#L12">{SRC}:12</a>' in text
    assert '<details id="stats-2" open>' in text


def test_relative_source_paths_are_linked_next_to_the_log_and_odd_characters_are_escaped():
    w = LogWriter()
    w.launch("1.1", "k<0>", "add", "src/my model.py:7", inputs=[("in x", T(0.0, 1.0, 0.5))],
             outputs=[("out y", T(0.0, 1.0, 0.5))])
    text = report.render(records.parse(w.text(), "/logs/run1/x.log")).html
    assert '<a class="source" href="file:///logs/run1/src/my%20model.py#L7">src/my model.py:7</a>' in text
    assert "k&lt;0&gt;" in text and "k<0>" not in text


def test_against_another_log_highlights_the_first_divergence():
    a = records.parse(model_log(1).text(), "/logs/a.log")
    b = records.parse(model_log(2, change={"mul": (-3.0, 6.0, 1.6, 0)}).text(), "/logs/b.log")
    page = report.render(a, against=b, divergence=diff.diff(a, b))
    assert page.summary == "4 launches/calls; first divergence: 1.3 cpp_fused_mul_2"
    assert '<tr id="event-3" class="divergence" data-index="1.3">' in page.html
    assert ('<div class="finding divergence" id="divergence-summary"><p>First divergence from '
            '<code>b.log</code>: <a href="#event-3">1.3 cpp_fused_mul_2</a> at '
            f'<a class="source" href="file://{SRC}#L13">{SRC}:13</a>: '
            'out buf2 mean 1.500000 vs 1.600000 (delta 0.1)</p>') in page.html
    assert '<table id="diff">' in page.html


def test_a_level_1_log_still_gets_a_timeline():
    w = LogWriter()
    w.record("launch", "1.1", "cpp_fused_add_0").record("launch", "1.2", "cpp_fused_mul_1")
    page = report.render(records.parse(w.text(), "x.log"))
    assert "No NaN/Inf analysis: the log has no statistics (level 5 needed)." in page.html
    assert page.html.count('<tr id="event-') == 2


def test_cli_writes_the_page(tmp_path, capsys):
    log = write_log(tmp_path, "model.log", nan_model_log())
    out_file = tmp_path / "out" / "report.html"
    out_file.parent.mkdir()
    assert cli(capsys, log, "-o", str(out_file)) == (0, (
        f"wrote {out_file}: 4 launches/calls; NaN/Inf origin: 1.2 cpp_fused_log_1\n"), "")
    assert out_file.read_text().startswith("<!DOCTYPE html>")


def test_cli_bad_inputs(tmp_path, capsys):
    log = write_log(tmp_path, "model.log", nan_model_log())
    assert cli(capsys, str(tmp_path / "nope.log"), "-o", str(tmp_path / "r.html")) == (2, "", (
        f"aoti-debug report: {tmp_path}/nope.log: no such file or directory "
        "(expected a log file written by aoti-debug, or a dump directory)\n"))
    assert cli(capsys, log, "-o", str(tmp_path / "no" / "dir" / "r.html")) == (2, "", (
        f"aoti-debug report: {tmp_path}/no/dir/r.html: cannot be written (No such file or directory)\n"))
    low = write_log(tmp_path, "low.log", model_log(2, level=3))
    assert cli(capsys, log, "--against", low, "-o", str(tmp_path / "r.html")) == (2, "", (
        f"aoti-debug report: {low}: has no tensor statistics (it looks like a level-3 log); "
        "diff needs logs written at level 5 (AOTI_DEBUG_LOGLEVEL=5)\n"))


# -- in a real browser ------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.content = []                  # text and child nodes, in document order

    @property
    def children(self):
        return [c for c in self.content if isinstance(c, Node)]

    @property
    def text(self):
        return "".join(c for c in self.content if isinstance(c, str))

    def all_text(self):
        return "".join(c if isinstance(c, str) else c.all_text() for c in self.content)

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


class DomReader(html.parser.HTMLParser):
    """The browser's serialized DOM as a tree (enough to assert on)."""
    VOID = {"meta", "br", "hr", "img", "input", "link"}

    def __init__(self, text):
        super().__init__()
        self.root = self.node = Node("#document", [], None)
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        child = Node(tag, attrs, self.node)
        self.node.content.append(child)
        if tag not in self.VOID:
            self.node = child

    def handle_endtag(self, tag):
        node = self.node
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.node = node.parent

    def handle_data(self, data):
        self.node.content.append(data)

    def by_id(self, ident):
        return next(n for n in self.root.walk() if n.attrs.get("id") == ident)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y "
                                             "chromium); the report is then only checked as text")
def test_the_page_renders_in_headless_chromium(tmp_path):
    a = write_log(tmp_path, "model.log", nan_model_log())
    b = write_log(tmp_path, "other.log", nan_model_log(pid=7, nan_at=0))
    page = tmp_path / "report.html"
    assert main(["report", a, "--against", b, "-o", str(page)]) == 0
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = DomReader(proc.stdout)
    # the browser built the DOM: it inserted the <tbody> the overview table does not write
    overview = dom.by_id("overview")
    assert [n.tag for n in overview.walk()][:3] == ["section", "table", "tbody"]
    title = next(n for n in dom.root.walk() if n.tag == "title")
    assert title.text == "aoti-debug report: model.log"
    origin_row = dom.by_id("event-2")
    assert origin_row.attrs["class"] == "nan-origin divergence"
    cells = [c.all_text() for c in origin_row.children if c.tag == "td"]
    assert cells[1:6] == ["1.2", "4242", "cpp_fused_log_1", "log", f"{SRC}:12"]
    link = next(n for n in origin_row.walk() if n.tag == "a" and n.attrs.get("class") == "source")
    assert link.attrs["href"] == f"file://{SRC}#L12"
    assert [dom.by_id(f"event-{n}").attrs["class"] for n in (1, 3, 4)] == ["", "nan differs", "nan differs"]
    summary = dom.by_id("nan-summary").all_text()
    assert summary.startswith(f"First NaN/Inf origin: 1.2 cpp_fused_log_1 at {SRC}:12 (nodes log)")
    assert "2 later launches show NaN/Inf too (victims): 1.3 cpp_fused_mul_2, 1.4 cpp_fused_sum_3" in summary
    assert dom.by_id("divergence-summary").all_text().startswith(
        f"First divergence from other.log: 1.2 cpp_fused_log_1 at {SRC}:12: out buf1 nan_count 2 vs 0")
    assert "open" in dom.by_id("stats-2").attrs and "open" not in dom.by_id("stats-1").attrs


def test_a_crashed_run_is_the_first_finding_and_not_ok():
    w = LogWriter()
    w.launch("1.1", "cpp_fused_add_0", "add", f"{SRC}:10", inputs=[("in arg0_1", T(-1.0, 1.0, 0.0))],
             outputs=[("out buf0", T(0.0, 2.0, 1.0))])
    w.record("launch", "1.2", "cpp_fused_relu_1", ["  origin: nodes=relu source=-"])
    w.record("crash", "1.2", "cpp_fused_relu_1", ["  signal: SIGSEGV"])
    page = report.render(records.parse(w.text(), "x.log"))
    assert page.summary == ("the run never finished: launch 1.2 cpp_fused_relu_1 never finished (crash: "
                            "signal: SIGSEGV); its outputs are unknown; 2 launches/calls")
    text = page.html
    assert text.index('id="crashes"') < text.index('id="nan-summary"')
    assert ('<div class="finding crashed" id="crashes"><p>The run never finished (it crashed)</p><ul><li>'
            '<a href="#event-2">1.2 cpp_fused_relu_1</a> never finished (crash: signal: SIGSEGV); '
            'its outputs are unknown</li></ul></div>') in text
    assert ('<div class="finding plain" id="nan-summary"><pre>no NaN/Inf in the 2 launches of the log'
            '</pre></div>') in text
    assert '<div class="finding ok"' not in text


def test_the_nan_origin_names_its_layer_beside_the_linked_line():
    """The page's finding and the launch table say the module beside the shared line,
    as nan-origin does (one format, escaped)."""
    from test_analysis_nan_origin import layers_log
    text = report.render(records.parse(layers_log(1).text(), "/logs/layers.log")).html
    link = ('<a class="source" href="file:///srv/app/modeling.py#L224">/srv/app/modeling.py:224</a>'
            ', module model.vit.layers.1.attention.q_proj')
    assert f'<a href="#event-2">1.2 aoti_torch_cpu_addmm</a> at {link} (nodes addmm)' in text
    assert f'<td class="mono">{link}</td>' in text
    assert "  source: /srv/app/modeling.py:224, module model.vit.layers.1.attention.q_proj\n" in text
