"""A transformers model converted to float8 as a user does it by hand (no torchao):
every nn.Linear of tests/corpus.py's tiny Llama replaced by Fp8Linear, which quantizes its
weight to float8_e4m3fn once, per output row, and its input per tensor on each call, then
calls torch._scaled_mm.  The input's scale is computed in the graph (amax / 448: dynamic),
or calibrated once on sample inputs (static: a buffer, as fp8 checkpoints carry
`input_scale`).  docs/checks.md's "fp8 models" shows what aoti-debug says of it."""

import torch

import corpus
import models

E4M3 = torch.float8_e4m3fn
# a static scale leaves headroom over what calibration saw: its largest input lands on 224
HEADROOM = 2.0


class Fp8Linear(torch.nn.Module):
    def __init__(self, linear, input_scale=None):
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax(1, keepdim=True).clamp(min=1e-12) / 448     # per output row
        self.register_buffer("weight", (w / scale).to(E4M3).t())         # (in, out), column-major
        self.register_buffer("weight_scale", scale.t().contiguous())    # (1, out)
        self.bias = linear.bias
        if input_scale is not None:
            self.register_buffer("input_scale", input_scale)
        else:
            self.input_scale = None

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1])
        x_scale = self.input_scale if self.input_scale is not None else x2.abs().amax() / 448  # LINE:fp8_transformers.scale
        x8 = (x2 / x_scale).to(E4M3)  # LINE:fp8_transformers.quantize
        # _scaled_mm takes a per-tensor input scale beside per-row weight scales as one per row
        rows = x_scale.expand(x2.shape[0], 1).contiguous()
        y = torch._scaled_mm(x8, self.weight, scale_a=rows, scale_b=self.weight_scale,  # LINE:fp8_transformers.mm
                             bias=self.bias, out_dtype=x.dtype)
        return y.reshape(*x.shape[:-1], y.shape[-1])


def to_fp8(module, calibration=None):
    """`module` with every nn.Linear replaced by an Fp8Linear; with `calibration` (the
    model's inputs) each input scale is static, from the largest input seen there."""
    amax = {}
    if calibration is not None:
        hooks = [m.register_forward_pre_hook(lambda m, args, name=name: amax.__setitem__(name, args[0].abs().amax()))
                 for name, m in module.named_modules() if isinstance(m, torch.nn.Linear)]
        with torch.no_grad():
            module(*calibration)
        for h in hooks:
            h.remove()
    for name, m in list(module.named_modules()):
        for child_name, child in list(m.named_children()):
            if isinstance(child, torch.nn.Linear):
                path = f"{name}.{child_name}" if name else child_name
                scale = (amax[path] * HEADROOM / 448).float() if path in amax else None
                setattr(m, child_name, Fp8Linear(child, scale))
    return module


def build(static=False):
    model = corpus.build("llama")
    return to_fp8(model, corpus.inputs("llama") if static else None).eval()


def line_of(tag):
    """'file:line' of the line marked `# LINE:<tag>` in this file."""
    return models.line_of(tag, __file__)


# tests/conftest.py's compile_model interface: export(name)
def export(name):
    model = build(static=name == "llama_fp8_static")
    with torch.no_grad():
        return torch.export.export(model, corpus.inputs("llama"))
