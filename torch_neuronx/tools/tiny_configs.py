"""Tiny configs for every causal-LM architecture of Transformers, built offline: each config
class's defaults shrunk by one table of rules keyed by field name (hidden 64, 2 layers, 4 heads
/ 2 KV heads, intermediate 128, vocabulary 512, 4 experts ...), plus the few per-architecture
overrides and set-up steps a generic shrink cannot know. Used by arch_coverage.
"""
import copy
import dataclasses
import warnings

import torch

# ------------------------------------------------------------------------------------------
# Sizes of the tiny models.

HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 128
MOE_INTERMEDIATE = 32
VOCAB = 512
MAX_POSITIONS = 128
EXPERTS = 4
EXPERTS_PER_TOKEN = 2
WINDOW = 8  # sliding windows / attention chunks: smaller than prompt + new tokens, so they act
MAX_LAYERS = 4  # a per-layer pattern with more distinct kinds than LAYERS gets up to this many
SEED = 0

# ------------------------------------------------------------------------------------------
# The generic shrink. A rule maps a config field's default value to its tiny value; fields
# are matched by name, so one table serves every architecture that uses the common names.


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _at_most(limit):
    return lambda old, fields: limit if _is_int(old) and old > limit else old


def _kv_heads(old, fields):
    """Keeps the attention kind: multi-query stays 1, multi-head (or unset, which means
    multi-head) gets HEADS, grouped-query gets KV_HEADS."""
    heads = next((fields[n] for n in _HEAD_FIELDS if _is_int(fields.get(n))), None)
    if old is None:
        return HEADS if heads is not None else None
    if not _is_int(old) or old <= 1:
        return old
    return HEADS if heads is not None and old >= heads else KV_HEADS


_HEAD_FIELDS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "decoder_attention_heads",
                "encoder_attention_heads", "attention_heads")
_LAYER_FIELDS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "decoder_layers",
                 "encoder_layers", "num_decoder_layers")
_EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
                  "num_routed_experts", "n_experts")
_TOP_K_FIELDS = ("num_experts_per_tok", "moe_topk", "moe_top_k", "num_experts_per_token",
                 "experts_per_token", "moe_k", "num_selected_experts", "top_k_experts")

_RULES = {}
for _names, _rule in [
    (("hidden_size", "n_embd", "n_embed", "d_model", "embed_dim", "model_dim", "word_embed_proj_dim",
      "embedding_size", "embedding_dim", "projection_dim"), _at_most(HIDDEN)),
    (_LAYER_FIELDS, _at_most(LAYERS)),
    (_HEAD_FIELDS, _at_most(HEADS)),
    (("num_key_value_heads", "num_kv_heads", "n_head_kv", "n_kv_heads", "kv_n_heads"), _kv_heads),
    (("intermediate_size", "n_inner", "ffn_dim", "decoder_ffn_dim", "encoder_ffn_dim", "ffn_hidden_size",
      "d_ff", "inner_hidden_size", "dense_intermediate_size"), _at_most(INTERMEDIATE)),
    (("moe_intermediate_size", "expert_intermediate_size", "shared_expert_intermediate_size",
      "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "expert_hidden_size",
      "expert_ffn_hidden_size"),
     _at_most(MOE_INTERMEDIATE)),
    (_EXPERT_FIELDS, _at_most(EXPERTS)),
    (_TOP_K_FIELDS, _at_most(EXPERTS_PER_TOKEN)),
    (("n_shared_experts", "num_shared_experts", "moe_num_shared_experts"), _at_most(1)),
    (("n_group", "num_expert_group"), _at_most(2)),
    (("topk_group",), _at_most(1)),
    (("first_k_dense_replace", "num_dense_layers"), _at_most(1)),
    (("vocab_size",), _at_most(VOCAB)),
    (("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "max_sequence_length"),
     _at_most(MAX_POSITIONS)),
    (("sliding_window", "attention_chunk_size", "window_size", "local_window_size"), _at_most(WINDOW)),
    (("rotary_dim",), _at_most(HEAD_DIM)),
    (("kv_lora_rank", "q_lora_rank"), _at_most(32)),
    (("qk_rope_head_dim",), _at_most(8)),
    (("qk_nope_head_dim", "v_head_dim"), _at_most(HEAD_DIM)),
    (("state_size", "ssm_state_size", "mamba_d_state", "d_state"), _at_most(16)),
    (("linear_num_key_heads", "mamba_n_groups", "n_groups"), _at_most(2)),
    (("linear_num_value_heads",), _at_most(HEADS)),
    (("linear_key_head_dim", "linear_value_head_dim", "mamba_d_head", "mamba_head_dim", "swa_head_dim"),
     _at_most(HEAD_DIM)),
    (("swa_num_attention_heads",), _at_most(HEADS)),
    (("swa_num_key_value_heads",), _kv_heads),
    (("sliding_window_size", "attention_window_size"), _at_most(WINDOW)),
    (("unpadded_vocab_size", "vocab_size_per_layer_input", "encoder_hash_byte_group_vocab"), _at_most(VOCAB)),
    (("hidden_size_per_layer_input", "laurel_rank"), _at_most(HEAD_DIM)),
    (("adapter_in_dim", "adapter_input_size"), _at_most(HIDDEN)),
    (("mamba_dt_rank", "time_step_rank"), _at_most(HEAD_DIM)),
]:
    for _name in _names:
        _RULES[_name] = _rule

# Dropouts go to zero (eval mode ignores most, not all: some models apply them unconditionally).
_DROPOUTS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
             "resid_pdrop", "embd_pdrop", "attn_pdrop", "hidden_dropout", "activation_dropout")

