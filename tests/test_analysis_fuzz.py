"""Property-based fuzzing of the analysis commands on mutated real logs and dump folders.

Real inputs are made once per module, without compiling anything (as in
test_analysis_untrusted.py): the level-5 and level-10 logs the Python logger
writes for `log_api` calls and for a run of aoti_debug.runtime.launches (the runtime
torch.compile's wrapper calls), a hand-made launch log (test_analysis_logs.py),
and the level-10 dump folders of those runs (`-calls` and `-model-run1`).
Hypothesis mutates them: bytes, lines, digit runs, JSON fields of manifest
lines, tensor files.  The property is the contract of docs/analysis.md:

- `records.parse` returns a Log or raises `untrusted.InputError`;
- `nan-origin`, `diff`, `report` and `replay` return 0, 1 or 2; 2 comes with a
  last stderr line `aoti-debug <command>: ...` (the only line, except replay's
  notes); no exception escapes; nothing blocks (an alarm fails a run that takes
  more than 60 s); and no control character reaches the terminal.

Crafted ops (docs/dumps.md, "What re-running ops runs"): the ops of a NaN origin
launch replaced with operators that act outside the computation (a file mapped
and filled, saved, printed, the seed set, ...) as they act and with mixed
arguments; `check`, and `nan-origin` and `report` with `--rerun-ops`, keep the
contract, and no file, terminal or process state changes.

Examples: AOTI_DEBUG_FUZZ_EXAMPLES per fuzzing test (default 200: three tests, well
under a minute in all); e.g. AOTI_DEBUG_FUZZ_EXAMPLES=5000 for a long hunt.  The examples are
derandomized (the same ones every run), so CI is deterministic; a failure
prints the mutation that caused it.
"""

import contextlib
import io
import json
import os
import re
import shutil
import signal
import sys
import tempfile

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings, strategies as st  # noqa: E402

from aoti_debug.analysis import records, untrusted  # noqa: E402
from aoti_debug.cli import main  # noqa: E402
from test_analysis_logs import nan_model_log  # noqa: E402
from test_analysis_untrusted import CALLS_MODULE, CLEAN_CALLS, NAN_CALLS, make_dumps  # noqa: E402

EXAMPLES = int(os.environ.get("AOTI_DEBUG_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

# what damage tends to look like, and what has broken parsers before
SPECIAL = ["9" * 5000, "1" * 25, "\u00b2", "\u0663", "\x1b[2J", "\x00", "\x9b", "\u202e", "\r", "\n",
           "\n\n", "  ", "    ", "-", "nan", "-nan", "inf", "1_0", "1e999", "(", ")", "[", "]", ":",
           "=", ",", '"', "\\", "[pid ", "[pid PID] ", "] ", "Tensor(", "list(len=3)", "dict(len=1)",
           "stats=skipped (", "origin: nodes=", " source=", "launch-end 1.1 k", "=" * 80,
           "[2026-11-21 05:30:45.000001] [pid 1] launch 1.1 k\n"]
piece = st.one_of(st.sampled_from(SPECIAL), st.text(max_size=8))


@st.composite
def text_mutations(draw):
    return draw(st.lists(st.tuples(
        st.sampled_from(["replace", "insert", "delete", "line-drop", "line-dup", "line-swap",
                         "truncate", "digits"]),
        st.integers(0, 2**31), st.integers(0, 40), piece), min_size=1, max_size=4))


def mutate_text(text, mutations):
    for kind, at, size, new in mutations:
        lines = text.split("\n")
        i = at % max(len(text), 1)
        if kind == "replace":
            text = text[:i] + new + text[i + size:]
        elif kind == "insert":
            text = text[:i] + new + text[i:]
        elif kind == "delete":
            text = text[:i] + text[i + size:]
        elif kind == "truncate":
            text = text[:i]
        elif kind == "digits":
            runs = list(re.finditer(r"[0-9]+", text))
            if runs:
                run = runs[at % len(runs)]
                text = text[:run.start()] + (new if new.strip() else "9" * 5000) + text[run.end():]
        else:
            k, m = at % len(lines), (at + size) % len(lines)
            if kind == "line-drop":
                del lines[k]
            elif kind == "line-dup":
                lines.insert(k, lines[k])
            else:
                lines[k], lines[m] = lines[m], lines[k]
            text = "\n".join(lines)
    return text


json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
              st.floats(allow_nan=True, allow_infinity=True), piece),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(piece, inner, max_size=3)),
    max_leaves=6)
