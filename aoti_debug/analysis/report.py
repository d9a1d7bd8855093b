"""One self-contained HTML page about a log: timeline, statistics, NaN origin, divergence.

Inline CSS only, no script and no external resource, so the page can be
mailed, attached to a bug, or opened from a machine without network access.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import os
import urllib.parse
from typing import Callable, Dict, Iterator, List, Optional, TextIO, Union

from . import diff as diff_mod
from . import completeness, nan_origin
from .records import STAT_KEYS, Event, Log, Origin, moment

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d1d1f; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
code, pre, td.mono { font-family: ui-monospace, monospace; font-size: 12.5px; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #d0d0d7; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f5; }
tr.nan-origin td { background: #ffc9c9; font-weight: 600; }
tr.nan td { background: #fff0f0; }
tr.divergence td { background: #ffe2b8; font-weight: 600; }
tr.differs td { background: #fff5e6; }
tr.crashed td { background: #e9d5ff; }
.finding { border-left: 5px solid #c92a2a; background: #fff5f5; padding: .4em 1em; margin: .6em 0; }
.finding.divergence { border-color: #e8590c; background: #fff4e6; }
.finding.ok { border-color: #2b8a3e; background: #ebfbee; }
.finding.plain { border-color: #868e96; background: #f8f9fa; }
.finding.crashed { border-color: #7048e8; background: #f3f0ff; }
.bar { background: #4c6ef5; height: .8em; min-width: 1px; }
.tag { display: inline-block; padding: 0 .4em; border-radius: 3px; font-size: 11px; color: #fff; }
.tag.nan-origin { background: #c92a2a; } .tag.nan { background: #f08c8c; }
.tag.divergence { background: #e8590c; } .tag.differs { background: #f59f00; }
.tag.crashed { background: #7048e8; }
details { margin: .3em 0; } summary { cursor: pointer; }
.muted { color: #6b6b76; }
"""


@dataclasses.dataclass
class Page:
    # the page's sections in order: text, or a section of a row per launch made as it is
    # written (a long run's page does not fit in memory twice)
    parts: List[Union[str, Callable[[], Iterator[str]]]]
    summary: str                            # one line for the terminal
    gaps: completeness.Gaps = dataclasses.field(default_factory=completeness.Gaps)   # what the run is missing

    def chunks(self) -> Iterator[str]:
        for part in self.parts:
            if callable(part):
                yield from part()
                yield "\n"
            elif part:
                yield part + "\n"

    def write(self, out: TextIO) -> None:
        for chunk in self.chunks():
            out.write(chunk)

    @property
    def html(self) -> str:
        return "".join(self.chunks())


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def source_link(origin: Optional[Origin], log_path: Optional[str], outputs=None) -> str:
    """`<a href="file:///abs/model.py#L17">model.py:17</a>, module a.b.c` (the
    findings' format.where, the line linked), or `-` when unknown; with
    `outputs` (labels), the line and module of those outputs (Origin.where_of)."""
    if origin is None or not origin.source:
        return "-"
    place = origin.where_of(outputs or [])
    own = origin.source_of(outputs) if outputs else origin.source
    if outputs and own != origin.source and ", " in (own or ""):     # outputs of several lines
        return esc(place)
    tail = place[len(own or ""):]        # ", module a.b.c", or nothing
    path, line = Origin(origin.nodes, own).file_and_line
    if path is None or line is None:
        return esc(place)
    if not os.path.isabs(path) and log_path:
        # a relative path is relative to where the program ran; the log's folder is the best guess
        path = os.path.join(os.path.dirname(os.path.abspath(log_path)), path)
    href = "file://" + urllib.parse.quote(os.path.abspath(path)) + f"#L{line}"
    return f'<a class="source" href="{esc(href)}">{esc(own)}</a>{esc(tail)}'


def duration_us(event: Event) -> Optional[float]:
    end = event.end or event.crash
    if event.first is None or end is None:
        return None
    t0, t1 = moment(event.first.timestamp), moment(end.timestamp)
    return None if t0 is None or t1 is None else (t1 - t0).total_seconds() * 1e6


