"""The CUDA wrapper, generated, compiled and linked without a GPU (docs/gpu.md).

tests/cuda_harness.py fakes an sm_90 device for code generation only, on
torch's CUDA build; tests/cuda_models.py's model holds every kind of CUDA
launch.  One subprocess compiles it once per configuration: linked at
AOTI_DEBUG_COMPILE=all, the generated C++ alone at each compile-time setting
and uninstrumented.  Nothing here runs on a GPU: these tests read what was
generated (the wrapper's launch sites, the cubins, the linked .so).
"""

import json
import os
import re
import subprocess
import zipfile

import pytest

import cuda_harness
from cuda_harness import model_line
from conftest import TESTS, clean_env, run_python

pytestmark = [pytest.mark.torch_matrix, pytest.mark.slow]

SKIP = cuda_harness.skip_reason()

# name -> (aoti_debug.instrument() arguments, or None: uninstrumented; linked?)
CONFIGS = {
    "all": (dict(compile="all"), True),
    "off": (None, False),
    "level1": (dict(level=1), False),
    "level10": (dict(level=10), False),
    "kernels": (dict(level=1, kernels="triton_red*"), False),
    "check_inputs": (dict(check_inputs=True), False),
    "nan_check": (dict(nan_check="raise:naninf"), False),
    "memcheck": (dict(memcheck="warn"), False),
    "blackbox": (dict(blackbox=16), False),
}
# the CPU build and torch.compile's wrapper, which Triton launches are compared with
COMPARE = dict(level=10)

# every launch of cuda_models.Everything, by kind
KERNELS = {
    "pointwise": r"triton_poi_fused_mul_sigmoid_\d+",
    "reduction": r"triton_red_fused_abs_add_log_sum_\d+",
    "persistent": r"triton_per_fused__softmax\w*_\d+",
    "user_triton": r"shift_kernel(?:_\d+)?",
    "mm": r"aoti_torch_cuda_mm_out",
    "sdpa": r"aoti_torch_cuda__scaled_dot_product_efficient_attention",
    "custom_op": r"aotid_gpu\.scale\.default",
}
TRITON = ("pointwise", "reduction", "persistent", "user_triton")


# a definition in the code (the runtime header's comments show one over several lines)
_SITE = re.compile(r'^[ \t]*static aoti_debug::Site aotid_site_(\d+)\{((?:"(?:[^"\\\n]|\\.)*"|[^{}"\n])*)\};', re.M)
_FIELD = re.compile(r'"((?:[^"\\]|\\.)*)"|(\w+)')


def sites(wrapper):
    """{kernel: fields} of every Site the wrapper defines: index, nodes,
    source, modules, record lines (source-line:/holds:) and ops (JSON, level 10)."""
    out = {}
    for m in _SITE.finditer(wrapper):
        fields = [w or s.encode().decode("unicode_escape") for s, w in _FIELD.findall(m.group(2))]
        kernel, nodes, source, modules, _args, _count, lines = fields[:7]
        out[kernel] = dict(index=int(m.group(1)), nodes=nodes.split(",") if nodes else [],
                           source=source, modules=modules, lines=lines,
                           ops=json.loads(fields[7]) if len(fields) > 7 else None)
    return out


def code_at(wrapper, start):
    """Where the first line of code (not a comment) beginning with `start` begins."""
    found = re.search(rf"^[ \t]*{re.escape(start)}", wrapper, re.M)
    assert found, start
    return found.start()


def code_count(wrapper, line):
    return len(re.findall(rf"^[ \t]*{re.escape(line)}", wrapper, re.M))


def source_lines(record_lines):
    """{'file:line': [nodes]} of a site's `source-line:` record lines."""
    return {m.group(1): m.group(2).split(",")
            for m in re.finditer(r"source-line: (\S+) nodes=(\S+)", record_lines)}


def by_kind(found):
    """{kind: site} of the launches KERNELS names; each kind exactly once."""
    out = {}
    for kind, pattern in KERNELS.items():
        matching = [k for k in found if re.fullmatch(pattern, k)]
        assert len(matching) == 1, (kind, sorted(found))
        out[kind] = found[matching[0]]
    return out