# Fields never passed back to a config class: bookkeeping, or rebuilt by the class itself.
_NEVER_PASS = {"transformers_version", "architectures", "model_type", "dtype", "torch_dtype",
               "id2label", "label2id", "per_layer_config"}

# ------------------------------------------------------------------------------------------
# Per-architecture settings, only where the generic shrink is not enough; each says why. A dict
# is applied over the generic result (a key naming a sub-config takes a dict for that sub-config).

_QWEN4_INDEXER = {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": HEAD_DIM,
                  "indexer_budget": WINDOW, "indexer_compress_ratio": 2, "hc_lowrank": HEAD_DIM}

OVERRIDES = {
    # Hybrid state-space / attention models whose default (or 2-layer) pattern has no attention
    # layer at all: put one attention layer in, so that both kinds run.
    "bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    # Zamba shares one transformer block between its hybrid layers: it needs two of them.
    "zamba": {"num_hidden_layers": 4,
              "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"]},
    # gpt_neo spells its per-layer pattern as [[kinds, repeats]].
    "gpt_neo": {"attention_types": [[["global", "local"], 1]]},
    # Mamba2 ties its SSM heads to the hidden size: expand * hidden == num_heads * head_dim.
    "mamba2": {"num_heads": 8},
    # Default configs that cannot build a model as they stand: no rope parameters, no experts.
    "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                "sliding_attention": {"rope_type": "default",
                                                                      "rope_theta": 10000.0}}},
    "dbrx": {"attn_config": {"rope_theta": 10000.0, "clip_qkv": 8.0}},
    "dots1": {"n_routed_experts": EXPERTS, "num_experts_per_tok": EXPERTS_PER_TOKEN, "n_shared_experts": 1},
    # Gemma3n shares the KV cache of its last layers with earlier ones of the same kind: keep
    # two producers (one per kind) and two sharing layers.
    "gemma3n_text": {"num_hidden_layers": 4, "num_kv_shared_layers": 2,
                     "layer_types": ["sliding_attention", "full_attention"] * 2,
                     "intermediate_size": [INTERMEDIATE] * 4,
                     "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0]},
    # Qwen4-Exp leaves its sparse-attention indexer unset by default (None // None at build).
    "qwen4_exp_text": _QWEN4_INDEXER,
    "qwen4_exp": {"text_config": _QWEN4_INDEXER},
    # xLSTM's recurrent step keeps a (qk dim x v dim) state that this transformers sizes with
    # the v dim for both: its default qk_dim_factor=0.5 fails even on the CPU, so use 1.0.
    "xlstm": {"qk_dim_factor": 1.0},
    # Reformer: axial position embeddings must sum to the hidden size and tile the positions.
    "reformer": {"axial_pos_embds_dim": [32, 32], "axial_pos_shape": [8, 16], "attn_layers": ["local", "lsh"]},
}

