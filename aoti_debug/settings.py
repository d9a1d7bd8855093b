"""Every aoti-debug setting is read and validated here, and only here.

Order of precedence, highest first:

1. explicit arguments (``aoti_debug.instrument(level=5)``, ``read(overrides=...)``)
2. ``AOTI_DEBUG_*`` environment variables
3. the upstream PyTorch aliases (``AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER``, ...)
4. built-in defaults

The C++ shim (``cpp_runtime/include/aoti_debug/detail/settings.h``) mirrors
these rules and messages word for word; one table of cases in
``tests/test_settings_grammar.py`` runs against both.  This module imports
nothing heavy: the process-start hook uses it.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from typing import Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

LEVELS = (0, 1, 3, 5, 10)
NAN_MODES = ("off", "warn", "raise", "warn:nan", "raise:nan", "warn:naninf", "raise:naninf")
COMPILE_MODES = ("selected", "all")
MEMCHECK_MODES = ("off", "warn", "raise")
BLACKBOX_MAX_LAUNCHES = 1000000
BLACKBOX_MAX_MB = 1048576
BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True,
              "0": False, "false": False, "no": False, "off": False, "": False}
# upstream AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER values -> our levels
UPSTREAM_PRINTER_LEVELS = {0: 0, 1: 10, 2: 5, 3: 1}


class SettingsError(ValueError):
    """One or more environment variables or arguments hold a bad value."""

    def __init__(self, problems: List[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclasses.dataclass(frozen=True)
class NanCheck:
    action: str = "off"        # off | warn | raise
    count_inf: bool = False    # naninf: +-Inf counts as a failure too

    @property
    def enabled(self) -> bool:
        return self.action != "off"

    def __str__(self) -> str:
        if self.action == "off":
            return "off"
        return f"{self.action}:{'naninf' if self.count_inf else 'nan'}"


# AOTI_DEBUG_SYNC's notes, in both runtimes' words (detail/settings.h kSyncNeedsLevel, kSyncCapture)
SYNC_NEEDS_LEVEL = ("AOTI_DEBUG_SYNC=1 waits for the launches of a logged run: at level 0 no launch is "
                    "waited for (set AOTI_DEBUG_LOGLEVEL=1 with it)")
SYNC_CAPTURE = ("AOTI_DEBUG_SYNC=1: the stream is being captured into a CUDA graph, so its launches are not "
                "waited for during capture (run the model uncaptured to pin a fault to its launch)")


@dataclasses.dataclass(frozen=True)
class Settings:
    level: int = 0
    logdest: str = "stdout"
    kernels: Tuple[str, ...] = ()
    check_inputs: bool = False
    nan_check: NanCheck = NanCheck()
    nan_check_sat: bool = False   # the NaN check fails on saturated float8 values too
    memcheck: str = "off"      # off | warn | raise (docs/checks.md, "Memory check")
    blackbox: int = 0          # launches the black box keeps, 0: off (docs/dumps.md, "The black box")
    blackbox_max_mb: int = 256
    sync: bool = False
    dump_dir: str = "aoti_debug_dumps"
    dump_max_size_gb: float = 20.0
    dump_max_count: int = 1000
    compile: str = "selected"
    # the process's rank and world size (process_rank): not variables of ours, read with them
    rank: Optional[int] = None
    world: Optional[int] = None
    # set by compiled(): what a run does while its variables are unset (None: what is compiled in)
    run_defaults: Optional["RunDefaults"] = None
    # where each field's value came from: "default", "argument", or "NAME=value"
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)
    # the fields a variable of the environment set (with a valid value)
    from_variables: FrozenSet[str] = dataclasses.field(default=frozenset(), compare=False)

    def set_at_run_time(self, field: str) -> Optional[str]:
        """`NAME=value` when a variable set `field` (what a run's variables may
        lower, docs/reference.md), else None: unset, not valid, or an argument."""
        return self.sources[field] if field in self.from_variables else None

    @property
    def anything_compiled_in(self) -> bool:
        return (self.compile == "all" or self.level > 0 or self.check_inputs
                or self.nan_check.enabled or self.memcheck != "off" or self.blackbox > 0)

    def artifact_config(self, model: str, torch_version: str) -> Dict[str, object]:
        """What an artifact is compiled with, by the names of both runtimes'
        configurations (runtime/launches.py's Model, launch.h's ModelConfig
        and RunDefaults): the fields of COMPILED, each emitter writes them
        field by field."""
        config: Dict[str, object] = {"name": model}
        config.update((f, _emitted(getattr(self, f))) for f in COMPILED)
        config["torch_version"] = torch_version
        if self.run_defaults is not None:
            config["defaults"] = {f: _emitted(getattr(self.run_defaults, f)) for f in COMPILED}
        return config

    def compiled(self) -> "Settings":
        """What goes into an artifact.  With compile=all that is everything
        (each compiled field's `everything` in VARIABLES: level 10, NaN/Inf
        checks, guards, every kernel, ...), and the values asked for become
        what a run does until its own variables ask for more."""
        if self.compile != "all":
            return self
        return dataclasses.replace(self, **EVERYTHING, run_defaults=self.defaults)

    @property
    def defaults(self) -> "RunDefaults":
        """What a run does while its variables are unset."""
        return self.run_defaults or RunDefaults(*(getattr(self, f) for f in COMPILED))


def _emitted(value):
    """A compiled field as the configurations hold it: a kernel filter as one
    comma-separated text, a NaN check as its variable's value."""
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value) if isinstance(value, NanCheck) else value


