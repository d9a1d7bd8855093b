"""``@log_api``: the Python logger for functions (custom ops, wrappers, APIs).

The level is read when the function is decorated: at level 0 the function
object itself is returned, so an undecorated program and a level-0 one run
the same code.  Records are written before the call (a crash inside keeps
them) and logging problems never reach the caller.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable, List, Optional

from . import format as fmt
from . import sink, state


def log_api(func: Optional[Callable] = None, *, name: Optional[str] = None):
    """Decorate ``func`` so each call is logged; usable as ``@log_api`` or ``@log_api()``."""
    if func is None:
        return lambda f: log_api(f, name=name)
    level = state.settings().level
    if level == 0:
        return func
    qualname = name or f"{getattr(func, '__module__', None) or '?'}.{getattr(func, '__qualname__', repr(func))}"
    try:
        signature: Optional[inspect.Signature] = inspect.signature(func)
    except (TypeError, ValueError):
        signature = None

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        settings = state.settings()
        if not _selected(qualname, settings.kernels):
            return func(*args, **kwargs)
        number = sink.next_call_number()
        _safely(_write_call, number, qualname, level, signature, args, kwargs)
        dump = _safely(_recorder().begin_call, number, qualname, func, args, kwargs) if level >= 10 else None
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            _safely(_write_raise, number, qualname, exc)
            if dump:
                _safely(_recorder().end_call, dump, None, exc)
            raise
        if level >= 3:
            _safely(_write_return, number, qualname, level, result)
        if dump:
            _safely(_recorder().end_call, dump, result)
        return result

    wrapper.__aoti_debug_wrapped__ = func  # type: ignore[attr-defined]
    return wrapper


def _selected(qualname: str, patterns) -> bool:
    if not patterns:
        return True
    from ..settings import kernels_match
    return kernels_match(patterns, [qualname, qualname.rsplit(".", 1)[-1]])


def _safely(write: Callable, *args: Any) -> Any:
    try:
        return write(*args)
    except Exception as exc:  # never let logging change the user's program
        try:
            state.note("logger", f"could not write a record: {type(exc).__name__}: {exc}")
        except Exception:
            pass


def argument_items(signature: Optional[inspect.Signature], args, kwargs) -> List[tuple]:
    """(label, value) for every argument: positional, keyword, then defaults not given."""
    if signature is None:
        return ([(f"arg[{i}] arg{i}", a) for i, a in enumerate(args)]
                + [(f"kwarg {k}", v) for k, v in kwargs.items()])
    bound = signature.bind(*args, **kwargs)
    items: List[tuple] = []
    position = 0
    params = signature.parameters
    for pname, value in bound.arguments.items():
        kind = params[pname].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            for j, v in enumerate(value):
                items.append((f"arg[{position}] {pname}[{j}]", v))
                position += 1
        elif kind is inspect.Parameter.VAR_KEYWORD:
            items += [(f"kwarg {k}", v) for k, v in value.items()]
        elif position < len(args) and kind is not inspect.Parameter.KEYWORD_ONLY:
            items.append((f"arg[{position}] {pname}", value))
            position += 1
        else:
            items.append((f"kwarg {pname}", value))
    for pname, param in params.items():
        if pname not in bound.arguments and param.default is not inspect.Parameter.empty:
            items.append((f"default {pname}", param.default))
    return items


def _write_call(number: int, qualname: str, level: int, signature, args, kwargs) -> None:
    body: List[str] = []
    if level >= 3:
        for label, value in argument_items(signature, args, kwargs):
            body += fmt.item(label, value, level, tensor=sink.tensor_block)
    facts = fmt.header_facts(threading.get_native_id())
    state.emit(fmt.record(fmt.header("call", str(number), qualname, state.pid(), None, facts), body))


def _write_return(number: int, qualname: str, level: int, result: Any) -> None:
    body = fmt.item("output", result, level, tensor=sink.tensor_block)
    state.emit(fmt.record(fmt.header("return", str(number), qualname, state.pid()), body))


def _write_raise(number: int, qualname: str, exc: BaseException) -> None:
    message = " ".join(str(exc).split("\n"))
    body = [f"  exception: {type(exc).__name__}: {message}"]
    state.emit(fmt.record(fmt.header("raise", str(number), qualname, state.pid()), body))


def _recorder():
    from . import recorder
    return recorder