class Built:
    def __init__(self, root):
        self.root = root
        self.unpacked = {}

    def files(self, config):
        """{name: bytes} of the model folder of a configuration's package."""
        if config not in self.unpacked:
            pt2 = os.path.join(self.root, config, "everything.pt2" if config != "cpu" else "oncpu.pt2")
            with zipfile.ZipFile(pt2) as z:
                self.unpacked[config] = {os.path.basename(n): z.read(n) for n in z.namelist()
                                         if "/data/aotinductor/" in n}
        return self.unpacked[config]

    def wrapper(self, config):
        found = [v for k, v in self.files(config).items() if k.endswith(".wrapper.cpp")]
        assert len(found) == 1, sorted(self.files(config))
        return found[0].decode()


def harness_env(lib, aoti_cache, *paths):
    """The environment of a process that builds for the faked device: CUDA's
    headers, the caches, and the stand-in libcuda in LIBRARY_PATH (and in each
    variable of `paths`, e.g. LD_LIBRARY_PATH to load what was built)."""
    return clean_env(CUDA_HOME=cuda_harness.CUDA_HOME, TORCHINDUCTOR_CACHE_DIR=aoti_cache,
                     TRITON_CACHE_DIR=os.path.join(aoti_cache, "triton"), TRITON_DEFAULT_FP_FUSION="1",
                     **{var: os.pathsep.join(p for p in (lib, os.environ.get(var)) if p)
                        for var in ("LIBRARY_PATH",) + paths})


@pytest.fixture(scope="module")
def built(tmp_path_factory, aoti_cache):
    if SKIP:
        pytest.skip(SKIP)
    root = tmp_path_factory.mktemp("cuda")
    lib = cuda_harness.build_libcuda_standin(str(root / "libcuda"))
    out = str(root / "out")
    env = harness_env(lib, aoti_cache)
    proc = run_python(f"""
        import os, sys; sys.path.insert(0, {TESTS!r})
        import cuda_harness; cuda_harness.install()
        import cuda_models
        os.makedirs({out!r})
        cuda_models.build({out!r}, {CONFIGS!r}, {COMPARE!r})
    """, env=env, timeout=900)
    print(proc.stdout)
    built = Built(out)
    built.libcuda = os.path.join(lib, "libcuda.so.1")
    return built


# -- AOTI_DEBUG_COMPILE=all: every launch instrumented, compiled, linked -------------

def test_every_cuda_launch_is_instrumented_around_its_call(built):
    wrapper = built.wrapper("all")
    kinds = by_kind(sites(wrapper))
    assert len(sites(wrapper)) == len(KERNELS)
    kernel_of = {site["index"]: k for k, site in sites(wrapper).items()}
    for index, kernel in kernel_of.items():
        before = code_at(wrapper, f"AOTI_DEBUG_LAUNCH(aotid_run, aotid_site_{index},")
        after = code_at(wrapper, f"AOTI_DEBUG_LAUNCH_END(aotid_run, aotid_site_{index},")
        between = wrapper[before:after]
        if kernel.startswith("aoti_torch_cuda_"):
            assert f"AOTI_TORCH_ERROR_CODE_CHECK({kernel}(" in between
        elif kernel == "aotid_gpu.scale.default":
            assert "aoti_torch_proxy_executor_call_function(" in between
        else:
            # the Triton launch: its call wrapper, on the model's stream, from the packaged cubin
            assert re.search(rf"\bcall_{kernel}\(.*this->device_idx_, stream, kernels, this->cubin_dir_\);",
                             between), between
    # the run is tied to run_impl's stream (AOTI_DEBUG_SYNC, capture) as it begins
    assert code_count(wrapper, "AOTI_DEBUG_BEGIN_RUN_ON(aotid_run, aotid_model, &aoti_debug_gen::cuda_hooks, "
                               "static_cast<void*>(stream), aotid_inputs") == 1
    assert code_count(wrapper, "AOTI_DEBUG_BEGIN_RUN(") == 0
    # nothing launched outside a site
    run = wrapper[wrapper.index("void AOTInductorModel::run_impl("):]
    assert len(re.findall(r"^\s*call_\w+\(", run, re.M)) == len(TRITON)
    # level 10 and the black box: every site carries the ops check/extract replay
    assert all(site["ops"] for site in kinds.values())