FIELDS = ["event", "status", "kind", "run", "index", "id", "kernel", "nodes", "source", "files", "bytes",
          "time", "model", "pid", "so", "so_copy", "so_sha256", "inputs", "launches", "name", "module",
          "qualname", "error"]
FILE_FIELDS = ["name", "role", "file", "bytes", "error"]


@st.composite
def manifest_mutations(draw):
    """(line, how, key, value) changes of manifest entries, or raw text mutations of the file."""
    if draw(st.booleans()):
        return ("text", draw(text_mutations()))
    return ("json", draw(st.lists(st.tuples(
        st.integers(0, 2**31), st.sampled_from(["set", "drop", "file-set", "file-drop", "line-drop"]),
        st.sampled_from(FIELDS), st.sampled_from(FILE_FIELDS), json_value), min_size=1, max_size=3)))


def mutate_manifest(path, how):
    kind, changes = how
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if kind == "text":
        text = mutate_text(text, changes)
    else:
        entries = [json.loads(line) for line in text.splitlines()]
        for at, op, key, file_key, value in changes:
            if not entries:
                break
            e = entries[at % len(entries)]
            files = e.get("files") if isinstance(e.get("files"), list) else []
            f = files[at % len(files)] if files and isinstance(files[at % len(files)], dict) else None
            if op == "set":
                e[key] = value
            elif op == "drop":
                e.pop(key, None)
            elif op == "file-set" and f is not None:
                f[file_key] = value
            elif op == "file-drop" and f is not None:
                f.pop(file_key, None)
            elif op == "line-drop":
                entries.remove(e)
        text = "".join(json.dumps(e) + "\n" for e in entries)
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)


DTYPES = ["float32", "float16", "bfloat16", "float64", "int64", "uint8", "bool", "complex64"]


@st.composite
def small_tensor(draw):
    import torch
    shape = draw(st.lists(st.integers(0, 3), max_size=3))
    values = torch.tensor(draw(st.lists(st.sampled_from([0.0, -1.5, 2.0, float("nan"), float("inf")]),
                                        min_size=1, max_size=1))[0])
    t = values.expand(shape).to(getattr(torch, draw(st.sampled_from(DTYPES))))
    return t.clone() if draw(st.booleans()) else t        # an expanded view keeps its zero strides


# a well-formed file holding what a recorder never writes: odd containers, keys, values
odd_value = st.recursive(
    st.one_of(small_tensor(), st.none(), st.integers(-2**70, 2**70), st.floats(), piece),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.dictionaries(st.one_of(piece, st.integers(), st.tuples(piece)), inner,
                                            max_size=3)),
    max_leaves=6)


def tensor_damage(kinds=("garbage", "truncate", "flip", "delete", "value")):
    data = st.one_of(st.binary(max_size=16), odd_value) if "value" in kinds else st.binary(max_size=16)
    return st.one_of(st.none(), st.tuples(st.sampled_from(kinds), st.integers(0, 2**31), data))


def damage_tensor(folder, how):
    if how is None:
        return
    kind, at, data = how
    names = sorted(n for n in os.listdir(folder) if n.endswith(".pt"))
    if not names:
        return
    path = os.path.join(folder, names[at % len(names)])
    if kind == "delete":
        os.unlink(path)
        return
    if kind == "value":
        import torch
        torch.save(data, path)
        return
    with open(path, "rb") as f:
        content = f.read()
    i = at % max(len(content), 1)
    data = data if isinstance(data, bytes) else b""
    if kind == "garbage":
        content = data
    elif kind == "truncate":
        content = content[:i]
    else:
        content = content[:i] + bytes([content[i] ^ 0xFF]) + content[i + 1:] if content else content
    with open(path, "wb") as f:
        f.write(content)


# -- running ---------------------------------------------------------------------------

