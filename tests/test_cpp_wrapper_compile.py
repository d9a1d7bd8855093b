"""torch.compile with cpp_wrapper=True: Inductor's C++ wrapper, built into a module
the Python process loads, is instrumented by the C++ shim as an AOTI artifact is,
and writes the records and findings torch.compile's Python wrapper writes."""

import re

import pytest

from aoti_debug.analysis.mask import mask
from conftest import records
from test_python_wrapper import drive, ranked

pytestmark = pytest.mark.torch_matrix

CPP_WRAPPER = dict(TORCHINDUCTOR_CPP_WRAPPER="1")


@pytest.fixture(scope="module", params=["mlp", "scaled"])
def both(request, tmp_path_factory, aoti_cache):
    """A model at level 5, once through each wrapper (the C++ one plain too): the
    MLP (generated kernels and mm through torch's C shim) and Scaled (a custom op,
    which torch.compile's C++ wrapper calls through torch's dispatcher)."""
    model = request.param
    out = tmp_path_factory.mktemp(f"cpp-wrapper-{model}")
    py = drive(out / "python", aoti_cache, [5], model=model)
    cpp = drive(out / "cpp", aoti_cache, [5, None] if model == "mlp" else [5], model=model, **CPP_WRAPPER)
    return out, py, cpp, model


def test_records_are_the_python_wrappers(both):
    """Every record whole, the inputs under Dynamo's names, the same statistics and
    hashes: the kernels are the same, only the wrapper that calls them differs."""
    out, _, _, model = both
    py = records(mask((out / "python" / "level5.log").read_text()))
    cpp = records(mask((out / "cpp" / "level5.log").read_text()))
    assert "hash=" in py[0]
    kernels = [r.split("\n", 1)[0].split()[-1] for r in py if " launch " in r.split("\n", 1)[0]]
    if model == "mlp":
        assert py[0].count("Tensor(") == 7
    else:
        # the one difference: Inductor numbers the custom op's output buffer apart in
        # its C++ wrapper (buf2, the Python wrapper's buf1)
        assert "aotid_test.fast_scale.default" in kernels, kernels
        py, cpp = ([re.sub(r"\bbuf\d+\b", "bufN", r) for r in side] for side in (py, cpp))
    assert cpp == py


def test_outputs_bit_identical_instrumented_or_not(both):
    _, py, cpp, model = both
    assert cpp["level5"] == py["level5"]
    if model == "mlp":
        assert cpp["plain"] == cpp["level5"]


def test_nan_check_names_the_origin_as_the_python_wrapper_does(tmp_path):
    """The C++ shim's finding, raised through the C++ wrapper's entry as a
    RuntimeError, says what torch.compile's Python runtime says
    (test_python_wrapper's test of the same model), and its note is the same."""
    from models import line_of
    out, notes = ranked(tmp_path, AOTI_DEBUG_NAN_CHECK="raise:naninf", AOTI_DEBUG_LOGLEVEL="1", **CPP_WRAPPER)
    assert re.fullmatch(r"RAISED: aoti-debug NaN check: launch model:1\.1 cpp_fused_log_sigmoid_0 \(source "
                        + re.escape(line_of("ranked.log")) + r"\) wrote 0 NaN and 1 Inf into buf0 \(first at "
                        r"flat index 15\); its inputs were finite, so this launch is where they first appear",
                        out), out
    assert notes == [out[len("RAISED: aoti-debug NaN check: "):]]
