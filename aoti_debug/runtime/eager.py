"""The eager reference's runtime: a lowered graph run in eager mode, one launch
record per FX node.

`aoti-debug diff eager.log aoti.log` compares an AOTI artifact's launches with
a log of the same model run in eager mode (aoti_debug.eager_log,
aoti_debug/reference.py, which makes the graph).  For the two to align, the
eager run executes the very graph whose node names the artifact's records
carry (`origin: nodes=`, `holds:`); torch.fx's Interpreter runs it here node
by node on the caller's inputs.

Each node that yields a tensor is written as a launch (docs/log-format.md):
kernel name the op (`aten.addmm.default`), origin and `holds:` that node, its
source line and module path from the node's metadata (the rules of
aoti_debug/plan.py, as the artifact's records), `in` the nodes it reads,
`out` its value.  The run's header says `reference=eager`.  Level, kernel
filter and destination are AOTI_DEBUG_LOGLEVEL (5 when unset: diff compares
statistics), AOTI_DEBUG_KERNELS and AOTI_DEBUG_LOGDEST.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence

from .. import plan
from . import format as fmt
from . import launches, state

REFERENCE = "eager"


def kernel_name(node) -> str:
    """`aten.addmm.default`, `aotid_test.fast_scale.default`, `getitem`."""
    import torch
    if isinstance(node.target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
        return str(node.target)
    return getattr(node.target, "__name__", None) or str(node.target)


class _Model(launches.Model):
    """The eager run's settings: the level, filter and destination the variables ask for
    (nothing is compiled in that they could ask more than); no checks."""

    def _init(self) -> None:
        with self._lock:
            if self._ready:
                return
            s = state.settings()
            self.level = self.default_level
            if s.set_at_run_time("kernels") is not None:
                self._runtime_kernels = tuple(s.kernels)
            self._ready = True


def _level() -> int:
    """AOTI_DEBUG_LOGLEVEL when set (0 writes nothing; 10 is 5: no dumps), else 5."""
    s = state.settings()
    source = s.set_at_run_time("level")
    if source is None:
        return 5
    if s.level > 5:
        state.tell(s.level, "eager", f"{source}: the eager reference writes no dumps; "
                   "writing level 5 (statistics)", once=True)
    return min(s.level, 5)


class Reference:
    """One eager run of a lowered graph, written as launch records."""

    def __init__(self, gm, name: str = "eager", labels: Sequence[str] = ()) -> None:
        self.gm = gm
        self.model = _Model(name, _level())
        self.model.reference = REFERENCE
        placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        # the model's inputs by the names the user gave them, as the artifact's records say them
        self.names = {p: labels[i] if i < len(labels) else p for i, p in enumerate(placeholders)}
        self.sites: Dict[str, launches.Site] = {}

    def site(self, node) -> launches.Site:
        site = self.sites.get(node.name)
        if site is None:
            prov = plan.provenance_of_fx_nodes([node])
            args = [(self.names.get(p.name, p.name), launches.IN) for p in node.all_input_nodes] \
                + [(node.name, launches.OUT)]
            # the body lines the artifact's records have (module:, source-line:, holds:), by one rule
            held = plan.Site(0, kernel_name(node), prov, [plan.Arg(node.name, node.name, plan.OUT, node.name)],
                             "eager")
            site = launches.Site(kernel_name(node), ",".join(prov.nodes), "" if prov.source == "-" else prov.source,
                                 ",".join(prov.modules), args, held.record_lines())
            self.sites[node.name] = site
        return site

    def run(self, flat: Sequence[Any]):
        import torch.fx
        run = self.model.begin_run(list(self.names.values()), list(flat))
        reference = self

        class Interpreter(torch.fx.Interpreter):
            def run_node(self, node):
                # a node of sizes (sym_size, arithmetic on them) holds no tensor: no launch
                if node.op != "call_function" or not fmt.holds_tensor(node.meta.get("val")):
                    return super().run_node(node)
                site = reference.site(node)
                values = [self.env.get(p) for p in node.all_input_nodes]
                run.launch += 1
                if run.level:
                    run.before(site, values + [None])
                result = super().run_node(node)
                if run.level:
                    run.after(site, values + [result])
                return result

        outputs = Interpreter(self.gm).run(*flat)
        out_node = next(n for n in self.gm.graph.nodes if n.op == "output")
        out_names = [getattr(a, "name", "-") for a in _flat(out_node.args[0])]
        run.end(out_names, list(outputs))
        return outputs


def _flat(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]
