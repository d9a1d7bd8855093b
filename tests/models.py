"""Real models for the AOTI tests, with their example inputs.

Imported by test subprocesses (compile and run happen in fresh processes so
each sees only the environment the test gives it).  Line numbers of the
marked lines are looked up by tests through `line_of`.
"""

import os

import torch
import torch.nn.functional as F
from torch.export import Dim

# The example custom-op library (examples/custom_op), built by the test
# session; loading it registers torch.ops.mylib.gather_rows.
if os.environ.get("MYLIB_SO"):
    torch.ops.load_library(os.environ["MYLIB_SO"])
# examples/custom_op/memory_bugs.cpp: torch.ops.membugs.*, ops with memory bugs
if os.environ.get("MEMBUGS_SO"):
    torch.ops.load_library(os.environ["MEMBUGS_SO"])


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 16)
        self.fc3 = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))  # LINE:mlp.fc1
        h = torch.relu(self.fc2(h))  # LINE:mlp.fc2
        return self.fc3(h).softmax(-1)  # LINE:mlp.fc3


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, img):
        f = F.relu(self.conv(img))  # LINE:conv.conv
        return self.head(f.mean((2, 3)))  # LINE:conv.head


class Block(torch.nn.Module):
    """A transformer block: layernorm, attention with softmax, MLP."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.norm2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, -1)
        q = q.view(b, t, self.heads, -1).transpose(1, 2)
        k = k.view(b, t, self.heads, -1).transpose(1, 2)
        v = v.view(b, t, self.heads, -1).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) / (d // self.heads) ** 0.5 + mask
        att = scores.softmax(-1)  # LINE:block.softmax
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class Planted(torch.nn.Module):
    """Each output has a planted numeric bug that the inputs switch on."""

    def forward(self, a, b, c, d, e):
        la = torch.log(a) * 2  # LINE:planted.log
        sb = torch.sqrt(b) + 1  # LINE:planted.sqrt
        r = c / d  # LINE:planted.div
        big = e.half() * 1000.0  # LINE:planted.overflow
        return la.sum(0, keepdim=True) + 1, sb.cumsum(0), r.amax(0, keepdim=True), big


class Dynamic(torch.nn.Module):
    def forward(self, x, y):
        return x.sum(0) + y.reshape(2, -1, 4).sum(0).sum(0)  # LINE:dynamic.sum


class Patches(torch.nn.Module):
    """A ConvNeXt-like stem and stage with dynamic batch, height and width: a
    4x4 patchify convolution, a depthwise 3x3, a channels-last LayerNorm, an MLP
    and a 2x2 downsampling, pooled into a head."""

    def __init__(self, c=8):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, c, 4, stride=4)
        self.dw = torch.nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.norm = torch.nn.LayerNorm(c)
        self.fc1 = torch.nn.Linear(c, 2 * c)
        self.fc2 = torch.nn.Linear(2 * c, c)
        self.down = torch.nn.Conv2d(c, 2 * c, 2, stride=2)
        self.head = torch.nn.Linear(2 * c, 4)

    def forward(self, img):
        x = self.stem(img)  # LINE:patches.stem
        h = self.norm(self.dw(x).permute(0, 2, 3, 1))  # LINE:patches.norm
        h = self.fc2(F.gelu(self.fc1(h)))  # LINE:patches.mlp
        x = x + h.permute(0, 3, 1, 2)  # LINE:patches.residual
        x = self.down(x)  # LINE:patches.down
        return self.head(x.mean((2, 3)))  # LINE:patches.head


class Gather(torch.nn.Module):
    """A C++ custom op (run through AOTI's proxy executor) between Inductor kernels."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x, idx):
        h = torch.relu(self.fc(x))  # LINE:gather.fc
        g = torch.ops.mylib.gather_rows(h, idx)  # LINE:gather.op
        return (g * 2.0).sum(1)  # LINE:gather.sum


class GatherView(torch.nn.Module):
    """Custom ops handed views of an intermediate: the C++ op a transpose of a
    linear's result, a Python one two slices of that same buffer."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x, idx):
        h = self.fc(x)  # LINE:gather_view.fc
        g = torch.ops.mylib.gather_rows(h.t(), idx)  # LINE:gather_view.op
        d = torch.ops.aotid_test.pair_sub(h[:, :4], h[:, 4:])  # LINE:gather_view.pair
        return g * 2.0, d


class Overrun(torch.nn.Module):
    """A custom op that writes one float past the end of the tensor it returns."""

    def forward(self, x):
        h = x + 1.0  # LINE:overrun.add
        y = torch.ops.membugs.overrun(h)  # LINE:overrun.op
        return y * 3.0  # LINE:overrun.mul


class Hang(torch.nn.Module):
    """Inductor kernels around a custom op that never returns on some inputs (membugs::hang)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(5, 5)

    def forward(self, x):
        h = self.fc(x) * 0.5  # LINE:hang.fc
        y = torch.ops.membugs.hang(x + 1.0)  # LINE:hang.op
        return (y + h).relu()  # LINE:hang.relu


class Racy(torch.nn.Module):
    """A custom op whose result differs between identical runs (membugs::racy, a race's stand-in)."""

    def forward(self, x):
        h = x + 1.0  # LINE:racy.add
        y = torch.ops.membugs.racy(h)  # LINE:racy.op
        return y * 3.0  # LINE:racy.mul


class Scratch(torch.nn.Module):
    def forward(self, h):
        return torch.ops.membugs.scratch(h)  # LINE:membugs.scratch


class Layers(torch.nn.Module):
    """Three identical layers (one line of code for all three); the second's bias is planted
    so that its square root makes NaN: only the module path says which layer."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(Root() for _ in range(3))
        with torch.no_grad():
            for layer in self.layers:
                layer.fc.weight.abs_()
                layer.fc.bias.fill_(1.0)
            self.layers[1].fc.bias[2] = -100.0

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Root(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.sqrt(self.fc(x))  # LINE:layers.sqrt


class BadFake(torch.nn.Module):
    """A MoE dispatcher's padding op (membugs::pad4) whose fake claims 4 more rows
    than its kernel returns when the tokens are a multiple of 4, between Inductor
    kernels that read its output as the graph planned it."""

    def forward(self, x):
        h = torch.tanh(x)  # LINE:badfake.tanh
        y = torch.ops.membugs.pad4(h)  # LINE:badfake.op
        return y * 3.0  # LINE:badfake.mul


class MemoryBugs(torch.nn.Module):
    """Custom ops that return memory they never wrote, read before their input,
    and write past the end of a scratch tensor they free (inside a submodule,
    which the memory check's note names)."""

    def __init__(self):
        super().__init__()
        self.work = Scratch()

    def forward(self, x):
        h = x + 1.0  # LINE:membugs.add
        u = torch.ops.membugs.unwritten(h)  # LINE:membugs.unwritten
        r = torch.ops.membugs.read_before(h * 2.0)  # LINE:membugs.read_before
        s = self.work(h)
        return u + 1.0, r - 1.0, s  # LINE:membugs.out


class Ranked(torch.nn.Module):
    """-inf from log(sigmoid) underflow, carried by cumsum and sort (extern
    kernels), turned into NaN by the last kernel, which reuses sort's buffer."""

    def forward(self, s):
        logp = torch.log(torch.sigmoid(s))  # LINE:ranked.log
        total = torch.cumsum(logp, dim=1)  # LINE:ranked.cumsum
        ranked = torch.sort(total, dim=0, descending=True).values
        return ranked - ranked.mean(0, keepdim=True)  # LINE:ranked.sub


class MulLog(torch.nn.Module):
    """An MLP whose mul/sub and log sit on two lines and fuse into one kernel."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = torch.relu(self.a(x))  # LINE:mullog.a
        h = self.b(h) * 3.0 - 2.5  # LINE:mullog.mulsub
        h = torch.log(h)  # LINE:mullog.log
        return h


class Viewed(torch.nn.Module):
    """Outputs that are views of one buffer (a transpose, a column), as
    transformers models return logits and caches, and the buffer itself."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 6)

    def forward(self, x):
        h = torch.tanh(self.fc(x))  # LINE:viewed.fc
        return h.t(), h[:, 2], h


class Attention(torch.nn.Module):
    """Attention with q, k and v sliced from one projection (as GPT-2's c_attn): the
    attention kernel is handed three views of one buffer."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads, self.qkv = heads, torch.nn.Linear(d, 3 * d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v)  # LINE:attention.sdpa


class Weighted(torch.nn.Module):
    """A launch that reads only weights (a @ b) and a kernel that reads nothing
    (the sin of a range): the black box keeps no input of either."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(4, 4))
        self.b = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        grid = torch.arange(16, dtype=torch.float32).view(4, 4).sin()  # LINE:weighted.grid
        return torch.relu(self.a @ self.b) @ x + x @ grid  # LINE:weighted.out


class Named(torch.nn.Module):
    """Inputs named as transformers names them, exported by position with
    their Dims given by argument name (see example)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 4)

    def forward(self, input_ids, attention_mask):
        return (self.emb(input_ids) * attention_mask[..., None]).sum(1)


E4M3 = torch.float8_e4m3fn


class Fp8Linear(torch.nn.Module):
    """Two linears in float8_e4m3fn through torch._scaled_mm, quantized as served models do:
    weights once, per tensor (fc1) and per output row (fc2), each scaled so its largest
    element lands on 448 (a legitimate clamp); fc1's input with a static scale calibrated
    beforehand, so an input past 448 * 0.05 = 22.4 saturates in the cast; fc2's input per
    row by its own largest magnitude."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        w1, w2 = torch.randn(16, 32, generator=g) / 32 ** 0.5, torch.randn(8, 16, generator=g) / 4
        s1, s2 = w1.abs().amax() / 448, w2.abs().amax(1, keepdim=True) / 448
        # (in, out) column-major, as _scaled_mm takes its second operand
        self.register_buffer("w1", (w1 / s1).to(E4M3).t())
        self.register_buffer("w1_scale", s1)
        self.register_buffer("w2", (w2 / s2).to(E4M3).t())
        self.register_buffer("w2_scale", s2.t().contiguous())      # (1, 8): one per output row
        self.register_buffer("x_scale", torch.tensor(0.05))

    def forward(self, x):
        x8 = (x / self.x_scale).to(E4M3)  # LINE:fp8.quantize
        h = torch._scaled_mm(x8, self.w1, scale_a=self.x_scale,  # LINE:fp8.fc1
                             scale_b=self.w1_scale, out_dtype=torch.float32)
        h = torch.relu(h)
        h_scale = h.abs().amax(1, keepdim=True).clamp(min=1e-12) / 448  # LINE:fp8.row_scale
        h8 = (h / h_scale).to(E4M3)  # LINE:fp8.quantize_rows
        return torch._scaled_mm(h8, self.w2, scale_a=h_scale,  # LINE:fp8.fc2
                                scale_b=self.w2_scale, out_dtype=torch.float32)


class DynamicFp8Linear(torch.nn.Module):
    """A linear in float8_e4m3fn whose input scale is computed in the graph each call, per
    tensor (amax / 448: dynamic quantization); the division is guarded against a zero scale,
    the scale passed to _scaled_mm is not, so an all-zero input reaches it as a zero."""

    def __init__(self):
        super().__init__()
        w = torch.randn(8, 32, generator=torch.Generator().manual_seed(3)) / 32 ** 0.5
        scale = w.abs().amax() / 448
        self.register_buffer("weight", (w / scale).to(E4M3).t())
        self.register_buffer("weight_scale", scale)

    def forward(self, x):
        x_scale = x.abs().amax() / 448  # LINE:fp8_dynamic.scale
        x8 = (x / x_scale.clamp(min=1e-12)).to(E4M3)  # LINE:fp8_dynamic.quantize
        return torch._scaled_mm(x8, self.weight, scale_a=x_scale,  # LINE:fp8_dynamic.mm
                                scale_b=self.weight_scale, out_dtype=torch.float32)


class Fp8Dynamic(torch.nn.Module):
    """DynamicFp8Linear inside a model, so that findings name its module path (`proj`)."""

    def __init__(self):
        super().__init__()
        self.proj = DynamicFp8Linear()

    def forward(self, x):
        return torch.relu(self.proj(x))


def fp8_inputs(overflow=False):
    """fc1's input: within its calibrated range, or with one value past it (saturates)."""
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(2))
    if overflow:
        x[1, 5] = 40.0       # 40 / 0.05 = 800 > 448: float8_e4m3fn saturates to 448
    return (x,)


@torch.library.custom_op("aotid_test::noisy_add", mutates_args=())
def noisy_add(x: torch.Tensor) -> torch.Tensor:
    """A non-deterministic op: adds noise from a generator seeded by the OS, far below
    any tolerance (1e-7 relative), so two runs differ only in their bits."""
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
    return x + x.abs() * 1e-7 * torch.randn(x.shape, generator=g)


@noisy_add.register_fake
def _(x):
    return torch.empty_like(x)


class Noisy(torch.nn.Module):
    def forward(self, x):
        a = torch.relu(x * 2)
        b = torch.ops.aotid_test.noisy_add(a)  # LINE:noisy.op
        return torch.sigmoid(b) + 1


@torch.library.custom_op("aotid_test::fast_scale", mutates_args=())
def fast_scale(x: torch.Tensor) -> torch.Tensor:
    """x * 3, with a planted precision bug in its float32 path only (a "fast"
    multiplier off by 2**-10), as a hand-written kernel may have; float64 is exact."""
    return x * (3.0 * (1 + 2.0 ** -10) if x.dtype == torch.float32 else 3.0)


@fast_scale.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("aotid_test::pair_sub", mutates_args=())
def pair_sub(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a - b


@pair_sub.register_fake
def _(a, b):
    return torch.empty_like(a)


class Scaled(torch.nn.Module):
    def forward(self, x):
        a = torch.tanh(x) + 1
        b = torch.ops.aotid_test.fast_scale(a)  # LINE:scaled.op
        return torch.exp(b) - 1


def named_inputs(seq=8, mask_seq=None):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 16, (2, seq), generator=g), torch.ones(2, seq if mask_seq is None else mask_seq)


def ranked_inputs(underflow=False):
    s = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    if underflow:
        s[2, 3] = -130.0   # sigmoid underflows to 0 in float32
    return (s,)


def gather_inputs(crash=False):
    """Rows 0, 2, 5 of six; or an index far outside x: the op reads unmapped memory."""
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    return x, torch.tensor([0, 1 << 44, 5] if crash else [0, 2, 5])


def planted_inputs(bug=None):
    """Clean inputs, or inputs that trigger one planted bug."""
    a, b, c, d, e = torch.ones(6), torch.ones(5), torch.ones(4), torch.ones(4), torch.ones(3)
    if bug == "log":
        a[2] = -1.0          # log of a negative number
    elif bug == "sqrt":
        b[1] = -4.0          # sqrt of a negative number
    elif bug == "div":
        c[3], d[3] = 0.0, 0.0  # 0/0
    elif bug == "overflow":
        e[0] = 100.0         # 100 * 1000 > float16 max: +inf
    return a, b, c, d, e


def line_of(tag, path=__file__):
    """'file:line' of the line marked `# LINE:<tag>` in `path` (this file unless told)."""
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# LINE:{tag}"):
                return f"{path}:{number}"
    raise KeyError(tag)


def example(name):
    g = torch.Generator().manual_seed(0)
    if name == "mlp":
        return MLP(), (torch.randn(4, 8, generator=g),), None
    if name == "conv":
        return ConvNet(), (torch.randn(2, 3, 8, 8, generator=g),), None
    if name == "block":
        mask = torch.zeros(1, 1, 5, 5)
        mask[..., 3:] = float("-inf")
        return Block(), (torch.randn(2, 5, 16, generator=g), mask), None
    if name == "planted":
        return Planted(), planted_inputs(), None
    if name == "ranked":
        return Ranked(), ranked_inputs(), None
    if name == "mullog":
        return MulLog(), (torch.randn(4, 8, generator=g),), None
    if name == "gather":
        return Gather(), gather_inputs(), None
    if name == "gather_view":
        return GatherView(), gather_inputs(), None
    if name == "overrun":
        return Overrun(), (torch.arange(5, dtype=torch.float32),), None
    if name == "hang":
        return Hang(), (torch.arange(5, dtype=torch.float32),), None
    if name == "racy":
        return Racy(), (torch.arange(5, dtype=torch.float32),), None
    if name == "membugs":
        return MemoryBugs(), (torch.arange(5, dtype=torch.float32),), None
    if name == "layers":
        return Layers(), (torch.rand(2, 4, generator=g),), None
    if name == "badfake":   # 6 tokens: fake and kernel agree; 8 (badfake_inputs) they do not
        return BadFake(), (torch.randn(6, 16, generator=g),), ({0: Dim("tokens", min=2, max=64)},)
    if name == "named":
        seq = Dim("seq", min=2, max=32)
        return Named(), named_inputs(), {"input_ids": {1: seq}, "attention_mask": {1: seq}}
    if name == "noisy":
        return Noisy(), (torch.randn(4, 8, generator=g),), None
    if name == "scaled":
        return Scaled(), (torch.randn(4, 8, generator=g),), None
    if name == "attention":
        return Attention(), (torch.randn(2, 8, 16, generator=g),), None
    if name == "weighted":
        return Weighted(), (torch.randn(4, 4, generator=g),), None
    if name == "viewed":
        return Viewed(), (torch.randn(4, 8, generator=g),), None
    if name == "dynamic":
        # min=1 as users write it: the compile specialises 1, and the guard says so
        batch = Dim("batch", min=1, max=64)
        return Dynamic(), (torch.randn(4, 4, generator=g), torch.randn(8, 4, generator=g)), \
            ({0: batch}, {0: 2 * batch})
    if name == "patches":
        batch, height, width = Dim("batch", min=2, max=8), Dim("height", min=32, max=64), Dim("width", min=32, max=64)
        return Patches(), (torch.randn(2, 3, 32, 48, generator=g),), ({0: batch, 2: height, 3: width},)
    if name == "fp8":
        return Fp8Linear(), fp8_inputs(), None
    if name == "fp8_dynamic":   # an all-zero input: torch.zeros(4, 32) gives a zero scale
        return Fp8Dynamic(), (torch.randn(4, 32, generator=g),), None
    if name == "weights_in":
        # x as mlp's; the weights from the same generator, scaled as nn.Linear's initialisation
        shapes = [(16, 8), (16,), (16, 16), (16,), (4, 16), (4,)]
        fan_in = [8, 8, 16, 16, 16, 16]
        return WeightsIn(), (torch.randn(4, 8, generator=g),) + tuple(
            torch.randn(*s, generator=g) / f ** 0.5 for s, f in zip(shapes, fan_in)), None
    raise KeyError(name)


def seeded(name):
    torch.manual_seed(0)
    model, args, dynamic = example(name)
    return model.eval(), args, dynamic


def export(name):
    model, args, dynamic = seeded(name)
    return torch.export.export(model, args, dynamic_shapes=dynamic)


class WeightsIn(torch.nn.Module):
    """MLP's computation with its weights passed in: every tensor is an input of the
    graph under AOTI and torch.compile alike (an AOTI package keeps a module's weights
    as constants, torch.compile passes them in), so both compile the same graph."""

    def forward(self, x, w1, b1, w2, b2, w3, b3):
        h = torch.relu(F.linear(x, w1, b1))  # LINE:weights_in.fc1
        h = torch.relu(F.linear(h, w2, b2))  # LINE:weights_in.fc2
        return F.linear(h, w3, b3).softmax(-1)  # LINE:weights_in.fc3
