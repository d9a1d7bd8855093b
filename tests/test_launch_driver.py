"""hooks.launch, the one driver of the C++ and the Python wrapper's launches,
with each wrapper's emitter (cpp_emit.Emitter, python_emit.Emitter)."""

from __future__ import annotations

import pytest

from aoti_debug import settings
from aoti_debug.codegen_patches import hooks
from aoti_debug.plan import Provenance


class FakeWrapper:
    class _Header:
        def __init__(self):
            self.lines = []

        def writeline(self, line):
            self.lines.append(line)

    def __init__(self):
        self.lines = []
        self.header = self._Header()

    def writeline(self, line):
        self.lines.append(line)


@pytest.fixture
def active(monkeypatch):
    # outside a compile there is no graph whose inputs carry the user's names
    monkeypatch.setattr(hooks.guards, "label_map", dict)
    previous = hooks.active()

    def set_to(**overrides):
        hooks.set_active(settings.read(environ={}, overrides=overrides))
    yield set_to
    hooks.set_active(previous)


STATES = {"C++": hooks.WrapperState, "Python": hooks.PyWrapperState}


@pytest.mark.parametrize("wrapper_kind", sorted(STATES))
@pytest.mark.parametrize("kernels", [None, "other_kernel"], ids=["logged", "filtered-out"])
def test_a_launch_handed_on_inside_the_wrapper_is_one_launch(active, wrapper_kind, kernels):
    """The GPU wrapper hands a CPU kernel's launch to the CPU wrapper's method,
    which is patched too: whether or not the filter logs the kernel, that is one
    launch, one number and one upstream call."""
    active(level=5, kernels=kernels)
    st, wrapper = STATES[wrapper_kind](), FakeWrapper()

    def handed_on():
        hooks.launch(wrapper, st, "cpp_fused_add_0", Provenance(), [], "kernel",
                     lambda: wrapper.writeline("UPSTREAM CALL"))

    hooks.launch(wrapper, st, "cpp_fused_add_0", Provenance(), [], "kernel", handed_on)
    assert st.launches == 1 and [s.index for s in st.sites] == [1]
    assert wrapper.lines.count("UPSTREAM CALL") == 1
    assert st.in_call is False
    if kernels is not None:    # left out of the log, the launch still takes its number
        numbering = {"C++": "++aotid_run.launch;", "Python": "_aotid_run.launch += 1"}[wrapper_kind]
        assert wrapper.lines == [numbering, "UPSTREAM CALL"]


def test_both_emitters_put_the_same_calls_around_a_logged_launch(active):
    active(level=5)
    lines = {}
    for kind, make in STATES.items():
        st, wrapper = make(), FakeWrapper()
        hooks.launch(wrapper, st, "k", Provenance(modules=("L['self'].fc1",)), [], "kernel",
                     lambda: wrapper.writeline("UPSTREAM CALL"))
        lines[kind] = wrapper
        assert st.sites[0].provenance.modules == ("fc1",)   # Dynamo's spelling, as AOTI's
    cpp, py = lines["C++"], lines["Python"]
    assert cpp.header.lines == []
    assert cpp.lines[-3:] == ["AOTI_DEBUG_LAUNCH(aotid_run, aotid_site_1);", "UPSTREAM CALL",
                              "AOTI_DEBUG_LAUNCH_END(aotid_run, aotid_site_1);"]
    assert py.header.lines == ["_aotid_site_1 = _aotid_Site('k', '', '', 'fc1', (), '')"]
    assert py.lines == ["if _aotid_run.level: _aotid_launch(_aotid_run, _aotid_site_1)",
                        "else: _aotid_run.launch += 1", "UPSTREAM CALL",
                        "if _aotid_run.level: _aotid_launch_end(_aotid_run, _aotid_site_1)"]


