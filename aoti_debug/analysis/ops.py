"""The FX ops a dumped launch computes (the manifest's `ops`, docs/dumps.md),
checked and re-run in eager on the launch's recorded inputs.

A dump folder is data: an op runs only when it names a `torch.ops` operator
that is registered in this process (aten and prims always; a custom op once
the user loaded its library with `--library` or `--allow-module`), looked up by name, and
only when it computes (`refusal`): nothing a dump names reads or writes files,
prints, or changes the state of the process or a device.  Of torch's own
operators only those on an allow-list run (`unlisted`), and no op's results may
outgrow what the dump's tensors justify (`Runner._bounded`).  Every tensor an op
gets is one the re-run made (a copy of a dumped input, or an earlier op's
result), so an in-place or `out=` op writes only those.  Nothing is imported
for an op.  Symbolic sizes are evaluated by a small arithmetic reader
(integers, names, + - * // **, FloorDiv/Max/Min), never by Python's eval.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from .untrusted import InputError, printable, shorten

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
           "complex64", "complex128", "float8_e4m3fn", "float8_e5m2")
_TAGS = ("node", "input", "sym", "missing", "float", "dtype", "device", "layout", "memory_format",
         "unsupported")


class NotCheckable(Exception):
    """A launch (or one of its outputs) whose ops cannot be re-run; the text says why."""


@dataclass
class Op:
    node: str
    op: str                       # "aten.log.default", "getitem", or "unsupported:<what>"
    args: List[Any]
    kwargs: Dict[str, Any]
    own: bool                     # computed by the launch (False: a view in front of it)
    shape: Optional[List[str]] = None
    dtype: Optional[str] = None
    line: str = ""
    same_as: str = ""
    holds: List[str] = field(default_factory=list)   # outputs holding its value that no `holds:` line names
    stride: Optional[List[str]] = None   # of a view placed by its offset: the handed view must have it

    @property
    def short(self) -> str:
        """`aten.log` (the overload left out), as the user reads it."""
        parts = self.op.split(".")
        return ".".join(parts[:2]) if len(parts) == 3 else self.op

    def inputs(self) -> List[str]:
        """The node names this op reads (earlier ops of the program)."""
        found: List[str] = []

        def visit(v):
            if isinstance(v, dict) and "node" in v:
                found.append(v["node"])
            elif isinstance(v, list):
                for x in v:
                    visit(x)
        visit(self.args)
        visit(list(self.kwargs.values()))
        return found


@dataclass
class Program:
    ops: List[Op]
    error: str = ""               # the codegen could not describe the ops
    by_node: Dict[str, Op] = field(default_factory=dict)

    def __post_init__(self):
        self.by_node = {op.node: op for op in self.ops}

    def own(self) -> List[Op]:
        return [op for op in self.ops if op.own]


# -- reading (untrusted) ----------------------------------------------------------

def decode(raw: Any, where: str) -> Program:
    """The `ops` field of a manifest line; InputError (naming `where`) when it is not
    what the runtimes write."""
    if not isinstance(raw, list):
        raise InputError(f"{where}: field 'ops' is not a list")
    if len(raw) == 1 and isinstance(raw[0], dict) and set(raw[0]) == {"error"} and isinstance(raw[0]["error"], str):
        return Program([], error=printable(raw[0]["error"]))
    ops: List[Op] = []
    seen = set()
    for i, entry in enumerate(raw):
        here = f"{where}: field 'ops[{i}]'"
        if not isinstance(entry, dict):
            raise InputError(f"{here} is not an object")
        node, op = entry.get("node"), entry.get("op")
        if not isinstance(node, str) or not _WORD.match(node) or node in seen:
            raise InputError(f"{here}: 'node' is {shorten(repr(node))} (expected a new FX node name)")
        if not isinstance(op, str) or not op or len(op) > 200:
            raise InputError(f"{here}: 'op' is {shorten(repr(op))} (expected an operator name)")
        args, kwargs = entry.get("args", []), entry.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict) or not all(
                isinstance(k, str) and _WORD.match(k) for k in kwargs):
            raise InputError(f"{here}: 'args' must be a list and 'kwargs' an object of named values")
        _check_value(args, here, seen, 0)
        _check_value(list(kwargs.values()), here, seen, 0)
        shape, stride = entry.get("shape"), entry.get("stride")
        if shape is not None and not (isinstance(shape, list) and all(isinstance(s, str) for s in shape)):
            raise InputError(f"{here}: 'shape' is not a list of sizes")
        if stride is not None and not (isinstance(stride, list) and all(isinstance(s, str) for s in stride)):
            raise InputError(f"{here}: 'stride' is not a list of strides")
        texts = {k: entry.get(k, "") for k in ("dtype", "line", "same_as")}
        if not all(isinstance(v, str) for v in texts.values()) or not isinstance(entry.get("own", True), bool):
            raise InputError(f"{here}: 'dtype', 'line' and 'same_as' must be strings, 'own' true or false")
        held = entry.get("holds", [])
        if not (isinstance(held, list) and all(isinstance(h, str) and _WORD.match(h) for h in held)):
            raise InputError(f"{here}: 'holds' is not a list of buffer names")
        ops.append(Op(node, op, args, kwargs, entry.get("own", True), shape, texts["dtype"] or None,
                      printable(texts["line"]), texts["same_as"], held, stride))
        seen.add(node)
    return Program(ops)


def _is_layout(v: Any) -> bool:
    """A `read_as` layout: shape and strides as lists of size expressions, an offset."""
    return (isinstance(v, dict) and set(v) == {"shape", "stride", "offset"} and isinstance(v["offset"], str)
            and all(isinstance(v[k], list) and all(isinstance(s, str) for s in v[k]) for k in ("shape", "stride"))
            and len(v["shape"]) == len(v["stride"]))


def _check_value(v: Any, here: str, seen, depth: int) -> None:
    if depth > 16:
        raise InputError(f"{here}: arguments nest too deep")
    if isinstance(v, list):
        for x in v:
            _check_value(x, here, seen, depth + 1)
    elif isinstance(v, dict):
        tags = [k for k in v if k in _TAGS]
        plain = {k: x for k, x in v.items() if k != "read_as"}
        if len(tags) != 1 or not all(isinstance(x, (str, bool, list)) for x in plain.values()) or (
                "read_as" in v and not (tags[0] == "input" and _is_layout(v["read_as"]))):
            raise InputError(f"{here}: argument {shorten(repr(v))} is not one the codegen writes")
        if tags[0] == "node" and v["node"] not in seen:
            raise InputError(f"{here}: reads node {shorten(repr(v['node']))} before any op computes it")
    elif not (v is None or isinstance(v, (bool, int, float, str))):
        raise InputError(f"{here}: argument {shorten(repr(v))} is not one the codegen writes")


# -- operators ----------------------------------------------------------------------

def operator(name: str, args: Optional[list] = None, kwargs: Optional[dict] = None) -> Callable:
    """The registered op `ns.op.overload` (or operator.getitem); NotCheckable otherwise.
    `args`, `kwargs`: the op's recorded arguments (ops' encoding), when known: an op
    whose only randomness is dropout then runs when they turn dropout off (`refusal`)."""
    import operator as pyop

    import torch
    if name == "getitem":
        return pyop.getitem
    if name.startswith("unsupported:"):
        raise NotCheckable(f"{printable(name[len('unsupported:'):])} is not a torch operator")
    parts = name.split(".")
    if len(parts) != 3 or not all(_WORD.match(p) for p in parts):
        raise NotCheckable(f"{printable(shorten(name))} is not an operator name")
    ns, op, overload = parts
    try:
        packet = getattr(getattr(torch.ops, ns), op)
        fn = getattr(packet, overload)
    except (AttributeError, RuntimeError):
        raise NotCheckable(f"{ns}.{op} is not registered in this process (load the C++ library that "
                           "defines it with --library LIB.so, or import the Python module that defines it "
                           "with --allow-module MODULE)") from None
    if not isinstance(fn, torch._ops.OpOverload):
        raise NotCheckable(f"{printable(name)} is not an operator")
    why = refusal(fn, None if args is None else (args, kwargs or {})) or unlisted(fn)
    if why:
        raise NotCheckable(f"{ns}.{op} is not re-run: it {why}")
    checked = _CHECKED_FORM.get(fn._schema.name, {}).get(overload)
    if checked:
        _, cop, cov = checked.split(".")
        return getattr(getattr(torch.ops.aten, cop), cov)
    return fn


# -- torch's own operators: an allow-list ---------------------------------------------
#
# A dump's ops run on values nobody vouches for, so torch's own operators run only when
# they are known to compute on dense strided tensors with their arguments checked: the
# core ATen opset and the pointwise and reduction ops (by their tags), and the ops below
# that Inductor's graphs hold.  A constructor of sparse, nested or mkldnn tensors, an op
# that trusts its indices or sizes (`*_unsafe`), or one that reinterprets or resizes
# storage is refused by name.  An op of any other namespace is a custom op: it is there
# only when the user loaded its library or module, and runs as the user's code.
_TORCH_NAMESPACES = frozenset({
    "aten", "prims", "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "_native", "_quantized",
    "_test", "c10d", "c10d_functional", "debug_mode_ops", "debugprims", "export", "inductor", "inductor_prims",
    "mkl", "mkldnn", "mkldnn_prepacked", "onednn", "profiler", "quantization", "quantized",
    "quantized_decomposed", "rngprims", "sparse", "static_runtime", "symm_mem", "_inductor_test", "flex_lib",
    "fsdp", "onnx", "onnx_symbolic", "streams", "higher_order", "prim", "_quantized_decomposed",
})
_ALSO_LISTED = frozenset({
    "aten::_unsafe_view",                # a view whose size is checked against the input's
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
    "aten::scaled_dot_product_attention", "aten::_weight_int8pack_mm", "aten::_int_mm", "aten::_scaled_mm",
    "aten::linear", "aten::matmul", "aten::einsum", "aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu",
    "aten::native_dropout", "aten::dropout", "aten::alpha_dropout", "aten::feature_dropout",
    "aten::feature_alpha_dropout", "aten::_log_softmax", "aten::_softmax", "aten::copy", "aten::lift_fresh_copy",
    "aten::alias", "aten::_assert_async", "aten::_assert_scalar", "aten::_assert_tensor_metadata",
    "aten::sym_constrain_range", "aten::sym_constrain_range_for_size", "aten::_linalg_check_errors",
    "aten::_to_copy", "aten::view_as", "aten::reshape", "aten::contiguous", "aten::flatten", "aten::unflatten",
    "aten::_reshape_alias", "aten::unbind", "aten::split", "aten::chunk", "aten::movedim", "aten::t",
    "aten::expand_as", "aten::narrow", "aten::repeat_interleave", "aten::index", "aten::index_put",
    "aten::_unsafe_index", "aten::_unsafe_index_put",       # run as their checked forms (_CHECKED_FORM)
    "aten::empty_like", "aten::empty_strided", "aten::ones", "aten::zeros", "aten::ones_like", "aten::zeros_like",
    "aten::full_like", "aten::new_zeros", "aten::new_ones", "aten::new_full", "aten::new_empty", "aten::arange",
    "aten::fill", "aten::fill_", "aten::zero_", "aten::copy_", "aten::transpose", "aten::baddbmm", "aten::sort",
    "aten::argsort", "aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices", "aten::_local_scalar_dense",
    "aten::item", "aten::bucketize", "aten::searchsorted", "aten::index_add", "aten::index_copy",
    "aten::index_fill", "aten::masked_scatter", "aten::masked_select", "aten::count_nonzero", "aten::roll",
    "aten::diagonal", "aten::diag_embed", "aten::tril", "aten::triu", "aten::_fft_r2c", "aten::_fft_c2r",
    "aten::_fft_c2c", "aten::_native_batch_norm_legit_no_training", "aten::_native_batch_norm_legit_functional",
    "aten::_embedding_bag", "aten::embedding_bag", "aten::grid_sampler_2d", "aten::upsample_bilinear2d",
    "aten::_upsample_bilinear2d_aa", "aten::_cdist_forward", "aten::cdist", "aten::linalg_vector_norm",
    "aten::_weight_norm_interface", "aten::adaptive_max_pool2d", "aten::im2col", "aten::col2im",
    "aten::histc", "aten::index_put_",    # a MoE router's token counts; its dispatch (_CHECKED_FORM)
    "prims::convert_element_type", "prims::iota", "prims::broadcast_in_dim", "prims::squeeze",
    "prims::collapse_view", "prims::split_dim", "prims::transpose", "prims::sum", "prims::prod",
    "prims::amax", "prims::amin", "prims::var", "prims::fma",
})
_LISTED_TAGS = ("core", "pointwise", "reduction")
# refused whatever their tags: they trust sizes, indices or storage they are given
_UNCHECKED = re.compile(r"sparse|nested|mkldnn|_unsafe|^set_|resize|^as_strided_|_make_dep_token"
                        r"|^_nnz$|^_indices$|^_values$|coalesce|quantize|_fbgemm|_cslt|_cufft|from_padded")
# ops that skip a bounds check, and the checked op that computes the same
# (an in-place update: its functional form, whose result is the node's value, so the
# operand keeps the value the ops before it read)
_CHECKED_FORM = {"aten::_unsafe_index": {"Tensor": "aten.index.Tensor"},
                 "aten::_unsafe_index_put": {"default": "aten.index_put.default"},
                 "aten::index_put_": {"default": "aten.index_put.default"}}


def unlisted(fn) -> str:
    """Why one of torch's own operators may not run on a dump's values ("" when it may)."""
    import torch
    name = fn._schema.name
    ns, _, op = name.partition("::")
    if ns not in _TORCH_NAMESPACES:
        return ""                            # a custom op the user loaded
    if name in _CHECKED_FORM:
        return ""
    if _UNCHECKED.search(op) and name != "aten::_unsafe_view":
        return "trusts sizes, indices or storage it is given (refused on a dump's values)"
    listed = name in _ALSO_LISTED or (ns == "aten" and any(
        getattr(torch.Tag, t, None) in fn.tags for t in _LISTED_TAGS))
    if not listed:
        return ("is not among torch's operators re-run on a dump's values (the core ATen opset, pointwise "
                "and reduction ops, and those docs/dumps.md lists)")
    return ""


# What an operator's schema cannot tell: it acts outside the computation (files, the
# terminal, the process's or a device's state) without writing a tensor argument.
_REFUSED = {
    "aten::from_file": "maps a file (shared, what is written to the tensor is written to the file)",
    "aten::save": "writes a file",
    "debugprims::load_tensor": "reads a file",
    "aten::_print": "prints",
    "aten::warn": "prints a warning",
    "aten::manual_seed": "seeds the random generator of the process",
    "aten::seed": "seeds a random generator",
    "aten::initial_seed": "reads a random generator",
    "aten::set_num_threads": "changes the thread pool of the process",
    "aten::set_num_interop_threads": "changes the thread pool of the process",
    "aten::set_grad_enabled": "changes the autograd state of the process",
    "aten::record_stream": "changes a device's state",
    "aten::_cufft_set_plan_cache_max_size": "changes a device's state",
    "aten::_cufft_clear_plan_cache": "changes a device's state",
    "aten::pin_memory": "pins host memory for a device",
    "aten::_pin_memory": "pins host memory for a device",
    # views and copies placed without a bounds check: they reach memory outside every tensor
    "aten::_reshape_alias_copy": "reads memory its strides place without a bounds check",
    "inductor::_alloc_from_pool": "places a tensor in memory without a bounds check",
}
_REFUSED_NAMESPACES = {
    "profiler": "records into the profiler of the process",
    "c10d": "talks to other processes", "_c10d_functional": "talks to other processes",
    "_c10d_functional_autograd": "talks to other processes", "_dtensor": "talks to other processes",
    "symm_mem": "talks to other processes (symmetric memory)",
    "prim": "is a TorchScript instruction (print, rpc, ...), not a computation",
    "debugprims": "reads files", "debug_mode_ops": "records into a debug mode",
}
# operators that return nothing and check their arguments: they raise, nothing else
_CHECKS = frozenset({"aten::_assert_async", "aten::_assert_scalar", "aten::_assert_tensor_metadata",
                     "aten::_linalg_check_errors", "aten::sym_constrain_range",
                     "aten::sym_constrain_range_for_size"})
# Ops whose only randomness is dropout, by schema argument: its probability
# (`dropout_p` of the attention ops, `dropout` of the RNNs, `p` of the dropout ops
# themselves) and `train`.  Probability 0 or train False: no random number reaches
# the result, the op is re-run like any other.
_DROPOUT_P = frozenset({"dropout_p", "dropout"})
_DROPOUT_OPS = frozenset({"aten::dropout", "aten::dropout_", "aten::native_dropout", "aten::alpha_dropout",
                          "aten::alpha_dropout_", "aten::feature_dropout", "aten::feature_dropout_",
                          "aten::feature_alpha_dropout", "aten::feature_alpha_dropout_"})
_PATH_ARGS = frozenset({"filename", "file", "path", "filepath", "file_path", "dirname", "directory"})
_TENSORS = frozenset({"Tensor", "Optional[Tensor]"})


def refusal(fn, call: Optional[tuple] = None) -> str:
    """Why the operator overload `fn` may not run on a dump's values ("" when it may).
    Only what computes runs: a functional operator, or one that writes tensor arguments
    only values it is given (in-place, `out=`: the callers hand it tensors and lists
    they made).  Refused by name (what the schema cannot tell, above), for random
    numbers, a file path argument, a written argument that is process state (a
    generator), and for returning nothing while writing nothing (all it can do is act
    elsewhere).  `call`: the recorded (args, kwargs); an op whose only randomness is
    dropout is judged by them (without them it counts as random)."""
    import torch
    schema = fn._schema
    name = schema.name
    if name in _REFUSED:
        return _REFUSED[name]
    if name.split("::", 1)[0] in _REFUSED_NAMESPACES:
        return _REFUSED_NAMESPACES[name.split("::", 1)[0]]
    if torch.Tag.nondeterministic_seeded in fn.tags:
        random = _dropout(schema, call)
        if random != "":
            return random or "draws random numbers"
    writes = False
    for arg in schema.arguments:
        kind = str(arg.type)
        if arg.name in _PATH_ARGS and "str" in kind:
            return f"takes a file path (argument {arg.name})"
        if arg.alias_info is not None and arg.alias_info.is_write:
            if kind not in _TENSORS and not kind.startswith(("List[", "Dict[")):
                return f"writes its argument {arg.name}, a {kind} (state of the process, not a value it was given)"
            writes = True
    if not schema.returns and not writes and name not in _CHECKS and not name.startswith("aten::_validate_"):
        return "returns nothing and writes none of its arguments (all it can do is act outside the computation)"
    return ""


def _dropout(schema, call: Optional[tuple]) -> Optional[str]:
    """For a random op whose only randomness is dropout, called with the recorded
    `call`: "" when its arguments turn dropout off, else why it draws random numbers.
    None for any other op, or when the arguments are not known."""
    probability = _DROPOUT_P | ({"p"} if schema.name in _DROPOUT_OPS else set())
    names = {a.name for a in schema.arguments}
    if call is None or not names & probability:
        return None
    named = names & (probability | {"train"})
    args, kwargs = call
    values: Dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if arg.name not in named:
            continue
        if i < len(args) and not arg.kwarg_only:
            values[arg.name] = args[i]
        elif arg.name in kwargs:
            values[arg.name] = kwargs[arg.name]
        else:
            values[arg.name] = arg.default_value if arg.has_default_value() else _UNKNOWN
    if values.get("train") is False:
        return ""
    if any(type(v) in (int, float) and v == 0 for n, v in values.items() if n != "train"):
        return ""
    said = ", ".join(f"{n}={_said(v)}" for n, v in values.items())
    off = " or ".join([f"{n}=0" for n in values if n != "train"] + ["train=False"] * ("train" in values))
    return f"draws random numbers ({said}; re-run only when {off})"


_UNKNOWN = object()


def _said(value) -> str:
    """A recorded dropout argument, as the user reads it."""
    if type(value) in (bool, int, float) or value is None:
        return repr(value)
    if isinstance(value, dict) and isinstance(value.get("float"), str):
        return printable(shorten(value["float"]))
    return "<not a recorded constant>"


def _foreign(value) -> str:
    """Why an op's result is not memory the re-run may use ("" when it is): a tensor
    backed by a file, or a view reaching outside its storage (the first op to read or
    write it would touch memory no tensor owns)."""
    import torch
    if isinstance(value, (list, tuple)):
        return next((why for why in map(_foreign, value) if why), "")
    if not isinstance(value, torch.Tensor):
        return ""
    if value.layout != torch.strided or value.is_nested or value.is_mkldnn or value.is_quantized:
        return f"a tensor that is not dense and strided ({str(value.layout).replace('torch.', '')})"
    if value.numel() == 0:
        return ""
    if value.untyped_storage().filename:
        return "a tensor backed by a file"
    from .dumps import outside_storage
    return "a view reaching outside its storage" if outside_storage(value) else ""


def is_upstream(name: str) -> bool:
    """An aten or prims op: eager runs PyTorch's own implementation, independent of the kernel."""
    return name.split(".", 1)[0] in ("aten", "prims", "getitem")


