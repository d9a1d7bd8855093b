"""Real `transformers` models for the AOTI tests: GPT-2, Llama, BERT and a
vision transformer (ViT: a patch-embedding convolution, three encoder layers).

Nobody on this project wrote these models; they are built from small configs
(2 layers, hidden 64, vocabulary 128; ViT: 32x32 images in 8x8 patches,
hidden 32, batch dynamic) with random weights from a fixed seed, so nothing
is downloaded.  The interface is tests/models.py's: `example(name)`
gives (model, args, dynamic_shapes), `export(name)` the ExportedProgram;
`planted(name)` a weight that plants a NaN mid-model, to swap into a package.

Each model is wrapped so that it returns a plain tuple of tensors: a loaded
package then needs no `transformers` import to rebuild its outputs, and the
C++ runner gets tensors.  Attention is transformers' "eager" implementation:
its matmul/softmax stay in the model's own modeling file, where the records'
source lines point.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch.export import Dim

# Qwen2 (Llama's layers with q/k/v biases) was left out: it added about two
# minutes of compiles to test_corpus.py and nothing Llama does not cover.
# The language models run through every corpus test; the vision model
# (test_corpus.py's `model` fixture) through those it adds something to.
TEXT = ("gpt2", "llama", "bert")
VISION = ("vit",)
NAMES = TEXT + VISION
# For `check` on dynamic shapes only (test_analysis_check.py), not in NAMES: a
# convolutional vision model with dynamic batch, height and width, and a
# mixture of experts with dynamic batch and sequence (its router sorts and
# counts tokens, transformers' own custom op multiplies them by the experts).
DYNAMIC_VISION = ("convnext",)
DYNAMIC_TEXT = ("qwen2moe",)
VOCAB, HIDDEN, LAYERS, HEADS = 128, 64, 2, 4
BATCH, SEQ = 2, 8
IMAGE, PATCH = 32, 8


def _config(name):
    import transformers
    common = dict(vocab_size=VOCAB, attn_implementation="eager")
    if name == "gpt2":
        return transformers.GPT2Config(n_layer=LAYERS, n_embd=HIDDEN, n_head=HEADS, n_positions=64,
                                       bos_token_id=0, eos_token_id=0, **common)
    if name == "llama":
        return transformers.LlamaConfig(num_hidden_layers=LAYERS, hidden_size=HIDDEN, intermediate_size=128,
                                        num_attention_heads=HEADS, num_key_value_heads=2,
                                        max_position_embeddings=64, **common)
    if name == "bert":
        return transformers.BertConfig(num_hidden_layers=LAYERS, hidden_size=HIDDEN, intermediate_size=128,
                                       num_attention_heads=HEADS, max_position_embeddings=64, **common)
    if name == "vit":
        # three layers, so that a finding in one must say which (they share every line)
        return transformers.ViTConfig(image_size=IMAGE, patch_size=PATCH, num_channels=3, hidden_size=32,
                                      num_hidden_layers=3, num_attention_heads=HEADS, intermediate_size=64,
                                      num_labels=10, attn_implementation="eager")
    if name == "qwen2moe":
        return transformers.Qwen2MoeConfig(num_hidden_layers=LAYERS, hidden_size=32, intermediate_size=64,
                                           moe_intermediate_size=32, shared_expert_intermediate_size=32,
                                           num_attention_heads=HEADS, num_key_value_heads=2, num_experts=4,
                                           num_experts_per_tok=2, max_position_embeddings=64, **common)
    if name == "convnext":
        # two stages of one block: the patchify stem, depthwise 7x7 convolutions, channels-last
        # layer norms and a downsampling convolution, as ConvNeXt's own modeling file runs them
        return transformers.ConvNextConfig(num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[16, 32],
                                           depths=[1, 1], num_labels=10, image_size=IMAGE)
    raise KeyError(f"{name!r} is not a corpus model (accepted: {', '.join(NAMES + DYNAMIC_VISION + DYNAMIC_TEXT)})")


class Tensors(torch.nn.Module):
    """A transformers model that returns a tuple of tensors."""

    def __init__(self, name, model):
        super().__init__()
        self.name, self.model = name, model

    def forward(self, input_ids, attention_mask):
        if self.name == "bert":
            out = self.model(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return (out.logits,)


class Images(torch.nn.Module):
    """A transformers vision model that returns its logits as a tuple."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return (self.model(pixel_values=pixel_values).logits,)