# -- the grammar, the same in the C++ shim (detail/settings.h) ---------------
#
# ASCII only, so that Python and C++ read every value alike (Python's int()
# and float() would take Unicode digits, underscores, signs, nan and inf):
# surrounding ASCII whitespace is ignored, words are matched ignoring ASCII
# case, a whole number is ASCII digits, a decimal is ASCII digits with at
# most one '.'.

_SPACE = " \t\n\r\v\f"
_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
INT64_MAX = 2**63 - 1


def _strip(text: str) -> str:
    return text.strip(_SPACE)


def _word(text: str) -> str:
    return _strip(text).translate(_LOWER)


def _all_digits(text: str) -> bool:
    return all("0" <= c <= "9" for c in text)


def _whole(text: str) -> Optional[int]:
    """ASCII digits (leading zeros allowed) or None; at most INT64_MAX, as in C++:
    a limit that large is no limit either way."""
    t = _strip(text)
    if not t or not _all_digits(t):
        return None
    t = t.lstrip("0") or "0"
    return INT64_MAX if len(t) > 19 else min(int(t), INT64_MAX)


def _decimal(text: str) -> Optional[float]:
    """ASCII digits with at most one '.' (0.5, 2, .5, 5.) or None; no sign,
    exponent, underscore, nan or inf."""
    t = _strip(text)
    whole, _, fraction = t.partition(".")
    if not (whole + fraction) or not _all_digits(whole + fraction):
        return None
    return float(t)


# -- parsers: each returns the value or raises ValueError(accepted-values text) --

def _parse_level(text: str) -> int:
    value = _whole(text)
    if value not in LEVELS:
        raise ValueError("expected one of 0, 1, 3, 5, 10")
    return value


def _parse_upstream_level(text: str) -> int:
    value = _whole(text)
    if value not in UPSTREAM_PRINTER_LEVELS:
        raise ValueError("expected one of 0, 1, 2, 3 (1 -> level 10, 2 -> level 5, 3 -> level 1)")
    return UPSTREAM_PRINTER_LEVELS[value]


def _parse_bool(text: str) -> bool:
    key = _word(text)
    if key not in BOOL_WORDS:
        raise ValueError("expected one of 0, 1, true, false, yes, no, on, off")
    return BOOL_WORDS[key]


def _mode_word(text: str) -> str:
    """A check's mode as a word, with "", "0", "false" and "no" meaning off (C++: setting_mode)."""
    key = _word(text)
    return "off" if key in ("", "0", "false", "no") else key


def _mode(text: str, modes: Sequence[str]) -> str:
    """One of `modes` (a check's)."""
    key = _mode_word(text)
    if key not in modes:
        raise ValueError("expected one of " + ", ".join(modes))
    return key


def _parse_blackbox(text: str) -> int:
    if _mode_word(text) == "off":
        return 0
    value = _whole(text)
    if value is None or value > BLACKBOX_MAX_LAUNCHES:
        raise ValueError(f"expected off, or a number of launches from 0 to {BLACKBOX_MAX_LAUNCHES} "
                         "(0: off), e.g. 64")
    return value


def _parse_blackbox_mb(text: str) -> int:
    value = _whole(text)
    if value is None or not 1 <= value <= BLACKBOX_MAX_MB:
        raise ValueError(f"expected a whole number of megabytes from 1 to {BLACKBOX_MAX_MB}")
    return value