# -- symbolic sizes ---------------------------------------------------------------------

def evaluate(expr: str, symbols: Dict[str, int]) -> int:
    """An integer size expression as sympy prints them, with `symbols` bound."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        raise NotCheckable(f"symbolic size {shorten(printable(expr))!r} is not understood") from None
    return _eval(tree.body, symbols, expr)


def _eval(n, symbols, expr) -> int:
    if isinstance(n, ast.Constant) and type(n.value) is int:
        return n.value
    if isinstance(n, ast.Name):
        if n.id not in symbols:
            raise NotCheckable(f"symbolic size {shorten(printable(expr))!r}: {n.id} is not known "
                               "from the recorded inputs")
        return symbols[n.id]
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        return -_eval(n.operand, symbols, expr)
    if isinstance(n, ast.BinOp):
        a, b = _eval(n.left, symbols, expr), _eval(n.right, symbols, expr)
        if isinstance(n.op, ast.Add):
            return a + b
        if isinstance(n.op, ast.Sub):
            return a - b
        if isinstance(n.op, ast.Mult):
            return a * b
        if isinstance(n.op, ast.FloorDiv) and b:
            return a // b
        if isinstance(n.op, ast.Pow) and 0 <= b <= 8:
            return a ** b
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
        vals = [_eval(x, symbols, expr) for x in n.args]
        if n.func.id == "FloorDiv" and len(vals) == 2 and vals[1]:
            return vals[0] // vals[1]
        if n.func.id in ("Max", "Min") and vals:
            return (max if n.func.id == "Max" else min)(vals)
    raise NotCheckable(f"symbolic size {shorten(printable(expr))!r} is not understood")


def handed_view(op: Op, inputs: Dict[str, Any], symbols: Dict[str, int]) -> Any:
    """The recorded view the launch was handed as `op`'s value (`same_as`), if the dumped
    tensor has the op's shape (and its strides, where the codegen placed the view by its
    offset); else None, and the op is run."""
    if not op.same_as or op.shape is None or op.same_as not in inputs:
        return None
    handed = inputs[op.same_as]
    try:
        shape = [evaluate(s, symbols) for s in op.shape]
        stride = None if op.stride is None else [evaluate(s, symbols) for s in op.stride]
    except NotCheckable:
        return None
    if list(handed.shape) != shape or (stride is not None and list(handed.stride()) != stride):
        return None
    return handed


def bind(program: Program, inputs: Dict[str, Any], known: Sequence = ()) -> Dict[str, int]:
    """Symbols from recorded sizes: each size the codegen wrote as `s` or `c*s`, of the
    launch's inputs, of the views it was handed (`same_as`), and `known`: more
    (size expressions, tensor) pairs, e.g. the recorded outputs and the ops they hold."""
    pairs = list(known)
    for op in program.ops:
        # (a view placed by its offset may be another view's: its sizes bind nothing)
        if op.same_as and op.stride is None and op.shape is not None and op.same_as in inputs:
            pairs.append((op.shape, inputs[op.same_as]))
        for leaf in _leaves(op.args + list(op.kwargs.values())):
            if leaf.get("input") in inputs and leaf.get("shape") is not None and not leaf.get("view"):
                pairs.append((leaf["shape"], inputs[leaf["input"]]))
    return bind_pairs(pairs)


def bind_pairs(pairs: Sequence) -> Dict[str, int]:
    """Symbols from (size expressions, tensor) pairs: each size written `s` or `c*s`."""
    symbols: Dict[str, int] = {}
    for shape, t in pairs:
        if len(shape) != t.dim():
            continue
        for expr, size in zip(shape, t.shape):
            m = re.fullmatch(r"(?:([1-9]\d{0,17})\*)?([A-Za-z_]\w*)", expr.replace(" ", ""))
            factor = int(m.group(1) or 1) if m else 0
            if m and size % factor == 0:
                symbols.setdefault(m.group(2), size // factor)
    return symbols


def model_input_shapes(program: Program, labels: Sequence[str]) -> Dict[str, List[str]]:
    """Model input label -> its size expressions, where the program reads the input
    (handed, or named as a model input it is not handed)."""
    found: Dict[str, List[str]] = {}
    for op in program.ops:
        for leaf in _all_leaves(op.args + list(op.kwargs.values())):
            if leaf.get("view"):
                continue
            name = leaf.get("model_input") or leaf.get("input")
            if name in labels and isinstance(leaf.get("shape"), list):
                found.setdefault(name, leaf["shape"])
    return found


def _leaves(values):
    for v in values:
        if isinstance(v, dict) and "input" in v:
            yield v
        elif isinstance(v, list):
            yield from _leaves(v)


def _all_leaves(values):
    for v in values:
        if isinstance(v, dict):
            yield v
        elif isinstance(v, list):
            yield from _all_leaves(v)


# -- running --------------------------------------------------------------------------

class Runner:
    """Evaluates a program's nodes on recorded inputs, lazily, each once.

    `wide`: the float64 reference -- floating inputs are widened and every cast to
    a floating dtype becomes a cast to float64, so the result is the launch's math
    carried out in float64 on the same input values."""

    def __init__(self, program: Program, inputs: Dict[str, Any], wide: bool = False, known: Sequence = (),
                 run_symbols: Optional[Dict[str, int]] = None):
        self.program, self.inputs, self.wide = program, inputs, wide
        # the launch's own tensors first; the run's (its recorded model inputs) for the rest
        self.symbols = {**(run_symbols or {}), **bind(program, inputs, known)}
        # what _bounded lets one op's results take: LIMIT_FACTOR times the launch's largest recorded tensor
        import torch
        recorded = list(inputs.values()) + [t for _, t in known]
        self._limit = max(LIMIT_FLOOR, LIMIT_FACTOR * max(
            [t.numel() * t.element_size() for t in recorded if isinstance(t, torch.Tensor)], default=0))
        self.values: Dict[str, Any] = {}

    def value(self, node: str) -> Any:
        if node not in self.values:
            op = self.program.by_node.get(node)
            if op is None:
                raise NotCheckable(f"no op of this launch computes {node}")
            self.values[node] = self._run(op)
        return self.values[node]

    def _run(self, op: Op) -> Any:
        import torch
        handed = handed_view(op, self.inputs, self.symbols)
        if handed is not None:
            return self._leaf_tensor(handed)
        fn = operator(op.op, op.args, op.kwargs)
        args = [self._arg(a) for a in op.args]
        kwargs = {k: self._arg(v) for k, v in op.kwargs.items()}
        self._bounded(op, fn, args, kwargs)
        try:
            with torch.no_grad():
                value = fn(*args, **kwargs)
        except Exception as exc:       # an op refusing these inputs: say so, never crash the report
            raise NotCheckable(f"{op.short} raised {type(exc).__name__}: "
                               f"{shorten(printable(str(exc).splitlines()[0] if str(exc) else ''))}") from None
        foreign = _foreign(value)
        if foreign:                    # no later op reads or writes it
            raise NotCheckable(f"{op.short} is not re-run: it returned {foreign}")
        return value

    def _bounded(self, op: Op, fn, args, kwargs) -> None:
        """Refuse an op whose results would take more memory than the dump justifies: at most
        LIMIT_FACTOR times the largest tensor the launch recorded (and LIMIT_FLOOR bytes
        whatever it recorded), its results' sizes found first on fake tensors, which hold no
        memory (a 343-byte ops list once asked for ones([32768, 32768]))."""
        limit = self._limit
        need = _result_bytes(fn, args, kwargs)
        if need is not None and need > limit:
            raise NotCheckable(f"{op.short} is not re-run: its results would take {need} bytes, more than "
                               f"{limit} ({LIMIT_FACTOR} times the largest tensor the launch recorded, "
                               f"{LIMIT_FLOOR} at least)")

    def _read_as(self, name: str, t, layout: Dict[str, Any]):
        """The value a buffer updated in place holds, in the layout of the buffer whose
        value it is: the recorded tensor is the buffer's own view of the same bytes."""
        from .dumps import view_outside
        shape = [evaluate(s, self.symbols) for s in layout["shape"]]
        stride = [evaluate(s, self.symbols) for s in layout["stride"]]
        offset = t.storage_offset() + evaluate(layout["offset"], self.symbols)
        if view_outside(shape, stride, offset, t.untyped_storage().nbytes() // max(t.element_size(), 1)):
            raise NotCheckable(f"input {printable(name)} holds its value in a layout that reaches outside "
                               "what was recorded")
        return t.as_strided(shape, stride, offset)

    def _leaf_tensor(self, t):
        import torch
        t = t.clone()                  # an op may write its input: the recording stays as it was
        if self.wide and t.is_floating_point():
            t = t.to(torch.float64)
        return t

    def _arg(self, v: Any) -> Any:
        import torch
        if isinstance(v, list):
            return [self._arg(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "node" in v:
            return self.value(v["node"])
        if "input" in v:
            t = self.inputs.get(v["input"])
            if t is None:
                raise NotCheckable(f"input {printable(v['input'])} was not dumped")
            if v.get("view") and v.get("shape") is not None:
                shape = [evaluate(s, self.symbols) for s in v["shape"]]
                if list(t.shape) != shape:
                    raise NotCheckable(f"input {printable(v['input'])} is a view the ops cannot place")
            if "read_as" in v:
                t = self._read_as(v["input"], t, v["read_as"])
            return self._leaf_tensor(t)
        if "sym" in v:
            return evaluate(v["sym"], self.symbols)
        if "missing" in v:
            raise NotCheckable(f"{printable(v['missing'])} is {printable(str(v.get('why', 'not recorded')))}")
        if "float" in v:
            return {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}.get(v["float"], 0.0)
        if "dtype" in v:
            if v["dtype"] not in _DTYPES:
                raise NotCheckable(f"dtype {printable(shorten(v['dtype']))} is not known")
            dtype = getattr(torch, v["dtype"])
            return torch.float64 if self.wide and dtype.is_floating_point else dtype
        if "device" in v:
            return torch.device("cpu")    # dumps are on the CPU
        if "layout" in v:
            if v["layout"] != "strided":
                raise NotCheckable(f"layout {printable(shorten(v['layout']))} is not re-run")
            return torch.strided
        if "memory_format" in v:
            fmt = v["memory_format"]
            if fmt not in ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format"):
                raise NotCheckable(f"memory format {printable(shorten(fmt))} is not known")
            return getattr(torch, fmt)
        raise NotCheckable(f"an argument of type {printable(shorten(str(v.get('unsupported'))))} is not recorded")


LIMIT_FACTOR = 8               # an op's results: at most this many times the launch's largest tensor
LIMIT_FLOOR = 256 * 2**20       # bytes, whatever the launch recorded


def _result_bytes(fn, args, kwargs) -> Optional[int]:
    """The bytes of what `fn` returns for these arguments, found on fake tensors (no memory
    taken); None where the fake run cannot tell (a size that depends on the values)."""
    import torch
    import torch.utils._pytree as pytree
    from torch._subclasses.fake_tensor import FakeTensorMode
    try:
        with FakeTensorMode() as mode:
            fake_args, fake_kwargs = pytree.tree_map_only(torch.Tensor, mode.from_tensor, (args, kwargs))
            out = fn(*fake_args, **fake_kwargs)
        return sum(t.numel() * t.element_size() for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor))
    except Exception:
        return None


def dependencies(program: Program, node: str) -> List[Op]:
    """The ops `node` needs, itself included, in program order."""
    wanted, pending = set(), [node]
    while pending:
        n = pending.pop()
        if n in wanted or n not in program.by_node:
            continue
        wanted.add(n)
        pending += program.by_node[n].inputs()
    return [op for op in program.ops if op.node in wanted]