def render(log: Log, against: Optional[Log] = None,
           divergence: Optional[diff_mod.Result] = None, rerun_ops: bool = False) -> Page:
    events = log.events
    level = log.level_hint()
    finding = nan_origin.find(log, rerun_ops) if level >= 5 else None
    gaps = finding.gaps if finding is not None else completeness.of_log(log)
    unfinished = [e for e in events if not e.finished] if level >= 3 else []
    marks: Dict[int, List[str]] = {id(e): [] for e in events}
    if finding is not None:
        if finding.origin is not None:
            marks[id(finding.origin.event)].append("nan-origin")
        for c in finding.victims + finding.other_origins + finding.enclosing:
            marks[id(c.event)].append("nan")
        if finding.entered is not None and finding.origin is None:
            marks[id(finding.entered.event)].append("nan")
    first_div = divergence.first_divergence if divergence else None
    if divergence is not None:
        for row in divergence.rows:
            if row.a is not None and id(row.a) in marks and row.status == diff_mod.DIFFERS:
                marks[id(row.a)].append("divergence" if row is first_div else "differs")
    for e in events:
        if e.crash is not None:
            marks[id(e)].append("crashed")
    number = {id(e): n for n, e in enumerate(events, 1)}

    name = os.path.basename(log.path or "log")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>aoti-debug report: {esc(name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>aoti-debug report: <code>{esc(name)}</code></h1>",
        _overview(log, level, against),
        '<section id="findings"><h2>Findings</h2>',
        _crash_section(log, unfinished, number, gaps),
        _nan_section(finding, number, log),
        _divergence_section(divergence, first_div, number, log, against),
        "</section>",
        _ranks(log, level, number),
        functools.partial(_timeline, events, marks, number, log),
        functools.partial(_statistics, events, marks, number, level) if level >= 3 else "",
        _diff_table(divergence),
        _notes(log),
        "</body></html>",
    ]
    summary = f"{len(events)} launches/calls"
    if gaps:
        summary = f"{gaps.summary()}; {summary}"
    if finding is not None and finding.origin is not None:
        summary += f"; NaN/Inf origin: {finding.origin.event.title}"
    elif finding is not None and not finding.found and finding.bad_scales:   # no NaN/Inf: not clean
        summary += f"; bad scale: {finding.bad_scales[0].event.title}"
    elif finding is not None and not finding.found and finding.saturated:
        summary += f"; saturated {finding.first_saturated.format}: {finding.first_saturated.event.title}"
    if first_div is not None and first_div.a is not None:
        summary += f"; first divergence: {first_div.a.title}"
    if len(log.processes()) > 1:
        summary += f"; {len(log.processes())} processes side by side"
    unreadable = log.unreadable()
    if unreadable:
        summary += f"; {len(unreadable)} file(s) or record(s) cannot be read (first: {unreadable[0]})"
    return Page(parts, summary, gaps)


def _overview(log: Log, level: int, against: Optional[Log]) -> str:
    runs = _runs(log)
    rows = [("log", f"<code>{esc(os.path.abspath(log.path)) if log.path else '-'}</code>"),
            ("records", esc(len(log.records))),
            ("launches", esc(len(log.launches))),
            ("calls", esc(len(log.calls))),
            ("runs", esc(runs or "-")),
            ("level (as seen in the log)", esc(level) + ("" if level >= 5 else
                                                         ' <span class="muted">(statistics need level 5)</span>'))]
    for banner in log.banners[:4]:
        facts = ", ".join(f"{k}: {v}" for k, v in banner.facts.items())
        rows.append((f"pid {banner.pid}", esc(facts)))
    if against is not None:
        rows.append(("compared against", f"<code>{esc(os.path.abspath(against.path or '-'))}</code>"))
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<section id="overview"><table>{body}</table></section>'


def _runs(log: Log) -> str:
    """`1, 2`, or each model instance's runs (`ranker: 1, 2; ranker#2: 1`) when the log holds
    several: their run numbers count apart."""
    by_model: Dict[Optional[str], List[int]] = {}
    for launch in log.launches:
        if launch.run is not None:
            by_model.setdefault(launch.model, [])
            if launch.run not in by_model[launch.model]:
                by_model[launch.model].append(launch.run)
    if len(by_model) == 1:
        return ", ".join(map(str, sorted(next(iter(by_model.values())))))
    return "; ".join(f"{model if model is not None else '(unnamed)'}: {', '.join(map(str, sorted(runs)))}"
                     for model, runs in by_model.items())


def _anchor(event: Event, number: Dict[int, int]) -> str:
    if id(event) not in number:         # no section of its own: diff's run-end row
        return esc(event.title)
    return f'<a href="#event-{number[id(event)]}">{esc(event.title)}</a>'


def _nan_section(finding, number, log: Log) -> str:
    if finding is None:
        return '<p class="muted">No NaN/Inf analysis: the log has no statistics (level 5 needed).</p>'
    text = "\n".join(nan_origin.finding_text(finding))     # the crash has its own box
    if finding.origin is not None:
        event = finding.origin.event
        bad = [e.label for e in finding.origin.outputs if e.state == nan_origin.NONFINITE]
        head = (f"First NaN/Inf origin: {_anchor(event, number)} at "
                f"{source_link(event.origin, log.path, bad)}"
                + (f" (nodes {esc(', '.join(event.origin.nodes))})"
                   if event.origin and event.origin.nodes else ""))
    elif finding.entered is not None:
        head = f"NaN/Inf were already in the inputs of {_anchor(finding.entered.event, number)}"
    elif finding.bad_scales:    # no NaN/Inf, yet not clean (nan_origin.scale_text)
        head = f"No NaN/Inf, but a bad scale read by {_anchor(finding.bad_scales[0].event, number)}"
    elif finding.saturated:
        head = (f"No NaN/Inf, but saturated {finding.first_saturated.format} from "
                f"{_anchor(finding.first_saturated.event, number)}")
    else:     # nothing found is "ok" only for a run that finished
        style = "plain" if finding.stopped_short else "ok"
        return f'<div class="finding {style}" id="nan-summary"><pre>{esc(text)}</pre></div>'
    return (f'<div class="finding" id="nan-summary"><p>{head}</p>'
            f"<pre>{esc(text)}</pre></div>")


def _divergence_section(result, first, number, log: Log, against) -> str:
    if result is None:
        return ""
    text = "\n".join(diff_mod.summary(result))
    if first is None or first.a is None:
        return f'<div class="finding ok" id="divergence-summary"><pre>{esc(text)}</pre></div>'
    head = (f"First divergence from <code>{esc(os.path.basename(against.path or '-'))}</code>: "
            f"{_anchor(first.a, number)} at "
            f"{source_link(first.a.origin, log.path, [d.label for d in first.deltas if d.violates])}: "
            f"{esc(first.largest())}")
    return (f'<div class="finding divergence" id="divergence-summary"><p>{head}</p>'
            f"<pre>{esc(text)}</pre></div>")


def _crash_section(log: Log, unfinished: List[Event], number: Dict[int, int], gaps: completeness.Gaps) -> str:
    """First of the findings: the run crashed, did not finish or lost records; each launch
    or call that never finished links to its record (its arguments)."""
    if not gaps:
        return ""
    items = [f"<li>{_anchor(e, number)} never finished ({esc(completeness.why_unfinished(e))}); "
             "its outputs are unknown</li>" for e in unfinished]
    said = {id(e.first) for e in unfinished}
    items += [f"<li>{esc(g.text)}</li>" for g in gaps.items if g.record is None or id(g.record) not in said]
    head = ("The run never finished" + (" (it crashed)" if log.crashes else "") if gaps.unfinished
            else "The run is incomplete: records or tensors were lost")
    return f'<div class="finding crashed" id="crashes"><p>{head}</p><ul>{"".join(items)}</ul></div>'


def _outputs_cell(event: Event) -> str:
    bad = sum(1 for i in event.outputs for _, t in i.tensors() if t.nonfinite())
    if bad:
        return f"{bad} with NaN/Inf"
    if not event.finished:
        return "never finished"
    return str(sum(1 for i in event.outputs for _ in i.tensors()))


def _ranks(log: Log, level: int, number: Dict[int, int]) -> str:
    """The processes of a job side by side, a column each (by rank): where NaN/Inf first
    appeared in each, whether it agrees with the lowest rank, and each run."""
    processes = sorted(log.processes(), key=lambda p: p.order)
    if len(processes) < 2:
        return ""
    subs = {p.pid: log.of_process(p.pid) for p in processes}
    # a process's own Log regroups the same records: its events link as the page's do
    merged = {id(e.first): e for e in log.events}

    def link(event: Event) -> str:
        return _anchor(merged.get(id(event.first), event), number)

    ranked = nan_origin.by_process(log) if level >= 5 else None
    findings = {p.pid: f for p, f in ranked.order} if ranked else {}
    went_bad = [p.pid for p, f in ranked.order if f.found] if ranked else []
    verdicts: Dict[int, str] = {processes[0].pid: "reference"}
    divergent: Dict[int, Event] = {}
    if level >= 5:
        for r in diff_mod.diff_replicas(log).others:
            if r.divergence is None:
                gaps = diff_mod.replica_gaps(processes[0], r)      # what was left uncompared
                verdicts[r.process.pid] = (f"agrees where compared ({len(r.runs)} run(s); "
                                           f"{esc('; '.join(gaps))})" if gaps
                                           else f"agrees ({len(r.runs)} run(s))")
            else:
                run, row = r.divergence
                divergent[r.process.pid] = row.b
                verdicts[r.process.pid] = f"differs from run {run}: {link(row.b)}"

    def first_nan(p) -> str:
        f = findings.get(p.pid)
        if f is None:
            return '<span class="muted">no statistics</span>'
        if not f.found:
            return "none"
        check = f.origin or f.entered
        return (f'<span class="tag nan-origin">#{went_bad.index(p.pid) + 1}</span> {link(check.event)} '
                f'<span class="muted">{esc(f.when)}</span>')

    def run_cell(p, run: int) -> str:
        launches = [l for l in subs[p.pid].launches if l.run == run]
        if not launches:
            return '<span class="muted">-</span>'
        f = findings.get(p.pid)
        tags = []
        firsts = {id(l.first) for l in launches}
        if f is not None and f.origin is not None and id(f.origin.event.first) in firsts:
            tags.append(f'<span class="tag nan-origin">NaN/Inf</span> {link(f.origin.event)}')
        if p.pid in divergent and id(divergent[p.pid].first) in firsts:
            tags.append(f'<span class="tag divergence">differs</span> {link(divergent[p.pid])}')
        return f"{len(launches)} launches" + "".join(f"<br>{t}" for t in tags)

    runs = sorted({l.run for sub in subs.values() for l in sub.launches if l.run is not None})
    rows = [("pid", [esc(p.pid) for p in processes]),
            ("launches", [esc(len(subs[p.pid].launches)) for p in processes]),
            ("first NaN/Inf (in order)", [first_nan(p) for p in processes]),
            ("against the lowest rank", [verdicts.get(p.pid, "-") for p in processes])]
    rows += [(f"run {r}", [run_cell(p, r) for p in processes]) for r in runs]
    head = "<tr><th></th>" + "".join(f"<th>{esc(p.label)}</th>" for p in processes) + "</tr>"
    body = "".join(f"<tr><th>{esc(k)}</th>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
                   for k, cells in rows)
    return (f'<section id="ranks"><h2>Ranks side by side</h2>'
            f'<p class="muted">Processes of one job; times as written (clocks of one machine).</p>'
            f'<table id="ranks-table"><thead>{head}</thead><tbody>{body}</tbody></table></section>')


def _timeline(events: List[Event], marks, number, log: Log) -> Iterator[str]:
    durations = {id(e): duration_us(e) for e in events}
    longest = max((d for d in durations.values() if d), default=0.0)
    head = ("<tr><th>#</th><th>index</th><th>pid</th><th>kernel / function</th><th>FX nodes</th>"
            "<th>source</th><th>µs</th><th>duration</th><th>outputs</th><th></th></tr>")
    yield f'<section><h2>Timeline</h2><table id="timeline"><thead>{head}</thead><tbody>'
    for e in events:
        n = number[id(e)]
        classes = " ".join(marks[id(e)])
        tags = "".join(f'<span class="tag {m}">{m}</span> ' for m in marks[id(e)])
        d = durations[id(e)]
        bar = (f'<div class="bar" style="width:{max(d / longest * 100, 0.5):.1f}%"></div>'
               if d is not None and longest > 0 else "")
        nodes = ", ".join(e.origin.nodes) if e.origin and e.origin.nodes else "-"
        yield (
            f'<tr id="event-{n}" class="{classes}" data-index="{esc(e.ident)}">'
            f"<td>{n}</td><td class=\"mono\"><a href=\"#stats-{n}\">{esc(e.ident)}</a></td>"
            f"<td>{esc(e.pid)}</td><td class=\"mono\">{esc(e.name)}</td>"
            f"<td class=\"mono\">{esc(nodes)}</td><td class=\"mono\">{source_link(e.origin, log.path)}</td>"
            f"<td>{'' if d is None else f'{d:.0f}'}</td><td style=\"width:12em\">{bar}</td>"
            f"<td>{esc(_outputs_cell(e))}</td><td>{tags}</td></tr>")
    yield "</tbody></table></section>"


def _stats_keys(event: Event) -> List[str]:
    """The statistics columns this event needs (float, int, bool and complex differ)."""
    present = {k for i in event.inputs + event.outputs for _, t in i.tensors() for k in t.fields}
    return [k for k in STAT_KEYS if k in present] or ["min", "max", "mean", "nan_count", "inf_count"]


def _stats_rows(role: str, items, keys: List[str]) -> List[str]:
    rows = []
    for item in items:
        for label, t in item.tensors():
            cells = [f'<td class="mono">{esc(label)}</td>', f"<td>{esc(t.shape)}</td>",
                     f"<td>{esc(t.dtype)}</td>"]
            if t.skipped is not None or not t.has_stats:
                cells.append(f'<td colspan="{len(keys)}" class="muted">{esc(t.stats_text())}</td>')
            else:
                cells += [f'<td class="mono">{esc(t.fields.get(k, ""))}</td>' for k in keys]
            bad = ' class="nan"' if t.nonfinite() else ""
            rows.append(f"<tr{bad}><td>{role}</td>{''.join(cells)}</tr>")
        for label, text in item.inline_values():
            rows.append(f'<tr><td>{role}</td><td class="mono">{esc(label)}</td>'
                        f'<td colspan="{len(keys) + 2}" class="mono">{esc(text)}</td></tr>')
    return rows


def _statistics(events: List[Event], marks, number, level: int) -> Iterator[str]:
    yield '<section id="statistics"><h2>Per-launch statistics</h2>'
    for e in events:
        n = number[id(e)]
        keys = _stats_keys(e)
        head = ("<tr><th></th><th>argument</th><th>shape</th><th>dtype</th>"
                + "".join(f"<th>{k}</th>" for k in keys) + "</tr>")
        rows = _stats_rows("in", e.inputs, keys) + _stats_rows("out", e.outputs, keys)
        table = (f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
                 if rows else '<p class="muted">no arguments recorded</p>')
        is_open = " open" if {"nan-origin", "divergence"} & set(marks[id(e)]) else ""
        yield (f'<details id="stats-{n}"{is_open}><summary><a href="#event-{n}">#{n}</a> '
               f"<code>{esc(e.title)}</code></summary>{table}</details>")
    yield "</section>"


def _diff_table(result) -> str:
    if result is None:
        return ""
    rows = []
    first = result.first_divergence
    for r in result.rows:
        cls = {diff_mod.DIFFERS: "differs"}.get(r.status, "")
        if r is first:
            cls = "divergence"
        rows.append(f'<tr class="{cls}"><td class="mono">{esc(r.a.ident if r.a else "-")}</td>'
                    f'<td class="mono">{esc(r.b.ident if r.b else "-")}</td>'
                    f'<td class="mono">{esc(r.kernel())}</td><td>{esc(r.status)}</td>'
                    f'<td class="mono">{esc(r.largest())}</td></tr>')
    head = "<tr><th>A</th><th>B</th><th>kernel</th><th>status</th><th>largest delta</th></tr>"
    return (f'<section><h2>Launch-by-launch comparison</h2><table id="diff"><thead>{head}</thead>'
            f'<tbody>{"".join(rows)}</tbody></table></section>')


def _notes(log: Log) -> str:
    notes = [r for r in log.records if r.kind == "note"]
    if not notes and not log.left_out and not log.unreadable():
        return ""
    items = "".join(f"<li><code>{esc(r.name)}</code>: {esc(' '.join(r.notes))}</li>" for r in notes)
    items += "".join(f"<li>{esc(what)}</li>" for what in log.left_out)
    items += "".join(f"<li>{esc(why)}: its tensors are unknown</li>" for why in log.unreadable())
    return f'<section id="notes"><h2>Notes</h2><ul>{items}</ul></section>'