def build(name):
    import transformers
    config = _config(name)
    torch.manual_seed(0)
    if name == "vit":
        return Images(transformers.ViTForImageClassification(config).eval())
    if name == "convnext":
        return Images(transformers.ConvNextForImageClassification(config).eval())
    cls = transformers.BertModel if name == "bert" else transformers.AutoModelForCausalLM
    model = cls(config) if name == "bert" else cls.from_config(config)
    return Tensors(name, model.eval())


def input_names(name):
    """The model's input names, as its `run` records name them."""
    return ("pixel_values",) if name in VISION + DYNAMIC_VISION else ("input_ids", "attention_mask")


def planted_module(name):
    """The module path that applies the planted weight: the one findings name beside its line."""
    return PLANTED[name][0].rpartition(".")[0]


def inputs(name):
    """Token ids and an attention mask whose second sequence ends in two pads
    (ViT: a batch of images)."""
    g = torch.Generator().manual_seed(1)
    if name == "vit":
        return (torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g),)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[1, -2:] = 0
    return ids, mask


# The planted numeric bug of each model: weights of its second layer set to
# HUGE, swapped into a compiled package with `load_constants` (no compile of
# its own).  A finite value so large that the op applying it overflows float32
# (max 3.4e38): that kernel reads finite values and writes Inf (or NaN, where
# +Inf and -Inf products meet in one sum), and the next ones spread NaN.
# GPT-2 and BERT: one LayerNorm weight (in a fused Inductor kernel; the
# normalised values reach 3 and more, so some products overflow).  Llama: a
# whole row of the MLP's up projection (an extern matmul), because its
# RMSNorm spreads over four lines and a fused kernel is named by the first
# (the pow), not the multiply; one weight there gave no overflow in the matmul.
# ViT: a row of its middle layer's query projection (an extern matmul), on a
# line that all three layers share: only the module path says which layer.
HUGE = 3.0e38
PLANTED = {
    "gpt2": ("model.transformer.h.1.ln_2.weight", (3,)),
    "bert": ("model.encoder.layer.1.attention.output.LayerNorm.weight", (3,)),
    "llama": ("model.model.layers.1.mlp.up_proj.weight", (3,)),
    "vit": ("model.vit.layers.1.attention.q_proj.weight", (3,)),
}
# Where the planted weight is applied: (class, text of its line in forward).
_PLANTED_LINE = {
    "gpt2": ("gpt2.modeling_gpt2.GPT2Block", "hidden_states = self.ln_2(hidden_states)"),
    "bert": ("bert.modeling_bert.BertSelfOutput", "hidden_states = self.LayerNorm(hidden_states + input_tensor)"),
    "llama": ("llama.modeling_llama.LlamaMLP", "down_proj = self.down_proj("),
    "vit": ("vit.modeling_vit.ViTAttention", "query_states = self.q_proj(hidden_states)"),
}


def planted(name):
    """{constant name: value} that plants the bug in `name`'s package."""
    fqn, index = PLANTED[name]
    weight = build(name).get_parameter(fqn).detach().clone()
    weight[index] = HUGE
    return {fqn: weight}


def planted_source(name):
    """'file:line' of the transformers line that applies the planted weight."""
    import importlib
    import inspect
    module, _, cls = _PLANTED_LINE[name][0].rpartition(".")
    forward = inspect.unwrap(getattr(importlib.import_module(f"transformers.models.{module}"), cls).forward)
    lines, first = inspect.getsourcelines(forward)
    [number] = [first + i for i, text in enumerate(lines) if _PLANTED_LINE[name][1] in text]
    return f"{inspect.getsourcefile(forward)}:{number}"


def example(name):
    if name == "convnext":   # every size dynamic
        g = torch.Generator().manual_seed(1)
        dims = {0: Dim("batch", min=2, max=8), 2: Dim("height", min=32, max=64), 3: Dim("width", min=32, max=64)}
        return build(name), (torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g),), (dims,)
    if name == "qwen2moe":
        batch, seq = Dim("batch", min=2, max=8), Dim("seq", min=2, max=64)
        return build(name), inputs(name), ({0: batch, 1: seq}, {0: batch, 1: seq})
    if name == "vit":
        # export specialises a batch of 1, so a dynamic batch starts at 2
        return build(name), inputs(name), ({0: Dim("batch", min=2, max=8)},)
    # the language models export with a dynamic sequence length (up to the position table)
    seq = Dim("seq", min=2, max=64)
    return build(name), inputs(name), ({1: seq}, {1: seq})


def export(name):
    model, args, dynamic = example(name)
    return torch.export.export(model, args, dynamic_shapes=dynamic)
