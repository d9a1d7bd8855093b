"""One table of dtype codes (aoti_debug/native/core.py's DTYPE_CODES) that
codegen and the Python runtime read; the C++ runtime's table and names
(detail/dtypes.h) are tested against it, and it against torch itself."""

from __future__ import annotations

import ctypes
import os
import re

import torch

from aoti_debug.native.core import DTYPE_CODES, include_dir

HEADER = os.path.join(include_dir(), "aoti_debug", "detail", "dtypes.h")


def header_table():
    """(name, itemsize) of dtypes.h's dtype_info table, in code order."""
    text = open(HEADER).read()
    body = text[text.index("static const DtypeInfo table[] = {"):]
    body = body[:body.index("};")]
    return [(name, int(size)) for name, size in re.findall(r'\{"(\w+)", (\d+)\}', body)]


def test_the_cpp_table_names_each_code_as_the_python_table_does():
    by_code = [name for name, _ in sorted(DTYPE_CODES.items(), key=lambda kv: kv[1])]
    assert list(range(len(by_code))) == sorted(DTYPE_CODES.values())   # no hole
    assert [name for name, _ in header_table()] == by_code


def test_the_cpp_itemsizes_are_torchs():
    sizes = {name: size for name, size in header_table()}
    known = {name: getattr(torch, name).itemsize for name in sizes
             if isinstance(getattr(torch, name, None), torch.dtype)}
    assert len(known) >= 25      # every dtype this torch has by that name
    assert {name: sizes[name] for name in known} == known


def test_the_codes_are_the_ones_aotis_shim_hands_out():
    """AOTI's generated code gets dtype codes from the C shim
    (aoti_torch_dtype_<name>): each the shim has must be ours."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    shim = {}
    for name in DTYPE_CODES:
        fn = getattr(lib, f"aoti_torch_dtype_{name}", None)
        if fn is not None:
            fn.restype = ctypes.c_int32
            shim[name] = fn()
    assert {"float32", "bfloat16", "float8_e4m3fn", "bool", "uint64"} <= set(shim)
    assert shim == {name: DTYPE_CODES[name] for name in shim}


def test_the_cpp_names_for_codes_are_c10s():
    """dtypes.h's enum (kFloat = 6, ...) spells c10's own names and codes, as
    torch's ScalarType.h lists them (`_(float, Float) /* 6 */`)."""
    torch_header = os.path.join(os.path.dirname(torch.__file__), "include", "torch", "headeronly",
                                "core", "ScalarType.h")
    if not os.path.exists(torch_header):        # before the header-only split
        torch_header = os.path.join(os.path.dirname(torch.__file__), "include", "c10", "core",
                                    "ScalarType.h")
    c10 = {name: int(code) for name, code in
           re.findall(r"_\([^,]+, (\w+)\) /\* (\d+) \*/", open(torch_header).read())}
    assert c10["Float"] == 6 and c10["BFloat16"] == 15
    text = open(HEADER).read()
    enum = text[text.index("enum ScalarCode"):]
    ours = {name: int(code) for name, code in re.findall(r"k(\w+) = (\d+)", enum[:enum.index("};")])}
    assert len(ours) >= 20
    assert ours == {name: c10[name] for name in ours}


def test_the_guard_and_plan_check_name_every_dtype_by_the_table():
    """The codes the input guard and the plan check compile in come from the one table:
    a dtype the guard once knew no code for (-1) failed every run against any input."""
    from aoti_debug.codegen_patches.cpp_emit import scalar_type
    assert [scalar_type(n) for n in ("float32", "complex32", "qint8", "float4_e2m1fn_x2", "uint3")] == \
        [6, 8, 12, 45, 32]
    assert {n: scalar_type(n) for n in DTYPE_CODES} == DTYPE_CODES
    assert scalar_type("float128") == -1


def header_float_facts():
    """{name: (max_finite, smallest_normal, narrow)} of dtypes.h's float_facts table."""
    text = open(HEADER).read()
    body = text[text.index("static const FloatFacts table[] = {"):]
    body = body[:body.index("};")]
    names = {code: name for name, code in DTYPE_CODES.items()}
    enum = text[text.index("enum ScalarCode"):]
    codes = {name: int(code) for name, code in re.findall(r"k(\w+) = (\d+)", enum[:enum.index("};")])}
    return {names[codes[k]]: (float(hi), float(lo), narrow == "true")
            for k, hi, lo, narrow in re.findall(r"\{k(\w+), ([0-9.e+-]+), ([0-9.e+-]+), (true|false)\}", body)}


def test_the_cpp_float_facts_are_torchs_finfo():
    """Largest finite and smallest normal magnitude of every floating format, as torch.finfo
    has them; narrow (under 16 bits) exactly for the float8 kinds and float4."""
    facts = header_float_facts()
    assert len(facts) == 10
    for name, (hi, lo, narrow) in facts.items():
        dtype = getattr(torch, name)
        assert narrow == (dtype.itemsize == 1), name
        if name == "float4_e2m1fn_x2":   # torch 2.13's finfo refuses it: the e2m1 definition's own
            ebits, mbits, bias = 2, 1, 1    # no NaN/Inf: the top exponent and mantissa are finite
            top = 2.0 ** ((1 << ebits) - 1 - bias) * (2 - 2.0 ** -mbits)
            assert (hi, lo) == (top, 2.0 ** (1 - bias)) == (6.0, 1.0)
            continue
        info = torch.finfo(dtype)
        assert (hi, lo) == (info.max, info.smallest_normal), name


def test_the_saturation_limits_are_the_narrow_formats_with_statistics():
    """native.core.SATURATION_LIMITS (the Python runtime's) names the formats dtypes.h's
    counts_saturation does, each with the table's largest finite magnitude."""
    from aoti_debug.native.core import SATURATION_LIMITS
    facts = header_float_facts()
    text = open(HEADER).read()
    body = text[text.index("inline bool counts_saturation"):]
    body = body[:body.index("return true")]
    names = {code: name for name, code in DTYPE_CODES.items()}
    enum = text[text.index("enum ScalarCode"):]
    codes = {name: int(code) for name, code in re.findall(r"k(\w+) = (\d+)", enum[:enum.index("};")])}
    counted = {names[codes[k]] for k in re.findall(r"case k(\w+):", body)}
    assert counted == set(SATURATION_LIMITS) == {n for n, f in facts.items() if f[2]}
    assert SATURATION_LIMITS == {n: facts[n][0] for n in counted}