def _parse_nan(text: str) -> NanCheck:
    key = _mode(text, NAN_MODES)
    if key == "off":
        return NanCheck()
    action, _, kind = key.partition(":")
    return NanCheck(action, kind == "naninf")


def _parse_memcheck(text: str) -> str:
    return _mode(text, MEMCHECK_MODES)


def _parse_upstream_nan(text: str) -> NanCheck:
    key = _word(text)
    if key in ("1", "true"):
        return NanCheck("raise", True)
    if key in ("0", "false", ""):
        return NanCheck()
    raise ValueError("expected 0 or 1")


KERNELS_ACCEPTED = ("expected comma-separated globs (*, ?, [...]), none of them empty, "
                    "every [ closed by ]")


def _parse_kernels(text: str) -> Tuple[str, ...]:
    """An empty value means every kernel; otherwise no glob may be empty (a
    stray comma) and every '[' must open a set that ']' closes (fnmatch would
    quietly read it as a literal '[')."""
    if not _strip(text):
        return ()
    globs = split_kernels(text)
    if len(globs) != text.count(",") + 1 or not all(map(_sets_closed, globs)):
        raise ValueError(KERNELS_ACCEPTED)
    return globs


def split_kernels(text: str) -> Tuple[str, ...]:
    """The globs of a filter already checked (an artifact's compiled-in one)."""
    return tuple(g for g in (_word(p) for p in text.split(",")) if g)


def kernels_match(patterns: Sequence[str], names: Iterable[str]) -> bool:
    """AOTI_DEBUG_KERNELS applied: True when no glob is given or any glob
    matches any of the names (kernel name, origins), case-insensitively.  The
    C++ shim has the same matcher (detail/settings.h): `*`, `?` and `[...]`
    (`[!...]` negates), as fnmatch.fnmatchcase reads them."""
    if not patterns:
        return True
    import fnmatch
    lowered = [n.lower() for n in names if n]
    return any(fnmatch.fnmatchcase(n, p.lower()) for p in patterns for n in lowered)


def _sets_closed(glob: str) -> bool:
    i = 0
    while i < len(glob):
        if glob[i] == "[":
            # fnmatch's set: '[', optional '!', a ']' right after is a member, then up to ']'
            j = i + 1
            if j < len(glob) and glob[j] == "!":
                j += 1
            if j < len(glob) and glob[j] == "]":
                j += 1
            j = glob.find("]", j)
            if j < 0:
                return False
            i = j
        i += 1
    return True


def _parse_compile(text: str) -> str:
    key = _word(text)
    if key not in COMPILE_MODES:
        raise ValueError("expected selected (what the other variables ask for) or all "
                         "(level 10, NaN/Inf checks and input guards, off at run time "
                         "until asked for)")
    return key


def _parse_dest(text: str) -> str:
    if not _strip(text):
        raise ValueError("expected stdout, stderr, or a file path (%i becomes the process id, %r its rank)")
    return _strip(text)


def _parse_dir(text: str) -> str:
    if not _strip(text):
        raise ValueError("expected a directory path (%r becomes the process's rank)")
    return _strip(text)