def test_the_module_is_the_one_running_the_line_the_launch_names():
    """`module:` (docs/log-format.md 1.1) is the innermost module of the op that
    names `source=` (the log, most telling, not the first op), and goes first
    among the lines both runtimes append to the origin line."""
    import types
    import torch
    from aoti_debug.plan import Site, provenance_of_fx_nodes

    def node(name, target, line, *stack):
        return types.SimpleNamespace(name=name, target=target, meta={
            "stack_trace": f'  File "/srv/app/model.py", line {line}, in forward\n',
            "nn_module_stack": {f"k{i}": (path, object) for i, path in enumerate(("",) + stack)}})
    prov = provenance_of_fx_nodes([node("mul", torch.mul, 11, "blocks", "blocks.1", "blocks.1.proj"),
                                   node("log", torch.log, 12, "blocks", "blocks.1", "blocks.1.norm")])
    assert (prov.source, prov.module) == ("/srv/app/model.py:12", "blocks.1.norm")
    assert Site(0, "cpp_fused_log_mul_0", prov, [], "cpp").record_lines() == (
        "  module: blocks.1.norm\n"
        "  source-line: /srv/app/model.py:11 nodes=mul\n"
        "  source-line: /srv/app/model.py:12 nodes=log\n")
    # an op of the model's own forward runs in no submodule: no module line
    root = provenance_of_fx_nodes([node("relu", torch.relu, 13)])
    assert root.module == "-" and Site(0, "k", root, [], "cpp").record_lines().startswith("  source-line: ")


@pytest.mark.parametrize("shown", [True, False], ids=["logged", "filtered-out"])
def test_each_argument_is_described_once_per_launch_in_the_cpp_wrapper(shown):
    """With everything compiled in (records, NaN check, memory check, black box), an
    argument's expression (a view builds a new tensor each time it is evaluated)
    appears once in the launch's code: in the describer of its side, which a
    per-launch cache calls only when something that runs asks."""
    from aoti_debug.codegen_patches import cpp_emit
    from aoti_debug.plan import IN, INOUT, OUT, Arg, Site
    view = "wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(arg0_1, 2, int_array_0, int_array_1, 0L))"
    args = [Arg("arg0_1", view, IN), Arg("buf1", "buf1", INOUT), Arg("buf2", "buf2_handle", OUT)]
    site = Site(1, "aoti_torch_cpu_foo", Provenance(), args, "extern")
    header, before_lines, after_lines = cpp_emit.EMITTER.launch(site, shown, True, True, True)
    before, after = "\n".join(before_lines), "\n".join(after_lines)
    assert header == [] and (before + after).count(view) == 1 and (before + after).count("buf2_handle") == 1
    assert "aoti_debug_gen::Args aotid_a_1(3);" in before
    assert ("auto aotid_in_1 = [&](aoti_debug_gen::Args& d, int i) { switch (i) { case 0: d.keep(0, " + view + "); break;"
            " case 1: d.keep(1, buf1); break; } };") in before
    assert after.startswith("auto aotid_out_1 = [&](aoti_debug_gen::Args& d, int i) { switch (i) {"
                            " case 2: d.keep(2, buf2_handle); break; default: aotid_in_1(d, i); } };")
    assert after_lines[-1] == "aotid_a_1.done();"
    # every use goes through the cache, one side at a time: inputs by the inputs' describer
    # before the launch, anything by the outputs' one after it
    side = "aotid_a_1.side(aotid_{}_1, aotid_site_1, aoti_debug_gen::{})"
    # the checks (launch_checks.h) ask for any side through one describer, in one call each side
    assert before_lines[-1] == ("if (AOTI_DEBUG_UNLIKELY(aotid_checks.on)) "
                                "aotid_checks.before(aotid_site_1, aotid_a_1.sides(aotid_in_1));")
    assert ("  aotid_checks.after(aotid_site_1, aotid_a_1.sides(aotid_out_1), aotid_sources_1, nullptr, 0);"
            in after_lines)
    assert after.count("aotid_checks.") == 2 and before.count("aotid_checks.") == 2
    assert (f"AOTI_DEBUG_LAUNCH(aotid_run, aotid_site_1, {side.format('in', 'kIn')});" in before) == shown
    assert (f"AOTI_DEBUG_LAUNCH_END(aotid_run, aotid_site_1, {side.format('out', 'kOut')});" in after) == shown
    # with nothing but records, a launch the filter leaves out describes nothing
    assert cpp_emit.EMITTER.launch(site, False, False, False, False) == ([], ["++aotid_run.launch;"], [])