@contextlib.contextmanager
def alarm(seconds=60):
    """A run that blocks or loops fails instead of stopping the suite."""
    def expired(signum, frame):
        raise AssertionError(f"no answer within {seconds} s")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def command(*argv):
    """Run one command in this process; check the contract; returns the exit status."""
    out, err = io.StringIO(), io.StringIO()
    with alarm(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    out, err = out.getvalue(), err.getvalue()
    # 3: the run crashed or never finished, 4: records or tensors of it were lost (a fuzzed log
    # or dump is often cut short or names files that are not there)
    assert code in (0, 1, 2, 3, 4), (argv, code)
    for text in (out, err):
        assert not untrusted.has_control(text.replace("\n", "")), (argv, text)
        text.encode("utf-8")            # a lone surrogate would stop a real terminal's print
    if code == 2:
        lines = err.splitlines()
        assert lines and lines[-1].startswith(f"aoti-debug {argv[0]}: "), (argv, err)
        assert argv[0] == "replay" or len(lines) == 1, (argv, err)
    return code


def parse(text, path):
    """Parsed from memory and from a file (read a block at a time, values read again when
    asked): one Log, or one refusal."""
    try:
        with alarm():
            said = repr(shape(records.parse(text, path)))
    except untrusted.InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{path}:"), str(exc)
        said = str(exc)
    try:
        data = text.encode("utf-8")         # a lone surrogate: no file holds it as such
    except UnicodeEncodeError:
        return
    with tempfile.TemporaryDirectory() as tmp:
        name = os.path.join(tmp, path)
        with open(name, "wb") as f:
            f.write(data)
        try:
            with alarm():
                read = repr(shape(records.parse_file(name)))
        except untrusted.InputError as exc:
            read = str(exc)
    assert read.replace(name, path) == said


def shape(log):
    """All a Log says, as text: its records with their values, banners, lines left out, events."""
    def record(r):
        return (r.kind, r.id, r.name, r.pid, r.timestamp, r.line, r.truncated, r.header_cut, r.damage,
                r.thread, r.rank, r.world, r.reference, r.notes, r.unparsed,
                r.origin and (r.origin.text(), r.origin.module, list(r.origin.lines), r.origin.holds,
                              dict(r.origin.output_sources), dict(r.origin.output_modules)),
                repr(r.items), r.finiteness)
    return (tuple(record(r) for r in log.records), tuple(map(repr, log.banners)), tuple(log.unknown_lines),
            tuple(e.title for e in log.events), tuple(log.left_out), log.level_hint(), tuple(log.unreadable()))


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    nan = make_dumps(root / "nan", NAN_CALLS, 1.0)
    clean = make_dumps(root / "clean", CLEAN_CALLS, 10.0)
    level5 = make_dumps(root / "level5", NAN_CALLS, 1.0, level=5)
    sys.path.insert(0, str(root / "nan"))          # replay of calls re-imports their module
    yield {"logs": {"level-5": open(level5[3]).read(), "level-10": open(nan[3]).read(),
                    "hand-made": nan_model_log().text()},
           "folders": {"nan-calls": nan[1], "nan-run": nan[2], "clean-calls": clean[1],
                       "clean-run": clean[2]}}
    sys.path.remove(str(root / "nan"))


def test_the_real_inputs_are_clean(real):
    """The fuzzing starts from inputs the commands read without a word of complaint."""
    for name, text in real["logs"].items():
        log = records.parse(text, name)
        assert log.records and not log.left_out and not log.unreadable(), name
    for name, folder in real["folders"].items():
        assert command("nan-origin", folder) == (1 if name.startswith("nan") else 0), name
    assert command("replay", "--dir", real["folders"]["nan-calls"], "--allow-module", CALLS_MODULE) == 0


@FUZZ
@given(which=st.sampled_from(["level-5", "level-10", "hand-made"]), mutations=text_mutations())
def test_mutated_logs(real, which, mutations):
    pristine = real["logs"][which]
    text = mutate_text(pristine, mutations)
    parse(text, "x.log")
    with tempfile.TemporaryDirectory() as tmp:
        log, good = os.path.join(tmp, "x.log"), os.path.join(tmp, "good.log")
        with open(log, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        with open(good, "w") as f:
            f.write(pristine)
        command("nan-origin", log)
        command("report", log, "-o", os.path.join(tmp, "r.html"))
        command("diff", good, log)
        command("report", good, "--against", log, "-o", os.path.join(tmp, "r2.html"))


@FUZZ
@given(which=st.sampled_from(["nan-calls", "nan-run", "clean-calls", "clean-run"]),
       how=manifest_mutations(), tensors=tensor_damage())
def test_mutated_dump_folders(real, which, how, tensors):
    pristine = real["folders"][which]
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, os.path.basename(pristine))
        shutil.copytree(pristine, folder)
        mutate_manifest(os.path.join(folder, "manifest.jsonl"), how)
        damage_tensor(folder, tensors)
        command("nan-origin", folder)
        command("report", folder, "-o", os.path.join(tmp, "r.html"))
        command("diff", pristine, folder)
        command("replay", "--dir", folder, "--allow-module", CALLS_MODULE)


@FUZZ
@given(which=st.sampled_from(["nan-calls", "nan-run", "clean-calls", "clean-run"]),
       tensors=tensor_damage(("garbage", "truncate", "delete")))
def test_unreadable_tensor_files_are_unknown_not_findings(real, which, tensors):
    """With the manifest intact, a tensor file that cannot be read may hide a finding, never
    make one (a flipped byte in the values is a real difference, so it is not tried here)."""
    pristine = real["folders"][which]
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, os.path.basename(pristine))
        shutil.copytree(pristine, folder)
        damage_tensor(folder, tensors)
        # a divergence or a NaN would be made up; a deleted file is a tensor lost (4, incomplete)
        lost = (4,) if tensors is not None and tensors[0] == "delete" else ()
        assert command("diff", pristine, folder) in (0, 2) + lost
        if which.startswith("clean"):
            assert command("nan-origin", folder) in (0, 2) + lost