RANK_VARIABLES = (("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "LOCAL_WORLD_SIZE"))


def process_rank(env: Mapping[str, str]) -> Tuple[Optional[int], Optional[int]]:
    """(rank, world size) of the process: RANK, else LOCAL_RANK (torchrun sets
    both), as a whole number; the world size from WORLD_SIZE (LOCAL_WORLD_SIZE
    with LOCAL_RANK).  None where unknown.  detail::process_rank is the same rule."""
    for rank_name, world_name in RANK_VARIABLES:
        rank = _whole(env[rank_name]) if rank_name in env else None
        if rank is None:
            continue
        world = _whole(env[world_name]) if world_name in env else None
        return rank, (world if world else None)
    return None, None


def expand_rank(path: str, rank: Optional[int]) -> str:
    """`path` with %r replaced by the rank; ValueError when %r is there and the rank unknown."""
    if "%r" not in path:
        return path
    if rank is None:
        raise ValueError("%r becomes the process's rank, read from RANK, else LOCAL_RANK "
                         "(torchrun sets both), and neither is set to a whole number")
    return path.replace("%r", str(rank))


def _parse_size_gb(text: str) -> float:
    value = _decimal(text)
    if value is None or not 0 < value < float("inf"):
        raise ValueError("expected a number of gigabytes > 0, e.g. 0.5")
    return value


def _parse_count(text: str) -> int:
    value = _whole(text)
    if value is None:
        raise ValueError("expected a whole number >= 0")
    return value


@dataclasses.dataclass(frozen=True)
class Variable:
    field: str
    name: str
    parse: Callable[[str], object]
    alias: Optional[str] = None
    alias_parse: Optional[Callable[[str], object]] = None
    when: str = "compile + run"
    help: str = ""
    # compiled in (when "compile + run"): the value AOTI_DEBUG_COMPILE=all compiles in
    everything: object = None


VARIABLES: Tuple[Variable, ...] = (
    Variable("level", "AOTI_DEBUG_LOGLEVEL", _parse_level,
             "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", _parse_upstream_level,
             everything=10, help="0/1/3/5/10: what each launch writes"),
    Variable("compile", "AOTI_DEBUG_COMPILE", _parse_compile, when="compile",
             help="all: compile everything in, off at run time until asked for"),
    Variable("logdest", "AOTI_DEBUG_LOGDEST", _parse_dest, when="run",
             help="stdout, stderr or a path; %i becomes the process id"),
    Variable("kernels", "AOTI_DEBUG_KERNELS", _parse_kernels,
             "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT", _parse_kernels,
             everything=(), help="comma-separated globs over kernel names and origins"),
    Variable("check_inputs", "AOTI_DEBUG_CHECK_INPUTS", _parse_bool,
             "AOTI_RUNTIME_CHECK_INPUTS", _parse_bool,
             everything=True, help="guard model inputs against what the artifact was compiled for"),
    Variable("nan_check", "AOTI_DEBUG_NAN_CHECK", _parse_nan,
             "TORCHINDUCTOR_NAN_ASSERTS", _parse_upstream_nan,
             everything=NanCheck("raise", True), help="off, warn, raise (+ :nan or :naninf)"),
    Variable("nan_check_sat", "AOTI_DEBUG_NAN_CHECK_SAT", _parse_bool, when="run",
             help="1: the NaN check also fails on float8 values at their format's largest finite "
                  "magnitude (saturated: an overflow, or a legitimate clamp)"),
    Variable("memcheck", "AOTI_DEBUG_MEMCHECK", _parse_memcheck,
             everything="raise", help="off, warn, raise: guard regions and poison around a run's allocations"),
    Variable("blackbox", "AOTI_DEBUG_BLACKBOX", _parse_blackbox,
             everything=BLACKBOX_MAX_LAUNCHES,
             help="off, or how many of the last launches the crash-proof ring keeps, e.g. 64"),
    Variable("blackbox_max_mb", "AOTI_DEBUG_BLACKBOX_MAX_MB", _parse_blackbox_mb, when="run",
             help="the black box's ring file size in megabytes"),
    Variable("sync", "AOTI_DEBUG_SYNC", _parse_bool, when="run",
             help="wait for each launch of a logged run (level >= 1), so an asynchronous device "
                  "error is pinned to the launch that raised it"),
    Variable("dump_dir", "AOTI_DEBUG_DUMP_DIR", _parse_dir, when="run",
             help="level-10 dump directory"),
    Variable("dump_max_size_gb", "AOTI_DEBUG_DUMP_MAX_SIZE_GB", _parse_size_gb, when="run",
             help="hard limit on the dump directory's size"),
    Variable("dump_max_count", "AOTI_DEBUG_DUMP_MAX_COUNT", _parse_count, when="run",
             help="hard limit on the number of dumped launches"),
)

# The settings an artifact compiles in (a run's variables may lower them), in
# the table's order: what artifact_config writes, RunDefaults holds, and
# AOTI_DEBUG_COMPILE=all sets to their `everything`.
COMPILED: Tuple[str, ...] = tuple(v.field for v in VARIABLES if v.when == "compile + run")
EVERYTHING: Dict[str, object] = {v.field: v.everything for v in VARIABLES if v.field in COMPILED}
# What an artifact does while a run-time variable is unset, when that is less
# than what was compiled in (AOTI_DEBUG_COMPILE=all): one value per COMPILED field.
RunDefaults = collections.namedtuple("RunDefaults", COMPILED)


# Every name the process-start hook looks for.
ALL_NAMES: Tuple[str, ...] = tuple(
    n for v in VARIABLES for n in (v.name, v.alias) if n
)


# AOTI_DEBUG_* names the project uses that are not settings: known, never called unknown
OTHER_NAMES: Tuple[str, ...] = (
    "AOTI_DEBUG_CACHE_DIR",             # where the C++ pieces are built (native/build.py, runner.py)
    "AOTI_DEBUG_LAUNCH_EXTENSION",      # "0": torch.compile's launches without their extension (native/launch_ext.py)
    "AOTI_DEBUG_RUNTIME_REGISTRY",      # set by the runtime itself (docs/log-format.md 6)
    "AOTI_DEBUG_VENV",                  # scripts/setup.sh
    "AOTI_DEBUG_CACHE",                 # the test venvs of other torch versions (docs/testing.md)
    "AOTI_DEBUG_FUZZ_EXAMPLES",         # tests/test_analysis_fuzz.py
    "AOTI_DEBUG_PREFIX",                # docs/cpp.md's shell variable
)
PREFIX = "AOTI_DEBUG_"
# upstream's prefixes: only a near miss of one of our aliases is named, upstream has many more
UPSTREAM_PREFIXES = ("AOT_INDUCTOR_", "AOTI_RUNTIME_", "TORCHINDUCTOR_")
UPSTREAM_CUTOFF = 0.9       # no upstream variable of torch 2.13 comes this close to an alias
SUGGEST_MAX = 100           # a longer name gets no "did you mean" (difflib treats long ones apart)
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def unknown_variables(environ: Optional[Mapping[str, str]] = None) -> List[str]:
    """One message per variable that looks like ours and is not, by name: every unknown
    AOTI_DEBUG_* one, and a near miss of an upstream alias, each with the closest known
    name (difflib.get_close_matches; detail::unknown_variables in C++ is the same rule).
    Names of other characters than ASCII letters, digits and `_` are passed over."""
    import difflib
    env = os.environ if environ is None else environ
    ours = [v.name for v in VARIABLES] + list(OTHER_NAMES)
    aliases = [v.alias for v in VARIABLES if v.alias]
    out = []
    for name in sorted(env):
        if not set(name) <= _NAME_CHARS or name in ALL_NAMES or name in OTHER_NAMES:
            continue
        short = len(name) <= SUGGEST_MAX
        if name.startswith(PREFIX):
            # compared without the prefix they share, which would make every name close
            close = [PREFIX + c for c in difflib.get_close_matches(
                name[len(PREFIX):], [n[len(PREFIX):] for n in ours], n=1)] if short else []
        elif name.startswith(UPSTREAM_PREFIXES):
            close = difflib.get_close_matches(name, aliases, n=1, cutoff=UPSTREAM_CUTOFF) if short else []
            if not close:
                continue        # one of upstream's own variables
        else:
            continue
        out.append(f"{name} is not a variable aoti-debug reads"
                   + (f" (did you mean {close[0]}?)" if close else "") + IGNORED)
    return out


IGNORED = "; ignoring it"

# what else taking over an upstream alias does (codegen_patches/install.py)
UPSTREAM_ALSO = {"AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER": "; Inductor's own printer is off",
                 "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT": "; Inductor's own printer is off"}


def upstream_notes(environ: Optional[Mapping[str, str]] = None) -> List[str]:
    """One message per upstream alias set in the environment: which of our variables it
    was read as, with the value it became, or that ours is set too and wins.  Said once,
    at the first compile (_startup.py): upstream's names otherwise change what they do
    without a word.  A bad value is left to the compile's own error."""
    env = os.environ if environ is None else environ
    resolved, _ = read_with_problems(env)
    out = []
    for var in VARIABLES:
        if not var.alias or var.alias not in env:
            continue
        given = f"{var.alias}={_shown(env[var.alias])}"
        if var.name in env:
            out.append(f"{given} is not read: {var.name}={_shown(env[var.name])} is set and wins"
                       + UPSTREAM_ALSO.get(var.alias, ""))
        elif resolved.sources.get(var.field) == f"{var.alias}={env[var.alias]}":
            out.append(f"{given} is read as {var.name}={value_text(getattr(resolved, var.field))}"
                       + UPSTREAM_ALSO.get(var.alias, ""))
    return out


def _shown(text: str) -> str:
    """A variable's value as typed, quoted when it holds anything but printable characters."""
    return text if text.isprintable() and text.strip() == text and text else repr(text)


def value_text(value: object) -> str:
    """A setting's value as its variable would be set."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(value) or "*"     # no filter: every kernel
    return str(value)


def only_unknown(environ: Optional[Mapping[str, str]] = None) -> List[str]:
    """The messages that fail a compile: the variables set for aoti-debug are all unknown ones
    (a misspelt AOTI_DEBUG_LOGLEVEL would build an artifact nobody asked for)."""
    env = os.environ if environ is None else environ
    unknown = [m[:-len(IGNORED)] for m in unknown_variables(env) if m.startswith(PREFIX)]
    if not unknown or any_variable_set(env):
        return []
    return unknown + ["no aoti-debug variable is set, only the unknown one(s) above: the compile "
                      "is refused rather than build an artifact without the instrumentation asked for"]


def problem(name: str, value: str, accepted: str) -> str:
    """The one wording of a bad-value message, shared with the C++ shim."""
    return f"{name}={value!r} is not valid: {accepted}"


def read(environ: Optional[Mapping[str, str]] = None,
         overrides: Optional[Mapping[str, object]] = None,
         strict: bool = True) -> Settings:
    """Resolve every setting.

    ``strict`` raises one SettingsError listing every bad value (compile time,
    ``aoti-debug info``).  Otherwise a bad value falls back to the default and
    its message is kept in ``read_problems`` (run time: never crash a model).
    """
    settings, problems = read_with_problems(environ, overrides)
    if problems and strict:
        raise SettingsError(problems)
    return settings


def read_with_problems(environ: Optional[Mapping[str, str]] = None,
                       overrides: Optional[Mapping[str, object]] = None
                       ) -> Tuple[Settings, List[str]]:
    env = os.environ if environ is None else environ
    overrides = dict(overrides or {})
    unknown = set(overrides) - {v.field for v in VARIABLES}
    if unknown:
        raise TypeError(f"unknown setting(s) {sorted(unknown)}; known: "
                        + ", ".join(v.field for v in VARIABLES))
    values: Dict[str, object] = {}
    sources: Dict[str, str] = {}
    from_variables = set()
    problems: List[str] = []
    values["rank"], values["world"] = rank, _ = process_rank(env)
    for var in VARIABLES:
        # The variable is checked even when an argument wins: a bad value of
        # any variable fails the compile (the process-start hook sees it too).
        sources[var.field] = "default"
        for name, parse in ((var.name, var.parse), (var.alias, var.alias_parse)):
            if not name or name not in env:
                continue
            text = env[name]
            try:
                values[var.field] = _with_rank(var, parse(text), rank)
                sources[var.field] = f"{name}={text}"
                from_variables.add(var.field)
            except ValueError as exc:
                problems.append(problem(name, text, str(exc)))
                sources[var.field] = f"default ({name} is not valid)"
            break
        if var.field in overrides and overrides[var.field] is not None:
            value = overrides[var.field]
            try:
                values[var.field] = _with_rank(var, _coerce_argument(var, value), rank)
                sources[var.field] = "argument"
                from_variables.discard(var.field)
            except ValueError as exc:
                values.pop(var.field, None)
                problems.append(problem(f"argument {var.field}", str(value), str(exc)))
                sources[var.field] = "default (bad argument)"
                from_variables.discard(var.field)
    return Settings(sources=sources, from_variables=frozenset(from_variables), **values), problems


def _with_rank(var: Variable, value: object, rank: Optional[int]) -> object:
    return expand_rank(value, rank) if var.field in ("logdest", "dump_dir") else value  # type: ignore[arg-type]


def _coerce_argument(var: Variable, value: object) -> object:
    if var.field == "kernels" and isinstance(value, (list, tuple)):
        return _parse_kernels(",".join(value))
    if var.field == "nan_check" and isinstance(value, NanCheck):
        return value
    if isinstance(value, bool) and var.parse is _parse_bool:
        return value
    return var.parse(str(value))


def default_text(field: str) -> str:
    """How a field's default is spelled in messages (as its variable would be set)."""
    return value_text(getattr(Settings(), field))


def with_fallback(message: str) -> str:
    """A run-time problem message plus the value used instead (the default)."""
    name = message.split("=", 1)[0]
    field = next((v.field for v in VARIABLES if name in (v.name, v.alias)), None)
    return f"{message}; keeping {default_text(field)}" if field else message


def any_variable_set(environ: Optional[Mapping[str, str]] = None) -> bool:
    env = os.environ if environ is None else environ
    return any(name in env for name in ALL_NAMES)
