"""The Python implementation of the record format (docs/log-format.md).

The C++ shim has its own implementation (cpp_runtime/include/aoti_debug/
detail/format.h); the parity corpus in tests/ keeps the two byte-identical.
Nothing here writes anything: sinks do that.
"""

from __future__ import annotations

import enum
import math
import time
from typing import Any, Iterable, List, Optional, Sequence

INDENT = "  "


# -- numbers (section 2) --------------------------------------------------

def number(x: float) -> str:
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0 or 1e-4 <= abs(x) < 1e16:
        return "%.6f" % x
    return "%.6e" % x


_second = [-1, ""]   # the last second formatted, and its text: records format the date once a second


def timestamp(now: Optional[float] = None) -> str:
    now = time.time() if now is None else now
    seconds = int(now)
    micro = int(round((now - seconds) * 1e6))
    if micro == 1_000_000:
        seconds, micro = seconds + 1, 0
    cached = _second
    if cached[0] != seconds:
        cached = [seconds, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))]
        _second[:] = cached
    return f"{cached[1]}.{micro:06d}"


_HEADER_TIME = None


def restamp(text: str, stamp: str) -> str:
    """Every header line (`[timestamp] [pid N] ...`) of `text` with `stamp`:
    the writer stamps under its lock, so a log's timestamps never go
    backwards (detail::restamp in the C++ core)."""
    global _HEADER_TIME
    if _HEADER_TIME is None:
        import re
        _HEADER_TIME = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\]", re.M)
    return _HEADER_TIME.sub(f"[{stamp}]", text)


def header(kind: str, ident: str, name: str, pid: int, now: Optional[float] = None,
           facts: str = "") -> str:
    return f"[{timestamp(now)}] [pid {pid}] {kind} {ident} {name}{facts}\n"


def header_facts(thread: int, rank: Optional[int] = None, world: Optional[int] = None,
                 reference: str = "") -> str:
    """What a run or call header says after its name: ` thread=T`, then ` rank=R/W`
    (` rank=R` without a world size) when the process has a rank, then
    ` reference=eager` for the run of an eager reference (runtime/eager.py)."""
    text = f" thread={thread}"
    if rank is not None:
        text += f" rank={rank}" + (f"/{world}" if world else "")
    return text + (f" reference={reference}" if reference else "")


# -- where a finding is (section 1.1) ---------------------------------------

# one text for the artifact's notes (compiled in by the codegen) and every reader's findings
from ..plan import where  # noqa: E402


# -- inline values (section 1.4) --------------------------------------------