# -- crafted hostile folders: every analysis command, no traceback --------------------------

def _hostile(folder, tmp, how):
    """Make `folder` hostile in one way the review found (issue 40)."""
    import torch
    manifest = os.path.join(folder, "manifest.jsonl")
    tensors = sorted(n for n in os.listdir(folder) if n.endswith(".pt"))
    if how == "linked-tensor":
        torch.save(torch.full((2, 3), 7.0), os.path.join(tmp, "secret.pt"))
        os.unlink(os.path.join(folder, tensors[-1]))
        os.symlink(os.path.join(tmp, "secret.pt"), os.path.join(folder, tensors[-1]))
    elif how == "linked-manifest":
        os.unlink(manifest)
        os.symlink("/etc/passwd", manifest)
    elif how == "surrogates":
        entries = [json.loads(line) for line in open(manifest)]
        for e in entries:
            for key in ("kernel", "name", "source", "model", "error"):
                if key in e:
                    e[key] = e[key] + "\ud800" if isinstance(e[key], str) else e[key]
        with open(manifest, "w") as f:
            f.write("".join(json.dumps(e) + "\n" for e in entries))
    elif how == "meta":
        for name in tensors:
            torch.save(torch.empty(2, 3, device="meta"), os.path.join(folder, name))


@pytest.mark.parametrize("how", ["linked-tensor", "linked-manifest", "surrogates", "meta"])
@pytest.mark.parametrize("which", ["nan-calls", "nan-run"])
def test_hostile_folders_give_every_command_an_answer_or_exit_2(real, which, how):
    pristine = real["folders"][which]
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, os.path.basename(pristine))
        shutil.copytree(pristine, folder)
        _hostile(folder, tmp, how)
        codes = [command("nan-origin", folder), command("diff", pristine, folder),
                 command("report", folder, "-o", os.path.join(tmp, "r.html")),
                 command("timeline", folder, "-o", os.path.join(tmp, "t.json")),
                 command("check", folder), command("extract", "1.2", "--dir", folder, "-o", os.path.join(tmp, "x")),
                 command("replay", "--dir", folder, "--allow-module", CALLS_MODULE)]
        if how.startswith("linked"):        # never read through the link: refused, or the file unknown
            assert codes[0] in (1, 2) and codes[1] == 2, codes
        assert not os.path.exists(os.path.join(tmp, "x", "inputs.pt")) or how == "surrogates"


# -- crafted ops: what re-running a launch's ops may do (docs/dumps.md, "What re-running ops runs")

# operators that act outside the computation, beside ones that compute (some in place), each
# with the arguments that make it act (a file, the terminal, memory outside a tensor), and a
# pool of arguments to mix in
CRAFTED_OPS = {
    "aten.from_file.default": (["VICTIM", True, 16], {"dtype": {"dtype": "uint8"}}),
    "aten.save.default": ([{"input": "buf0"}, "VICTIM"], {}),
    "aten._print.default": (["\x1b[2J\x1b]0;title\x07"], {}),
    "aten.warn.default": (["\x1b[2J"], {}),
    "aten.manual_seed.default": ([1234], {}),
    "aten.set_grad_enabled.default": ([False], {}),
    "aten._reshape_alias.default": ([{"input": "buf0"}, [2, 3], [10**8, 1]], {}),
    "profiler._record_function_enter.default": (["\x1b[2J"], {}),
    "debugprims.load_tensor.default": (["VICTIM", [2, 3], [3, 1]], {"dtype": {"dtype": "float32"},
                                                                     "device": {"device": "cpu"}}),
    "aten.fill_.Scalar": (["NODE", 88], {}),
    "aten.copy_.default": (["NODE", {"input": "buf0"}], {}),
    "aten.add.out": ([{"input": "buf0"}, 1.5], {"out": "NODE"}),
    "aten.log.default": ([{"input": "buf0"}], {}),
    "aten.clone.default": (["NODE"], {}),
    # memory: an index past the size densified, storage grown or asked for by the gigabyte
    "aten.full.default": ([[1, 1], 10**6], {"dtype": {"dtype": "int64"}}),
    "aten._sparse_coo_tensor_unsafe.default": (["NODE", "NODE", [4]], {}),
    "aten._to_dense.default": (["NODE"], {}),
    "aten.resize_.default": (["NODE", [1 << 20]], {}),
    "aten.ones.default": ([[32768, 32768]], {}),
}
CRAFTED_ARGS = ["VICTIM", True, 16, 88, 1.5, "\x1b[2J", [2, 3], [10**8, 1], {"dtype": "uint8"},
                {"input": "buf0"}, "NODE"]