# Set-up a model needs after it is built (before it is copied to neuron).
MODEL_SETUP = {
    # X-MOD has one adapter per language and refuses to run before one is chosen.
    "xmod": lambda model: model.set_default_language("en_XX"),
    # AFMoE zero-initializes its router, so every expert scores the same and top-k picks among
    # ties, whose order torch.topk leaves unspecified (the CPU and neuron differ). A trained
    # router has distinct scores: give it seeded random weights.
    "afmoe": lambda model: _reinit(model, "router.gate.weight"),
}


def _reinit(model, suffix, std=0.02):
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(suffix):
                p.copy_(torch.randn(p.shape, generator=g) * std)


# Architectures that cannot be judged with token ids alone.
SKIP = {
    "musicgen": "needs audio-codebook inputs (batch x codebooks rows), not plain token ids",
    "musicgen_melody": "needs audio-codebook inputs (batch x codebooks rows), not plain token ids",
    "moshi": "needs audio-codebook inputs (user and Moshi audio streams) besides text",
    "dots3_note": "multimodal wrapper (vision and audio adapters); its text model is dots3_note_text",
    "gemma3n": "multimodal: its vision tower is a timm model (needs timm and PIL, not installed)",
    "gemma4_assistant": "draft (assistant) model: runs on the KV states shared by a Gemma 4 target model",
    "gemma4_unified_assistant": "draft (assistant) model: runs on the KV states shared by a Gemma 4 target model",
}


class Skip(Exception):
    """The architecture cannot be judged here; the message says why."""


# ------------------------------------------------------------------------------------------
# Tiny configs


def _config_fields(cfg):
    """The fields a config class declares (what it takes back as keyword arguments), with the
    values of `cfg`. A scalar the class derives itself (declared default None, set by
    `__post_init__`, like a head_dim computed from the hidden size) is left out, so that the
    class derives it again from the tiny values. A field a heterogeneous config keeps per layer
    reads as its declared default."""
    fields = {}
    for f in dataclasses.fields(cfg):
        if f.name.startswith("_") or f.name in _NEVER_PASS:
            continue
        try:
            value = getattr(cfg, f.name)
        except Exception:  # noqa: BLE001 - AmbiguousGlobalPerLayerAttributeError
            if f.default is not dataclasses.MISSING:
                fields[f.name] = f.default
            continue
        if f.default is None and value is not None and not isinstance(value, (list, tuple, dict)):
            from transformers import PreTrainedConfig
            if not isinstance(value, PreTrainedConfig):
                continue
        fields[f.name] = value
    return fields


def _distinct(values):
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _representative(values, n):
    """A length-n stand-in for a per-layer list: its distinct entries in order of first
    appearance (a [sliding x5, full] pattern keeps one of each), repeated to length n."""
    distinct = _distinct(values)
    return [distinct[i % len(distinct)] for i in range(n)]


def _shrink_token_ids(fields, vocab):
    """Special token ids past the shrunk vocabulary, moved to its top end (distinct ids)."""
    changed, top = {}, vocab - 1

    def move(v):
        nonlocal top
        if _is_int(v) and v >= vocab:
            top -= 1
            return top + 1
        return v

    for name in sorted(fields):
        if name.endswith(("_token_id", "_token_index", "_token_ids")):
            value = fields[name]
            new = [move(v) for v in value] if isinstance(value, (list, tuple)) else move(value)
            if new != value:
                changed[name] = new
    return changed


