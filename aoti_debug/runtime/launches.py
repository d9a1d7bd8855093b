"""The runtime that torch.compile's instrumented Python wrapper calls.

The Python twin of cpp_runtime/include/aoti_debug/launch.h: the same
records (docs/log-format.md), the same numbering and the same rules for the
run-time level (the compiled level, lowered by AOTI_DEBUG_LOGLEVEL when it is
set, never raised: one note per process says what to recompile with), built
on format.py, stats.py, state.py and the kernel filter of settings.py.

What the codegen (codegen_patches/python_emit.py) emits:

    from aoti_debug.runtime.launches import Model as _aotid_Model, Site as _aotid_Site
    _aotid_model = _aotid_Model(name='model', level=5, kernels='', nan_check='warn', check_inputs=False, torch_version='2.13.0+cpu')
    _aotid_site_3 = _aotid_Site("cpp_fused_relu_0", "relu", "m.py:12", "fc1",
                                (("buf1", "inout"),), "  source-line: m.py:12 nodes=relu\n")
    def call(args):
        arg0_1, arg1_1 = args
        args.clear()
        _aotid_run = _aotid_model.begin_run(("x", "w"), (arg0_1, arg1_1))
        _aotid_launch, _aotid_launch_end = _aotid_model.calls
        ...
        if _aotid_run.level: _aotid_launch(_aotid_run, _aotid_site_3, buf1)
        else: _aotid_run.launch += 1
        cpp_fused_relu_0(buf1)
        if _aotid_run.level: _aotid_launch_end(_aotid_run, _aotid_site_3, buf1)
        if _aotid_run.checks: _aotid_run.checks_after(_aotid_site_3, (buf1,), ("m.py:12, module fc1",))
        ...
        if _aotid_run.level >= 3: _aotid_run.end(("buf6",), (buf6,))
        return (buf6, )

At level 0 a launch costs one branch per side and one increment.
`launch` / `launch_end` are this module's functions of those names, or,
from a model's first run at level >= 1, the same functions compiled
(native/launch_ext.py: a CPython extension that writes the same records
through the same core without the Python in between), whichever
`Model.calls` holds.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import blackbox, device, memcheck, nan_checks, plan_checks
from . import stats as stats_mod
from . import format as fmt
from . import sink, state
from .. import settings as settings_mod

IN, OUT, INOUT = "in", "out", "inout"


class Site:
    """One launch point of a generated wrapper, described once."""

    __slots__ = ("kernel", "nodes", "source", "modules", "args", "lines", "ops", "constants", "scales", "writers",
                 "dequants", "_selected", "_box")

    def __init__(self, kernel: str, nodes: str, source: str, modules: str,
                 args: Sequence[Tuple[str, str]] = (), lines: str = "", ops: str = "",
                 constants: Sequence[int] = (), scales: Optional[Dict[int, str]] = None,
                 writers: Optional[Dict[int, Tuple[int, str]]] = None,
                 dequants: Optional[Dict[int, str]] = None) -> None:
        self.kernel = kernel
        self.nodes = nodes          # comma-separated FX node names, "" = unknown
        self.source = source        # "file:line", "" = unknown
        self.modules = modules      # comma-separated module paths (filter only)
        self.args = tuple(args)     # (name, role)
        self.lines = lines          # the source-line / holds body lines, formatted by the codegen
        self.ops = ops              # the launch's FX ops, one JSON array (level 10; docs/dumps.md)
        self.constants = frozenset(constants)   # indexes of args that are constants (the black box describes them)
        self.scales = dict(scales or {})        # arg index -> the op's scale argument it is passed as
        self.writers = dict(writers or {})      # scale arg index -> (the earlier launch that wrote it, its words)
        self.dequants = dict(dequants or {})    # operand's arg index -> how its scales apply (plan.dequant_spec)
        self._selected: Optional[bool] = None
        self._box = 0               # the black box's C++ description of this site (made on first use)

    def __del__(self) -> None:
        if self._box:
            try:
                sink.native().blackbox_site_free(self._box)
            except Exception:
                pass

    def filter_names(self) -> Tuple[str, ...]:
        names = [self.kernel, self.source]
        for text in (self.nodes, self.modules):
            names += [n for n in text.split(",") if n]
        return tuple(n for n in names if n)

    def origin_line(self) -> str:
        return f"  origin: nodes={self.nodes or '-'} source={self.source or '-'}"


class Model:
    """What a wrapper was compiled with; the first run reads the run-time settings."""

    def __init__(self, name: str, level: int, kernels: str = "", nan_check: str = "off",
                 check_inputs: bool = False, torch_version: str = "",
                 defaults: Optional[Dict[str, Any]] = None, memcheck: str = "off",
                 blackbox: int = 0) -> None:
        self.name = sink.instance_name(name or "model")
        self.compiled_level = int(level)
        self.compiled_kernels = settings_mod.split_kernels(kernels or "")
        self.compiled_nan_check = settings_mod._parse_nan(nan_check or "off")
        self.compiled_check_inputs = bool(check_inputs)
        self.torch_version = torch_version
        # what a run does while its variables are unset (AOTI_DEBUG_COMPILE=all:
        # less than is compiled in)
        d = defaults or dict(level=level, kernels=kernels, nan_check=nan_check, check_inputs=check_inputs,
                             memcheck=memcheck, blackbox=blackbox)
        self.check_inputs = bool(check_inputs) and bool(d["check_inputs"])   # what runs do (after _init)
        self.compiled_memcheck = settings_mod._parse_memcheck(memcheck or "off")
        self.memcheck = settings_mod._parse_memcheck(d["memcheck"] or "off")   # what runs do (after _init)
        self.compiled_blackbox = int(blackbox)
        self.blackbox = int(d["blackbox"])   # launches the black box keeps (after _init), 0: off
        self._box_on: Optional[bool] = None  # did the ring open (asked once)
        self.default_level = int(d["level"])
        self.nan_check = settings_mod._parse_nan(d["nan_check"] or "off")
        self.level = 0
        self._runtime_kernels: Optional[Tuple[str, ...]] = (
            settings_mod.split_kernels(d["kernels"] or "") if defaults else None)
        self._ready = False
        self._lock = threading.Lock()
        self._runs = itertools.count(1)   # next() on a count is atomic under the GIL
        self.reference = ""               # "eager": the runs are an eager reference (runtime/eager.py)
        self.sync = False                 # AOTI_DEBUG_SYNC (after _init)
        self.calls = (launch, launch_end)  # what the wrapper calls around a launch (after _init)

    # -- settings ------------------------------------------------------------

    def _init(self) -> None:
        with self._lock:
            if self._ready:
                return
            s = state.settings()
            lines = []
            # A run-time value lowers what is compiled in, never raises it; asking for
            # more is noted.  (field, its variable, compiled in, asks for more, the lower)
            lowering = (
                ("level", "AOTI_DEBUG_LOGLEVEL", self.compiled_level, *_ordered(int)),
                ("nan_check", "AOTI_DEBUG_NAN_CHECK", self.compiled_nan_check,
                 nan_checks.asks_for_more, nan_checks.effective),
                ("check_inputs", "AOTI_DEBUG_CHECK_INPUTS", self.compiled_check_inputs, *_ordered(bool)),
                ("memcheck", "AOTI_DEBUG_MEMCHECK", self.compiled_memcheck,
                 *_ordered(memcheck.ORDER.__getitem__)),
                ("blackbox", "AOTI_DEBUG_BLACKBOX", self.compiled_blackbox, *_ordered(int)),
            )
            run = {}
            for field, variable, compiled, asks_more, lowest in lowering:
                asked = s.set_at_run_time(field)
                if asked is None:
                    continue
                wanted = getattr(s, field)
                if asks_more(compiled, wanted):
                    shown = _SHOWN.get(field, str)
                    lines.append(self._more(asked, shown(compiled), variable, shown(wanted)))
                run[field] = lowest(compiled, wanted)
            level = run.get("level", self.default_level)
            self.nan_check = run.get("nan_check", self.nan_check)
            self.memcheck = run.get("memcheck", self.memcheck)
            self.check_inputs = run.get("check_inputs", self.check_inputs)
            self.blackbox = run.get("blackbox", self.blackbox)
            self.sync = s.sync
            if s.sync and level == 0:
                lines.append(settings_mod.SYNC_NEEDS_LEVEL)
            if s.set_at_run_time("kernels") is not None:   # a filter is replaced, not lowered
                self._runtime_kernels = tuple(s.kernels)
            if lines:
                state.tell(level, "settings", *lines, once=True)
            if level >= 1:
                _crash_handler()
                self.calls = _compiled_calls() or self.calls
            self.level = level
            self._ready = True

    def _more(self, set_from: str, compiled, variable: str, wanted) -> str:
        """The note for a run-time value above what was compiled in (as launch-inl.h, Model::init)."""
        name, _, text = set_from.partition("=")
        return (f"{name}={text!r} asks for more than model {self.name!r} was compiled with "
                f"({compiled}); using {compiled}. Recompile with {variable}={wanted} "
                f"(or AOTI_DEBUG_COMPILE=all) to get it.")

    def begin_run(self, input_names: Sequence[str] = (), inputs: Sequence[Any] = ()) -> "Run":
        if not self._ready:
            self._init()
        run = Run(self, next(self._runs), self.level)
        if self.memcheck != "off":   # first: guards what the run allocates from here on
            run.mem = memcheck.MemChecks(self.memcheck, self.name, run.run, run.level)
        if run.level:
            if self.sync:
                run.device = device.hooks()
            _safely(run._write_begin, input_names, inputs)
            if run.device is not None:
                run.wait()
        if self.blackbox > 0 and self._box_open():
            run.box = blackbox.BlackBox(self.name, run.run, run.level)
            _safely(run.box.inputs, input_names, inputs)
            if run.mem is not None:
                run.mem.fired = run.box.fired
        if self.check_inputs or (run.mem is not None and run.mem.on):
            run.plan = plan_checks.PlanChecks(self.check_inputs or self.memcheck == "raise",
                                              self.name, run.run, run.level)
            if run.box is not None:
                run.plan.fired = run.box.fired
        if self.nan_check.enabled:
            run.nan = nan_checks.NanChecks(self.nan_check, run.run, run.level, self.name)
            if run.box is not None:
                run.nan.fired = run.box.fired
            # the run record's statistics, when it computed them (level 5), are the check's
            kept = run.memo[1] if run.memo is not None and run.memo[0] == 0 else None
            run.memo = None
            _safely(run.nan.inputs, inputs, kept)
        run.checks = any(c is not None for c in (run.mem, run.box, run.plan, run.nan))
        return run

    def _box_open(self) -> bool:
        if self._box_on is None:
            self._box_on = False
            try:
                self._box_on = blackbox.open_ring(self.blackbox, self.level, self.torch_version)
            except Exception as exc:
                _safely(state.tell, self.level, "blackbox",
                        f"cannot keep the black box: {type(exc).__name__}: {exc}; the model runs without it")
        return self._box_on

    def selected(self, site: Site) -> bool:
        m = site._selected
        if m is None:
            names = site.filter_names()
            m = settings_mod.kernels_match(self.compiled_kernels, names) and (
                self._runtime_kernels is None or settings_mod.kernels_match(self._runtime_kernels, names))
            site._selected = m
        return m


class Run:
    """One call of the compiled graph: run number R, launch counter K, level."""

    __slots__ = ("model", "run", "level", "launch", "nan", "dumps", "mem", "box", "plan", "checks", "device",
                 "synced", "memo", "devices", "_texts")

    def __init__(self, model: Model, run: int, level: int) -> None:
        self.model, self.run, self.level, self.launch = model, run, level, 0
        self.device: Optional[device.Hooks] = None   # AOTI_DEBUG_SYNC on a device (on_device)
        self.synced = 0                               # K of the last launch found clean
        self.nan: Optional[nan_checks.NanChecks] = None   # set when NaN checks are on
        self.dumps: Optional[RunDumps] = None              # level 10: the run's dump folder
        self.mem: Optional[memcheck.MemChecks] = None      # set when the memory check is on
        self.box: Optional[blackbox.BlackBox] = None       # set while the black box is on
        self.plan: Optional[plan_checks.PlanChecks] = None  # set while the plan check is on
        self.checks = False   # any of the four above: what checks_before/checks_after ask first
        self.memo = None   # (K, stats.Memo) of launch K's launch-end record, for its NaN/Inf check
        # level 5 with a device: each record's device tensors fetched together (stats.Memo)
        self.devices = level >= 5 and stats_mod.device_path_on()
        self._texts = None   # (destination, model name, torch version, run facts) as the core takes them

    def _core_record(self, kind: str, site: Optional[Site], values, names=None, facts: str = "",
                     mark: bool = False, keep: bool = False) -> bool:
        """The record rendered and written by the compiled core in one call,
        its text the C++ shim's (launch-inl.h); `mark`: the launch marked in
        flight after a `launch` record, the mark cleared before a `launch-end`
        one; with `keep` (level 5, a NaN/Inf check on) the statistics it
        computed are kept for the check.  False, nothing written, where the core is
        unavailable or a value is not one it renders (format.py writes those),
        and in a run with a device (its statistics come from torch ops)."""
        core = sink.native()
        if core is None or self.devices:
            return False
        try:
            texts = self._core_texts(core, facts)
            got = core.write_record(kind, site._box or blackbox.site_handle(site) if site is not None else 0, texts,
                                    self.run, self.launch, self.level, values, names, mark, keep and self.level >= 5)
        except Exception:
            return False
        if got is None:
            return False
        if got:
            memo = stats_mod.Memo(hash=True)
            memo.keep_core(values, got)
            self.memo = (self.launch, memo)
        return True

    def _core_texts(self, core=None, facts: str = ""):
        """The run's texts as the compiled core takes them (core.record_texts),
        made on first use; None without the core, or where a `launch` record of
        level 1 or 2 could not be headed by it (core.write_launch encodes its
        destination and model name strictly).  The launch extension asks too."""
        texts = self._texts
        if texts is None or facts:
            core = core or sink.native()
            if core is None:
                return None
            dest = state.settings().logdest
            if self.level < 3:
                try:
                    dest.encode("utf-8"), self.model.name.encode("utf-8")
                except UnicodeError:
                    return None
            texts = self._texts = core.record_texts(dest, self.model.name, sink.torch_version(), facts)
        return texts

    def _memo(self) -> Optional[stats_mod.Memo]:
        return stats_mod.Memo() if self.devices else None

    def _id(self) -> str:
        return f"{self.model.name}:{self.run}.{self.launch}"

    def _write_begin(self, names, values) -> None:
        s = state.settings()
        facts = fmt.header_facts(threading.get_native_id(), s.rank, s.world, self.model.reference)
        keep = self.model.nan_check.enabled   # the inputs' statistics, for the NaN/Inf check's first look
        if not (self.level >= 3 and self._core_record("run", None, values, names, facts, keep=keep)):
            body = _named("in", names, values, self.level, self._memo()) if self.level >= 3 else []
            state.emit(fmt.record(fmt.header("run", str(self.run), self.model.name, state.pid(), None, facts), body))
        if self.level >= 10:
            self.dumps = RunDumps(self.model.name, self.run)
            self.dumps.begin(names, values)

    def before(self, site: Site, values: Sequence[Any]) -> None:
        """`launch model:R.K kernel` (written before the kernel runs)."""
        marked = False
        if self.model.selected(site):
            # the dumps come before the mark: a crash while dumping is not the kernel's
            marked = _safely(self._write_launch, site, values, self.dumps is None)
            if self.dumps is not None:   # the inputs, before the kernel runs
                _safely(self.dumps.launch, self.launch, site, values, False)
        if not marked:
            _inflight(self.run, self.launch, site.kernel, self.model.name)

    def _write_launch(self, site: Site, values, mark: bool) -> bool:
        """Writes the record; True when it also marked the launch in flight
        (the compiled core does both in one call)."""
        if self.level >= 3 and self._core_record("launch", site, values, mark=mark):
            return mark
        body = []
        if self.level >= 3:
            body = [site.origin_line()] + site.lines.splitlines() + _args(site, values, False, self.level, self._memo())
        core = sink.native()
        if core is not None:
            try:
                core.write_launch(state.settings().logdest, self.model.name, self.run, self.launch, site.kernel,
                                  fmt.record("", body), mark, sink.torch_version())
                return mark
            except Exception:
                pass
        state.emit(fmt.record(fmt.header("launch", self._id(), site.kernel, state.pid()), body))
        return False

    def wait(self, site: Optional[Site] = None) -> None:
        """AOTI_DEBUG_SYNC: waits for the device after launch `site` (None:
        before the run's first launch, so that an error of work queued earlier
        is not blamed on launch 1).  Not during graph capture, which forbids
        waiting: the first launch says so, once (launch.h wait_for_device)."""
        if self.device.capturing():
            if site is not None:
                _safely(lambda: state.tell(self.level, "sync", settings_mod.SYNC_CAPTURE, once=True))
            return
        error = self.device.synchronize()
        if error is not None:
            self._sync_failed(site, error)
        self.synced = self.launch

    def _sync_failed(self, site: Optional[Site], error: str) -> None:
        """The crash trailer of the launch that raised a device error, then the
        error with kernel and source line (launch.h sync_failed, word for word)."""
        name, text, ident = self.model.name, device.one_line(error), self._id()
        if site is None:
            by = f"work queued before run {self.run} of model {name}"
            message = (f"aoti-debug: the device reported an error before run {self.run} of model '{name}' "
                       f"began (work queued before the model was called): {text}")
        else:
            where = f"{site.kernel} (source: {site.source or 'unknown'})"
            if self.launch - self.synced <= 1:
                by = ident
                message = (f"aoti-debug: launch {ident} {where} failed on the device: {text} "
                           "(found by AOTI_DEBUG_SYNC=1, which waits for each launch)")
            else:
                first = f"{name}:{self.run}.{self.synced + 1}"
                by = f"one of {first} to {ident} (launches compiled without instrumentation are not waited for)"
                message = (f"aoti-debug: the device failed in one of launches {first} to {ident}, found after "
                           f"launch {ident} {where}: {text} (AOTI_DEBUG_SYNC=1 waits for each instrumented "
                           f"launch; the launches before {ident} that were compiled without instrumentation "
                           "are not)")
        head = fmt.header("crash", ident if site else "-", site.kernel if site else "-", state.pid())
        _safely(state.emit, fmt.record(head, [f"  error: {text}", f"  raised-by: {by}"]))
        _inflight(None)
        raise SyncError(message)

    def after(self, site: Site, values: Sequence[Any]) -> None:
        """`launch-end model:R.K kernel` with the outputs (level >= 3)."""
        if self.device is not None:
            self.wait(site)
        if self.level < 3 or not self.model.selected(site):
            _inflight(None)
            return
        if _safely(self._write_launch_end, site, values) is None:   # it raised: the launch is over all the same
            _inflight(None)

    def _write_launch_end(self, site: Site, values) -> bool:
        """The record, the launch's in-flight mark cleared first (by the core in
        the same call when it writes the record)."""
        # the statistics it computes are kept for the NaN/Inf check right after
        if not self._core_record("launch-end", site, values, mark=True, keep=self.nan is not None):
            _inflight(None)
            memo = self._memo()
            if memo is not None and self.nan is not None:
                self.memo = (self.launch, memo)
            body = _args(site, values, True, self.level, memo)
            state.emit(fmt.record(fmt.header("launch-end", self._id(), site.kernel, state.pid()), body))
        if self.dumps is not None:
            self.dumps.launch(self.launch, site, values, True)
        return True

    def end(self, names: Sequence[str], values: Sequence[Any]) -> None:
        """`run-end R model` with the outputs (level >= 3)."""
        if self.level < 3:
            return
        _safely(self._write_end, names, values)

    def _write_end(self, names, values) -> None:
        if not self._core_record("run-end", None, values, names):
            body = _named("out", names, values, self.level, self._memo())
            state.emit(fmt.record(fmt.header("run-end", str(self.run), self.model.name, state.pid()), body))
        if self.dumps is not None:
            self.dumps.end(self.launch)


    # -- the checks around a launch (whatever the level), in the order checks.h's
    # LaunchChecks keeps: the generated code calls these two, nothing else --
    def checks_before(self, site: Site, values: Sequence[Any]) -> None:
        """Before the launch: the memory check tags what it allocates, then the
        black box keeps its record and inputs (`values`: the inputs' side)."""
        if self.mem is not None:
            self.mem_before(site)
        if self.box is not None:
            self.box_before(site, values)

    def checks_after(self, site: Site, values: Sequence[Any], sources: Optional[Sequence[str]] = None,
                     planned=None) -> None:
        """After the launch (`values`: every argument): the black box marks it
        returned, then the plan check (an extern kernel's outputs against the
        graph's plan, `planned`), the memory check, the NaN check (`sources`:
        each output's origin).  The memory check comes before the NaN check: a
        NaN read from memory nobody wrote is reported as that, not as numerics.
        A site without a plan or without outputs to check passes None."""
        if self.box is not None:
            self.box_after()
        if self.plan is not None and planned is not None:
            self.plan_after(site, values, planned)
        if self.mem is not None:
            self.mem_after(site, values)
        if self.nan is not None and sources is not None:
            self.nan_after(site, sources, values)

    # the black box, whatever the level (try/except here, not _safely: every launch pays for these)
    def box_before(self, site: Site, values: Sequence[Any]) -> None:
        """The launch's record and inputs into the black box."""
        try:
            self.box.before(self.launch, site, values)
        except Exception as exc:
            _box_failed(self.level, exc)

    def box_after(self) -> None:
        try:
            self.box.after()
        except Exception as exc:
            _box_failed(self.level, exc)

    def nan_after(self, site: Site, sources: Sequence[str], values: Sequence[Any]) -> None:
        """The NaN/Inf check of the launch's outputs (whatever the level)."""
        kept = self.memo[1] if self.memo is not None and self.memo[0] == self.launch else None
        self.memo = None   # it holds the tensors: none outlives its launch here
        _checked(self.nan.after, self.launch, site, sources, values, kept)

    def nan_finish(self) -> None:
        _checked(self.nan.finish)

    def plan_after(self, site: Site, values: Sequence[Any], planned) -> None:
        """An extern kernel's or custom op's outputs against the graph's plan (whatever the level)."""
        _checked(self.plan.after, self.launch, site, values, planned, what="plan check")

    def mem_before(self, site: Site) -> None:
        if self.mem.on:
            _safely(self.mem.before, self.launch, site)

    def mem_after(self, site: Site, values: Sequence[Any]) -> None:
        """The memory check after a launch (whatever the level), before the NaN check."""
        if self.mem.on:
            _checked(self.mem.after, self.launch, site, values, what="memory check")

    def mem_finish(self, names: Sequence[str], values: Sequence[Any]) -> None:
        if self.mem.on:
            _checked(self.mem.finish, self.launch, names, values, what="memory check")


def launch(run: Run, site: Site, *values) -> None:
    """Launch K at `site`, counted; at level >= 1 its `launch` record (the
    launch marked in flight).  `values`: the site's arguments, None where the
    record does not show one (an output's before the launch)."""
    run.launch += 1
    if run.level:
        run.before(site, values)


def launch_end(run: Run, site: Site, *values) -> None:
    """The launch returned: at level >= 1 its in-flight mark cleared, with its
    `launch-end` record at level >= 3."""
    if run.level:
        run.after(site, values)


def _compiled_calls():
    """launch / launch_end compiled (native/launch_ext.py), or None (as without the core)."""
    if sink.native() is None:
        return None
    try:
        from ..native import launch_ext
        return launch_ext.functions((Run, Site, launch, launch_end, blackbox.site_handle))
    except Exception:
        return None


class SyncError(RuntimeError):
    """A device error found by AOTI_DEBUG_SYNC, raised into the model's caller
    (a RuntimeError, as from AOTI)."""


class RunDumps:
    """Level 10: one run's folder `<pid>-<model>-run<R>` in the layout the C++
    shim writes (docs/dumps.md), so nan-origin, diff and report read both.
    There is no .so to replay: the `run` line has no `so`."""

    def __init__(self, model: str, run: int) -> None:
        from . import recorder
        self.model, self.run = model, run
        self.rec = recorder.Recorder(f"{model}-run{run}")
        self.dumped = 0   # K of the launch whose inputs were recorded

    def _line(self, event: str, status: str, kind: str, files, **fields) -> None:
        self.rec.line(dict(event=event, status=status, kind=kind, run=self.run, files=files,
                           bytes=sum(f.get("bytes", 0) for f in files), **fields))

    def begin(self, names, values) -> None:
        if self.rec.folder() is None:
            return
        saved = _save(self.rec, "inputs.pt", list(values))
        files = [dict(saved, name="inputs", role="in")] if saved and saved.get("file") else []
        s = state.settings()
        ranked = {} if s.rank is None else dict(rank=s.rank, **({"world": s.world} if s.world else {}))
        why = {} if files else {"error": f"inputs.pt: {(saved or {}).get('error') or 'not written'}"}
        self._line("run", "ok" if files else "incomplete", "run", files, model=self.model, pid=state.pid(),
                   thread=threading.get_native_id(), **ranked, inputs=[n or "-" for n in names], **why)

    def launch(self, k: int, site: Site, values, out_side: bool) -> None:
        if not out_side:
            if not self.rec.begin():   # the count limit is per launch, as in C++
                return
            self.dumped = k
        elif self.dumped != k:
            return
        files, wanted = [], 0
        for (name, role), value in zip(site.args, values):
            if not (role == INOUT or (role == OUT) == out_side):
                continue
            for part, tensor in _tensors(name or "-", value):
                wanted += 1
                file = f"launch{k:06d}_{'out' if out_side else 'in'}_{_safe(part)}.pt"
                saved = _save(self.rec, file, tensor) or {"file": None, "error": "not written"}
                files.append(dict(saved, name=part, role=role))
        if self.rec.folder() is None:
            return
        ok = all(f.get("file") for f in files)
        self._line("after" if out_side else "before", ("ok" if ok else "incomplete") if out_side else "running",
                   "launch", files, index=k, id=f"{self.run}.{k}", kernel=site.kernel, nodes=site.nodes,
                   source=site.source, lines=site.lines,
                   **({"ops": json.loads(site.ops)} if site.ops and not out_side else {}))

    def end(self, launches: int) -> None:
        if self.rec.folder() is not None:
            self._line("run-end", "ok", "run-end", [], model=self.model, launches=launches)


def _box_failed(level: int, exc: Exception) -> None:
    _safely(state.tell, level, "blackbox", f"could not keep a launch: {type(exc).__name__}: {exc}", once=True)


def _ordered(order):
    """Asks-for-more and lowest of a setting whose values are ordered by `order`."""
    return (lambda c, r: order(r) > order(c)), (lambda c, r: min(c, r, key=order))


def _box_name(launches: int) -> str:
    return str(launches) if launches > 0 else "off"


# a value in a note as its variable is set (launch-inl.h, Model::init); others by str()
_SHOWN = {"check_inputs": lambda on: "1" if on else "0", "blackbox": _box_name}


def _tensors(name: str, value) -> List[Tuple[str, Any]]:
    """The tensors of one argument, named as the records name them: an extern kernel that
    returns several (sort, under torch.compile) gives one tuple, `buf3[0]`, `buf3[1]`.
    Scalars are not dumped (the C++ runtime has none among a launch's arguments)."""
    if hasattr(value, "data_ptr"):
        return [(name, value)]
    if isinstance(value, (tuple, list)):
        return [(f"{name}[{i}]", v) for i, v in enumerate(value) if hasattr(v, "data_ptr")]
    return []


def _save(rec, file: str, value):
    """One file of a level-10 dump.  Nothing is copied from a device while a
    CUDA graph is being captured (a copy there would break the user's capture):
    the file is then missing, with the reason, and the launch incomplete."""
    values = value if isinstance(value, list) else [value]
    if any(getattr(getattr(v, "device", None), "type", "cpu") != "cpu" for v in values):
        hooks = device.hooks()
        if hooks is not None and hooks.capturing():
            return {"file": None, "error": stats_mod.SKIP_CAPTURE}
    return rec.save(file, [_host(v) for v in value] if isinstance(value, list) else _host(value))


def _host(value):
    """What a dump holds: the tensor on the CPU with its strides (anything else as it is)."""
    if hasattr(value, "detach") and hasattr(value, "device"):
        value = value.detach()
        return value if value.device.type == "cpu" else value.cpu()
    return value


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_." else "_" for c in (name or "arg"))


def _checked(check, *args, what: str = "NaN check") -> None:
    """A check's own failure is the only exception that reaches the model's caller."""
    try:
        check(*args)
    except (nan_checks.NanCheckError, memcheck.MemcheckError, plan_checks.PlanCheckError):
        raise
    except Exception as exc:
        _safely(state.note, "logger", f"{what} failed: {type(exc).__name__}: {exc}")


def _args(site: Site, values, out_side: bool, level: int, memo=None):
    """A launch record's items; `memo` (a stats.Memo, level 5 of a run with a
    device) fetches their device tensors' statistics together first."""
    shown = [(k, name, role, value, site.scales.get(k))
             for k, ((name, role), value) in enumerate(zip(site.args, values))
             if role == INOUT or (role == OUT) == out_side]
    if memo is not None:
        memo.prefetch([t for _, _, _, value, _ in shown for t in fmt.tensors_in(value)])
    lines = []
    for k, name, role, value, scale in shown:
        item = fmt.item(f"{role} {name or '-'}", value, level, stats=memo, tensor=sink.tensor_block)
        spec = site.dequants.get(k) if level >= 5 and fmt._is_tensor(value) else None
        if spec:                                               # before the block's closing line
            item[-1:-1] = fmt.dequant_lines(value, spec, values, 3)
        if scale and level >= 5 and fmt._is_tensor(value):
            item[-1:-1] = fmt.scale_lines(value, scale, 3)
        lines += item
    return lines


def _named(role: str, names, values, level: int, memo=None):
    if memo is not None:
        memo.prefetch([t for value in values for t in fmt.tensors_in(value)])
    lines = []
    for i, value in enumerate(values):
        name = names[i] if i < len(names) and names[i] else "-"
        lines += fmt.item(f"{role} {name}", value, level, stats=memo, tensor=sink.tensor_block)
    return lines


def _safely(write, *args):
    """write(*args), or None when it raised."""
    try:
        return write(*args)
    except Exception as exc:   # logging never changes the model's behaviour
        try:
            state.note("logger", f"could not write a record: {type(exc).__name__}: {exc}")
        except Exception:
            pass


def _crash_handler() -> None:
    native = sink.native()
    if native is not None:
        try:
            native.install_crash_handler()
        except Exception:
            pass


def _inflight(run: Optional[int], launch: int = 0, kernel: str = "", model: str = "") -> None:
    native = sink.native()
    if native is None:
        return
    try:
        if run is None:
            native.clear_inflight()
        else:
            native.set_inflight(run, launch, kernel, model)
    except Exception:
        pass
