"""Export patterns that instrumentation must never break: each a small model, its example
inputs, its dynamic shapes, and other inputs within them to run it on.

`PATTERNS[name]()` gives (model, example args, dynamic_shapes, other args).  The models are
ours, written to hit one way of exporting each: a dimension without bounds, `Dim.AUTO`,
derived dimensions, `cond` and `while_loop`, sizes known only at run time (`nonzero`,
`item`), pytree inputs, views and aliased outputs, a buffer mutated in place, weights
constant-folded, zero-size tensors, scalar and None outputs, a custom op with a symbolic
fake.  tests/test_export_patterns.py compiles each with everything compiled in.
"""

import torch
from torch.export import Dim


@torch.library.custom_op("aotid_patterns::pad_rows", mutates_args=())
def pad_rows(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """x with zero rows added up to a multiple of `multiple` rows (a MoE dispatcher's padding)."""
    extra = (-x.shape[0]) % multiple
    return torch.cat([x, x.new_zeros(extra, *x.shape[1:])])


@pad_rows.register_fake
def _(x, multiple):
    rows = x.shape[0]
    return x.new_empty(rows + (-rows) % multiple, *x.shape[1:])


class Unbounded(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2 + x.mean(dim=0)


class Derived(torch.nn.Module):
    def forward(self, x, y):            # x: (2n, d), y: (n, d)
        return x[: y.shape[0]] + x[y.shape[0]:] * y


class Cond(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.shape[0] > 4, lambda t: t.sin() * 2, lambda t: t.cos() + 1, (x,))


class WhileLoop(torch.nn.Module):
    def forward(self, x):
        from torch._higher_order_ops.while_loop import while_loop
        i, out = while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t * 2 + 1),
                            (torch.tensor(0), x))
        return out


class Nonzero(torch.nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x > 0)
        return idx.float().sum(dim=1) + 1


class Item(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= x.shape[0])
        return x[:k].exp()


class Pytree(torch.nn.Module):
    def forward(self, inputs):
        a, b = inputs["pair"]
        return {"sum": a + b, "scaled": [inputs["x"] * 3]}


class Aliased(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return y, y.view(-1), y.t(), x


class Mutated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(4))

    def forward(self, x):
        self.seen.add_(x.sum(dim=0))
        return x + self.seen


class Folded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(8, 8, generator=g))

    def forward(self, x):
        return x @ (self.w.t() * 0.5 + 1).relu()


class ZeroSize(torch.nn.Module):
    def forward(self, x, empty):
        return x.sum(dim=0) + empty.sum(), empty * 2


class ScalarAndNone(torch.nn.Module):
    def forward(self, x):
        return x.sum(), None, x.shape[0] * 2, x + 1


class CustomOp(torch.nn.Module):
    def forward(self, x):
        return pad_rows(torch.tanh(x), 4) * 3


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


PATTERNS = {
    "unbounded": lambda: (Unbounded(), (_x(3, 5),), ({0: Dim("n"), 1: Dim("d")},), (_x(9, 2, seed=1),)),
    "auto": lambda: (Unbounded(), (_x(3, 5),), ({0: Dim.AUTO, 1: Dim.AUTO},), (_x(6, 7, seed=1),)),
    "derived": lambda: (Derived(), (_x(6, 4), _x(3, 4, seed=1)),
                        _derived(), (_x(10, 4, seed=2), _x(5, 4, seed=3))),
    "cond": lambda: (Cond(), (_x(6, 3),), ({0: Dim("n", min=2, max=64)},), (_x(3, 3, seed=1),)),
    "while_loop": lambda: (WhileLoop(), (_x(4, 3),), ({0: Dim("n")},), (_x(7, 3, seed=1),)),
    "nonzero": lambda: (Nonzero(), (_x(5, 4),), ({0: Dim("n")},), (_x(9, 4, seed=1),)),
    "item": lambda: (Item(), (_x(6, 3), torch.tensor(4)), ({0: Dim("n")}, None),
                     (_x(8, 3, seed=1), torch.tensor(2))),
    "pytree": lambda: (Pytree(), ({"pair": (_x(3, 4), _x(3, 4, seed=1)), "x": _x(2, 2)},),
                       ({"pair": ({0: Dim("n")}, {0: Dim("n")}), "x": None},),
                       ({"pair": (_x(5, 4, seed=2), _x(5, 4, seed=3)), "x": _x(2, 2, seed=4)},)),
    "aliased": lambda: (Aliased(), (_x(3, 4),), ({0: Dim("n")},), (_x(6, 4, seed=1),)),
    "mutated": lambda: (Mutated(), (_x(3, 4),), ({0: Dim("n")},), (_x(5, 4, seed=1),)),
    "folded": lambda: (Folded(), (_x(3, 8),), ({0: Dim("n")},), (_x(7, 8, seed=1),)),
    "zero_size": lambda: (ZeroSize(), (_x(3, 4), torch.ones(0, 4)), ({0: Dim("n")}, None),
                          (_x(5, 4, seed=1), torch.ones(0, 4))),
    "scalar_and_none": lambda: (ScalarAndNone(), (_x(3, 4),), ({0: Dim("n")},), (_x(6, 4, seed=1),)),
    "custom_op": lambda: (CustomOp(), (_x(6, 8),), ({0: Dim("n")},), (_x(8, 8, seed=1),)),
}


def _derived():
    n = Dim("n", min=2, max=512)
    return ({0: 2 * n}, {0: n})