CRAFTED = settings(FUZZ, max_examples=max(EXAMPLES // 4, 10))


@st.composite
def crafted_ops(draw):
    ops = []
    for i in range(draw(st.integers(1, 4))):
        name = draw(st.sampled_from(sorted(CRAFTED_OPS)))
        args, kwargs = CRAFTED_OPS[name]
        if draw(st.booleans()):             # not as it acts: mixed arguments
            args = draw(st.lists(st.sampled_from(CRAFTED_ARGS), max_size=4))
            kwargs = draw(st.dictionaries(st.sampled_from(["dtype", "out", "shared"]),
                                          st.sampled_from(CRAFTED_ARGS), max_size=2))
        node = {"node": f"n{draw(st.integers(0, i - 1))}"} if i else {"input": "buf0"}
        ops.append({"node": f"n{i}", "op": name, "args": [node if a == "NODE" else a for a in args],
                    "kwargs": {k: node if v == "NODE" else v for k, v in kwargs.items()}, "own": True})
    ops[-1]["holds"] = ["buf1"]
    return ops


def crafted(*names):
    """The ops of a crafted manifest: each named op as it acts, reading the one before."""
    return [{"node": f"n{i}", "op": name, "own": True,
             "args": [{"node": f"n{i - 1}"} if a == "NODE" else a for a in CRAFTED_OPS[name][0]],
             "kwargs": CRAFTED_OPS[name][1], **({"holds": ["buf1"]} if i == len(names) - 1 else {})}
            for i, name in enumerate(names)]


@CRAFTED
@given(ops=crafted_ops())
@example(ops=crafted("aten.from_file.default", "aten.fill_.Scalar"))     # writes the file it maps
@example(ops=crafted("aten.save.default"))
@example(ops=crafted("aten._print.default"))
@example(ops=crafted("aten.manual_seed.default"))
@example(ops=crafted("aten.set_grad_enabled.default"))
@example(ops=crafted("aten.full.default", "aten._sparse_coo_tensor_unsafe.default", "aten._to_dense.default"))
@example(ops=crafted("aten.ones.default", "aten.clone.default"))
@example(ops=crafted("aten.log.default", "aten.resize_.default"))
def test_crafted_ops_never_act_outside_the_computation(real, capfd, ops):
    """check, and nan-origin and report with --rerun-ops, on the NaN origin launch given crafted
    ops: the contract holds, no file changes or appears, nothing reaches the terminal raw, and
    the process's random and autograd state stay as they were."""
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        victim = os.path.join(tmp, "victim.txt")
        with open(victim, "w") as f:
            f.write("a file of the user's")
        folder = os.path.join(tmp, "run")
        shutil.copytree(real["folders"]["nan-run"], folder)
        path = os.path.join(folder, "manifest.jsonl")
        with open(path) as f:
            entries = [json.loads(line) for line in f]
        ops = json.loads(json.dumps(ops).replace('"VICTIM"', json.dumps(victim)))
        next(e for e in entries if e["event"] == "before" and e["id"] == "1.2")["ops"] = ops
        with open(path, "w") as f:
            f.write("".join(json.dumps(e) + "\n" for e in entries))
        seed, grad = torch.initial_seed(), torch.is_grad_enabled()
        capfd.readouterr()
        command("check", folder)
        command("nan-origin", "--rerun-ops", folder)
        command("report", "--rerun-ops", folder, "-o", os.path.join(tmp, "r.html"))
        out, err = capfd.readouterr()       # what C++ wrote to the file descriptors themselves
        assert not untrusted.has_control((out + err).replace("\n", "")), (ops, out + err)
        with open(victim) as f:
            assert f.read() == "a file of the user's", ops
        assert sorted(os.listdir(tmp)) == ["r.html", "run", "victim.txt"], ops
        assert (torch.initial_seed(), torch.is_grad_enabled()) == (seed, grad), ops