def test_the_package_holds_cubins_and_a_so_linked_against_libtorch_cuda(built, tmp_path):
    files = built.files("all")
    cubins = {k: v for k, v in files.items() if k.endswith(".cubin")}
    assert len(cubins) == len(TRITON)
    for name, data in cubins.items():
        # an ELF object for EM_CUDA (190): device code, compiled by Triton's ptxas
        assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == 190, name
    kernels = b"".join(cubins.values())
    for kind in TRITON:
        assert re.search(KERNELS[kind].encode(), kernels), kind
    so = tmp_path / "wrapper.so"
    so.write_bytes(next(v for k, v in files.items() if k.endswith(".wrapper.so")))
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                        subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout)
    assert {"libtorch_cuda.so", "libcuda.so.1"} <= set(needed), needed

    def symbols(path, *flags):
        out = subprocess.run(["nm", "-D", *flags, path], capture_output=True, text=True, check=True).stdout
        return {line.split()[-1] for line in out.splitlines() if line.strip()}
    driver_calls = {s for s in symbols(str(so), "--undefined-only") if re.fullmatch(r"cu[A-Z]\w*", s)}
    assert {"cuLaunchKernel", "cuModuleLoad", "cuModuleGetFunction"} <= driver_calls
    # AOTI_DEBUG_SYNC and the capture query go through the driver the wrapper links
    assert {"cuStreamSynchronize", "cuStreamIsCapturing", "cuGetErrorString"} <= driver_calls
    # every driver entry point the wrapper calls is one the stand-in defines
    assert driver_calls <= symbols(built.libcuda, "--defined-only")


# -- provenance: a Triton launch names what a CPU launch names ----------------------

def test_a_fused_triton_kernel_names_its_nodes_and_lines_as_the_cpu_build_does(built):
    cuda = by_kind(sites(built.wrapper("all")))
    cpu = source_lines("".join(site["lines"] for site in sites(built.wrapper("cpu")).values()))
    totals, gate, probs = model_line("totals ="), model_line("gate ="), model_line("probs =")
    assert set(cpu) >= {totals, gate, probs}
    for kind, line in (("reduction", totals), ("pointwise", gate)):
        site = cuda[kind]
        assert site["nodes"] == cpu[line]
        assert site["source"] == line
        assert source_lines(site["lines"]) == {line: cpu[line]}
    # the GPU softmax is decomposed otherwise (online softmax); its line is the same
    assert cuda["persistent"]["source"] == probs
    assert list(source_lines(cuda["persistent"]["lines"])) == [probs]
    # the user-defined Triton kernel names its wrapper op; the kernel making its
    # input does not claim that op as well
    assert cuda["user_triton"]["source"] == model_line("shifted =")
    assert cuda["user_triton"]["nodes"] == ["triton_kernel_wrapper_mutation"]
    assert "triton_kernel_wrapper_mutation" not in cuda["pointwise"]["nodes"]


def test_a_triton_launch_keeps_the_ops_check_and_extract_replay(built):
    cuda = by_kind(sites(built.wrapper("all")))
    cpu_sites = sites(built.wrapper("cpu"))
    cpu_ops = [op for site in cpu_sites.values() for op in site["ops"] or ()]
    for kind, line in (("reduction", model_line("totals =")), ("pointwise", model_line("gate ="))):
        ops = cuda[kind]["ops"]
        own = [(op["node"], op["op"], op["line"]) for op in ops if op["own"]]
        assert own == [(op["node"], op["op"], op["line"]) for op in cpu_ops
                       if op["own"] and op["line"] == line]
        assert own and all(line == op_line for _, _, op_line in own)


def test_torch_compile_cuda_wrapper_names_triton_provenance(built):
    with open(os.path.join(built.root, "python_wrapper.py")) as f:
        code = f.read()
    compile(code, "python_wrapper.py", "exec")        # generated, never run here
    # torch.compile traces anew: node names may differ from AOTI's, never their lines
    for kind, line, ops in (("reduction", model_line("totals ="), ["abs", "add", "log", "sum"]),
                            ("pointwise", model_line("gate ="), ["sigmoid", "mul"]),
                            ("persistent", model_line("probs ="), None),
                            ("user_triton", model_line("shifted ="), None)):
        found = re.search(rf"^_aotid_site_\d+ = _aotid_Site\('({KERNELS[kind]})', '([^']*)', '([^']*)', .*$",
                          code, re.M)
        assert found and found.group(3) == line, kind
        nodes = found.group(2).split(",")
        record = found.group(0).encode().decode("unicode_escape")
        assert f"source-line: {line} nodes=" in record, kind
        if ops is not None:
            assert source_lines(record) == {line: nodes}
            assert [n.rstrip("_0123456789") for n in nodes] == ops, nodes
        assert "ops=" in record, kind