def quote(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _is_tensor(value: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def _torch():
    import sys
    return sys.modules.get("torch")


def holds_tensor(value: Any) -> bool:
    if _is_tensor(value):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(holds_tensor(v) for v in value.values())
    return False


def tensors_in(value: Any) -> Iterable[Any]:
    """The tensors of a value, in the order its blocks show them."""
    if _is_tensor(value):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)


def inline(value: Any) -> str:
    """The one-line form of a value that holds no tensor."""
    torch = _torch()
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return number(value)
    if isinstance(value, str):
        return quote(value)
    if torch is not None:
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, torch.device):
            return device_name(value)
    if isinstance(value, tuple):
        inner = ", ".join(inline(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(inline(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{inline(k)}: {inline(v)}" for k, v in value.items()) + "}"
    return f"<{type(value).__name__}>"


def device_name(device: Any) -> str:
    if device.type == "cpu":
        return "cpu"
    index = device.index if device.index is not None else 0
    return f"{device.type}:{index}"


def shape_tuple(values: Iterable[int]) -> str:
    return inline(tuple(int(v) for v in values))


# -- items and blocks (sections 1.2, 1.3) -----------------------------------

def item(label: str, value: Any, level: int, depth: int = 1, stats=None, tensor=None) -> List[str]:
    """Lines (without the trailing newline) for one labelled value; `tensor`,
    when given, makes its Tensor blocks instead of tensor_block (same lines)."""
    pad = INDENT * depth
    if not holds_tensor(value):
        return [f"{pad}{label}: {inline(value)}"]
    lines = [f"{pad}{label}:"]
    lines += block(value, level, depth + 1, stats, tensor)
    return lines


def block(value: Any, level: int, depth: int, stats=None, tensor=None) -> List[str]:
    pad = INDENT * depth
    if _is_tensor(value):
        return (tensor or tensor_block)(value, level, depth, stats)
    if isinstance(value, dict):
        lines = [f"{pad}dict(len={len(value)})"]
        for k, v in value.items():
            lines += item(f"[{inline(k)}]", v, level, depth + 1, stats, tensor)
        return lines
    kind = "list" if isinstance(value, list) else "tuple"
    lines = [f"{pad}{kind}(len={len(value)})"]
    for i, v in enumerate(value):
        lines += item(f"[{i}]", v, level, depth + 1, stats, tensor)
    return lines


def tensor_block(t: Any, level: int, depth: int, stats=None) -> List[str]:
    pad = INDENT * depth
    inner = pad + INDENT
    lines = [
        f"{pad}Tensor(",
        f"{inner}shape={shape_tuple(t.shape)}",
        f"{inner}stride={shape_tuple(t.stride())}",
        f"{inner}dtype={t.dtype}",
        f"{inner}device={device_name(t.device)}",
        f"{inner}requires_grad={bool(t.requires_grad)}",
        f"{inner}is_contiguous={bool(t.is_contiguous())}",
    ]
    if level >= 5:
        from . import stats as stats_mod
        computed = (stats or stats_mod.compute)(t, hash=True)
        lines += [inner + line for line in stats_lines(computed)]
    lines.append(f"{pad})")
    return lines


def stats_lines(s) -> List[str]:
    """Section 3: the statistics lines for a computed Stats, then its content hash."""
    if s.skipped:
        return [f"stats=skipped ({s.skipped})"]
    lines = _value_lines(s)
    if s.hash is not None and not lines[0].startswith("stats="):
        lines.append(f"hash={s.hash:016x}")
    return lines


def _value_lines(s) -> List[str]:
    if s.kind == "float":
        lines = [f"min={number(s.min)}", f"max={number(s.max)}", f"mean={number(s.mean)}",
                 f"nan_count={s.nan_count}", f"inf_count={s.inf_count}"]
        if s.sat_count is not None:     # the float8 kinds and float4 (stats.saturation_limit)
            lines.append(f"sat_count={s.sat_count}")
        return lines
    if s.kind == "int":
        return [f"min={s.imin}", f"max={s.imax}", f"mean={number(s.mean)}"]
    if s.kind == "bool":
        return [f"true_count={s.true_count}", f"false_count={s.false_count}"]
    if s.kind == "complex":
        return [f"abs_min={number(s.min)}", f"abs_max={number(s.max)}",
                f"abs_mean={number(s.mean)}", f"nan_count={s.nan_count}",
                f"inf_count={s.inf_count}"]
    return ["stats=skipped (device not supported)"]


def scale_lines(t: Any, scale: str, depth: int) -> List[str]:
    """The lines a scale argument's Tensor block adds at level 5 (section 3): which of
    its op's scales it is (`scale_a`), then, for a tensor of a floating format (float4
    aside) with elements, on the CPU or a device, its zeros and subnormals (finite,
    non-zero, under the format's smallest normal), as detail::scale_lines counts them."""
    from . import stats as stats_mod
    pad = INDENT * depth
    lines = [f"{pad}scale={scale}"]
    c = stats_mod.scale_counts(t)
    if c is None:
        return lines
    return lines + [f"{pad}zero_count={c.zeros}", f"{pad}subnormal_count={c.subnormals}"]


def dequant_lines(t: Any, spec: str, values: Sequence[Any], depth: int) -> List[str]:
    """The lines a scaled operand's Tensor block adds at level 5 (section 3.3): which
    scale multiplies it and how (`scaled_by=`), then the statistics of its dequantized
    values by the shared core (a device tensor's from its host view, stats.host_view), or
    `dequant=skipped (...)` with why, as detail::dequant_lines writes them.  `spec`:
    the site's plan.dequant_spec, its scales by their index in `values`."""
    from ..plan import parse_dequant
    pad = INDENT * depth
    parsed = parse_dequant(spec)
    if parsed is None:
        return []
    scale_at, global_at, layout, block, swizzled, kdim, label = parsed
    lines = [f"{pad}scaled_by={label}"]

    def tensor_at(k):
        return values[k] if 0 <= k < len(values) and _is_tensor(values[k]) else None
    scale, glob = tensor_at(scale_at), tensor_at(global_at) if global_at >= 0 else None
    if scale is None or (global_at >= 0 and glob is None):
        return lines + [f"{pad}dequant=skipped (scale not a tensor)"]
    from ..native import core as _native
    if _native.lib() is None:
        return lines + [f"{pad}dequant=skipped (no compiled core)"]
    from . import stats as stats_mod
    views = []
    for x in (t, scale) + ((glob,) if glob is not None else ()):
        # device tensors through their host views: the operand's whole span is copied
        if stats_mod.on_device(x) or x.device.type != "cpu":
            x, why = stats_mod.host_view(x)
            if why:
                return lines + [f"{pad}dequant=skipped ({why})"]
        views.append(x)
    d = _native.dequant_stats(views[0], views[1], views[2] if glob is not None else None, layout, block,
                              swizzled, kdim)
    if d["skipped"]:
        return lines + [f"{pad}dequant=skipped ({d['skipped']})"]
    return lines + [f"{pad}dequant_min={number(d['min'])}", f"{pad}dequant_max={number(d['max'])}",
                    f"{pad}dequant_mean={number(d['mean'])}", f"{pad}dequant_nan_count={d['nan_count']}",
                    f"{pad}dequant_inf_count={d['inf_count']}"]


def record(head: str, body: Sequence[str] = ()) -> str:
    if not body:
        return head
    return head + "\n".join(body) + "\n"


BANNER_RULE = "=" * 80


def banner(pid: int, aoti_debug_version: str, torch_version: str, platform: str,
           now: Optional[float] = None, rank: Optional[int] = None,
           world: Optional[int] = None) -> str:
    ranked = [] if rank is None else [f"Rank: {rank}" + (f" of {world}" if world else "")]
    return "\n".join([
        BANNER_RULE,
        f"[{timestamp(now)}] [pid {pid}] aoti-debug - System Information",
        BANNER_RULE,
        f"aoti-debug version: {aoti_debug_version}",
        f"PyTorch version: {torch_version}",
        f"Platform: {platform}",
        *ranked,
        BANNER_RULE,
    ]) + "\n"