def _shrink_rope(rope):
    """Rope parameters sized by the head dimension."""
    if not isinstance(rope, dict):
        return rope
    if rope and all(isinstance(v, dict) for v in rope.values()):  # one set per layer type
        return {k: _shrink_rope(v) for k, v in rope.items()}
    rope = copy.deepcopy(rope)
    for key in ("short_factor", "long_factor"):
        if isinstance(rope.get(key), list):
            rope[key] = (rope[key] + [1.0] * HEAD_DIM)[: HEAD_DIM // 2]
    if isinstance(rope.get("mrope_section"), list):
        rope["mrope_section"] = [2, 3, 3]  # sums to HEAD_DIM // 2
    return rope


def _shrink_config(default, overrides=None):
    """A tiny config of the class of `default` (a config instance holding the defaults)."""
    from transformers import PreTrainedConfig

    overrides = dict(overrides or {})
    fields = _config_fields(default)
    kw = {}
    for name, value in fields.items():
        if isinstance(value, PreTrainedConfig):
            kw[name] = _shrink_config(value, overrides.pop(name, None))
        elif name in _RULES:
            new = _RULES[name](value, fields)
            if new != value:
                kw[name] = new
    new = dict(fields, **kw)

    # Values that must agree with the ones above.
    hidden = next((new[n] for n in ("hidden_size", "n_embd", "d_model") if _is_int(new.get(n))), None)
    heads = next((new[n] for n in _HEAD_FIELDS if _is_int(new.get(n))), None)
    if "head_dim" in fields and _is_int(fields.get("qk_rope_head_dim")):
        if fields["head_dim"] == fields["qk_rope_head_dim"]:  # multi-head latent attention
            kw["head_dim"] = new["qk_rope_head_dim"]
    elif "head_dim" in fields and hidden and heads and (fields["head_dim"] is None or _is_int(fields["head_dim"])):
        kw["head_dim"] = hidden // heads
    if any(_is_int(new.get(n)) and new[n] > 0 for n in _EXPERT_FIELDS):
        for name in _TOP_K_FIELDS:
            if name in fields and fields[name] is None:
                kw[name] = EXPERTS_PER_TOKEN
    if all(n in fields for n in ("mamba_expand", "mamba_n_heads", "mamba_d_head")) and hidden:
        kw["mamba_n_heads"] = fields["mamba_expand"] * hidden // new["mamba_d_head"]
    if fields.get("rope_parameters"):
        kw["rope_parameters"] = _shrink_rope(fields["rope_parameters"])
    if "is_decoder" in fields:
        kw["is_decoder"] = True  # encoder-style models (the BERT family) used as causal LMs
    if "add_cross_attention" in fields:
        kw["add_cross_attention"] = False
    for name in _DROPOUTS:
        if isinstance(fields.get(name), float) and fields[name] > 0:
            kw[name] = 0.0
    if _is_int(new.get("vocab_size")):
        kw.update(_shrink_token_ids(fields, new["vocab_size"]))

    # Per-layer lists (layer_types, mlp_layer_types, no_rope_layers, ...) as long as the
    # default layer count shrink to a representative; more layers when the pattern needs them.
    layer_field = next((n for n in _LAYER_FIELDS if _is_int(fields.get(n))), None)
    if layer_field and kw.get(layer_field, fields[layer_field]) != fields[layer_field]:
        old_layers, layers = fields[layer_field], kw[layer_field]
        per_layer = {n: list(v) for n, v in fields.items()
                     if isinstance(v, (list, tuple)) and len(v) == old_layers and n not in kw
                     and all(isinstance(x, (str, int, float, bool)) or x is None for x in v)}
        if per_layer:
            layers = max(layers, min(MAX_LAYERS, max(len(_distinct(v)) for v in per_layer.values())))
            kw[layer_field] = layers
            for name, value in per_layer.items():
                kw[name] = _representative(value, layers)
                base = name.replace("_per_layer", "")
                if base in _RULES:
                    kw[name] = [_RULES[base](v, fields) for v in kw[name]]
    kw.update(overrides)
    return type(default)(**kw)


def tiny_config(model_type):
    """The tiny config for `model_type`; raises Skip when the architecture cannot be judged."""
    from transformers import AutoConfig

    if model_type in SKIP:
        raise Skip(SKIP[model_type])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _shrink_config(AutoConfig.for_model(model_type), OVERRIDES.get(model_type))