# -- each compile-time setting ---------------------------------------------------------

def launch_markers(wrapper, index):
    """What the model's run does around launch `index` (the runtime's comments show examples)."""
    run = wrapper[code_at(wrapper, "void AOTInductorModel::run_impl("):]
    return [m for m in ("AOTI_DEBUG_LAUNCH(aotid_run, aotid_site_", "aotid_checks.before(aotid_site_",
                        "aotid_checks.after(aotid_site_")
            if re.search(rf"{re.escape(m)}{index}\b", run)]


# the checks a run holds (launch_checks.h: plan, memory, black box, NaN), None: no check compiled in
@pytest.mark.parametrize("config,held,before,ops", [
    ("level1", None, False, False),
    ("level10", None, False, True),
    ("nan_check", "nullptr, nullptr, nullptr, &aotid_nan", False, False),
    ("memcheck", "&aotid_plan, &aotid_mem, nullptr, nullptr", True, False),
    ("blackbox", "nullptr, nullptr, &aotid_box, nullptr", True, True),
])
def test_each_setting_instruments_every_cuda_launch(built, config, held, before, ops):
    wrapper = built.wrapper(config)
    found = by_kind(sites(wrapper))
    declared = re.findall(r"aoti_debug::LaunchChecks aotid_checks\((.*)\);", wrapper)
    # the setting's own check, and no other
    assert declared == ([held] if held else []), config
    for kind, site in found.items():
        markers = launch_markers(wrapper, site["index"])
        assert markers[0] == "AOTI_DEBUG_LAUNCH(aotid_run, aotid_site_", (config, kind)
        # around each launch: its checks before it where that check acts before, after it
        assert markers[1:] == (["aotid_checks.before(aotid_site_"] * before
                               + ["aotid_checks.after(aotid_site_"] * bool(held)), (config, kind)
        assert bool(site["ops"]) == ops, (config, kind)
        assert site["source"].startswith(os.path.join(TESTS, "cuda_models.py:")), (config, kind)


def test_the_kernel_filter_logs_the_launches_it_names_only(built):
    wrapper = built.wrapper("kernels")
    # a filtered-out launch keeps its number and defines no site (no check compiled in)
    logged = sites(wrapper)
    assert len(logged) == 1 and re.fullmatch(KERNELS["reduction"], next(iter(logged)))
    assert code_count(wrapper, "++aotid_run.launch;") == len(KERNELS) - 1


def test_input_guards_on_cuda_inputs(built):
    wrapper = built.wrapper("check_inputs")
    assert code_count(wrapper, "aoti_debug::InputGuard aotid_guard(aotid_model);") == 1
    # each input on CUDA device 0 (device type 1); the batch a dynamic size bound by x
    for g, name in enumerate(("x", "weight", "long_rows", "q")):
        assert f'aotid_guard.device("{name}", aotid_g{g}, 1, 0);' in wrapper, name
    assert re.search(r'aotid_guard\.range\("x", aotid_g0, 0, 2, 64', wrapper)


def test_instrumentation_changes_no_kernel(built):
    plain = built.wrapper("off")
    assert "aoti_debug" not in plain
    for config in ("level1", "level10", "blackbox"):
        ours = {k: v for k, v in built.files(config).items() if k.endswith(".cubin")}
        theirs = {k: v for k, v in built.files("off").items() if k.endswith(".cubin")}
        assert ours == theirs and len(theirs) == len(TRITON), config


# -- the harness itself ---------------------------------------------------------------

@pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
def test_a_moved_hook_is_named(monkeypatch):
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    monkeypatch.delattr(CachingAutotuner, "save_gpu_kernel")
    assert cuda_harness.missing_hooks() == [
        "torch._inductor.runtime.triton_heuristics.CachingAutotuner.save_gpu_kernel"]
    import torch
    with pytest.raises(cuda_harness.HarnessUnsupported) as raised:
        cuda_harness.install()
    assert str(raised.value) == (
        f"cuda_harness: torch {torch.__version__} no longer has "
        "torch._inductor.runtime.triton_heuristics.CachingAutotuner.save_gpu_kernel, "
        "which the GPU-less CUDA harness hooks into")
