"""validate: the argument checks of the course's modules (RNN, projections, attention, encodings, blocks).

Hand-written (not generated from a chapter). Each check is named for what it guarantees and raises an
error that names the argument, what it got and what it needs (a learner who passes a wrong argument reads
what to change, not a traceback), so that a module's ``forward`` reads as the mathematics: one line,
``validate.attention_call(...)``, stands where thirty lines of checks would. Nothing here computes
attention; the modules that use these checks are the lesson.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn


def describe(x: object) -> str:
    """What ``x`` is, for an error message: a tensor's shape, dtype and device, or the type's name."""
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}, dtype {x.dtype}, on {x.device}"
    return type(x).__name__


def int_at_least(name: str, value: object, minimum: int = 1) -> None:
    """``value`` is an int (a bool is not a count) >= ``minimum``: TypeError for a non-int, ValueError below
    ``minimum``. The course's one check of a count or a size."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value}")


def sizes(**values: object) -> None:
    """Each keyword argument is a size, an int >= 1 (``int_at_least``, named by its keyword)."""
    for name, value in values.items():
        int_at_least(name, value)


def integer(name: str, value: object) -> None:
    """``value`` is an int of any sign (a seed), not a bool: ``int_at_least`` without a bound."""
    int_at_least(name, value, -math.inf)


def int_between(name: str, value: object, low: int, high: int) -> None:
    """``value`` is an int in low .. high, both included: TypeError for a non-int, ValueError outside."""
    integer(name, value)
    if not low <= value <= high:
        raise ValueError(f"{name} must be an int in {low}..{high}, got {value}")


def index(name: str, value: object, count: int) -> None:
    """``value`` is an int in 0 .. count - 1 (a rank among ``count`` ranks, a head among ``count`` heads):
    TypeError for a non-int, ValueError outside the range."""
    int_between(name, value, 0, count - 1)


def power_of_two(name: str, value: object, minimum: int = 1) -> None:
    """``value`` is a power of two >= ``minimum`` (a Triton block size)."""
    int_at_least(name, value, minimum)
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two, got {value}")


def probability(name: str, value: object) -> None:
    """``value`` is a number in [0, 1) (a dropout rate)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}")


def flag(name: str, value: object) -> None:
    """``value`` is True or False."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")


def attention_scale(scale: object, d_k: int) -> float:
    """The scale of the attention scores: ``scale`` itself when it is a finite number, 1/sqrt(d_k) when it is
    None (1 for d_k = 0, where every score is 0)."""
    if scale is None:
        return 1.0 / math.sqrt(d_k) if d_k else 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite number or None, got {scale!r}")
    return scale


def mask_fits(name: str, mask: torch.Tensor, scores: torch.Tensor, inputs: str = "scores") -> None:
    """``mask`` is on the device of ``scores`` (..., T_q, T_k) and broadcasts to their shape without adding or
    growing dimensions; ``inputs`` names what the scores were computed from, for the message."""
    if mask.device != scores.device:
        raise ValueError(f"{name} is on {mask.device} but {inputs} are on {scores.device}: move it with .to()")
    try:
        shape = torch.broadcast_shapes(mask.shape, scores.shape)
    except RuntimeError:
        shape = None
    if shape != scores.shape:
        raise ValueError(f"{name} of shape {tuple(mask.shape)} must broadcast to the scores' shape "
                         f"{tuple(scores.shape)} (..., T_q, T_k) without adding or growing dimensions")


def generator(name: str, value: object) -> None:
    """``value`` is a torch.Generator."""
    if not isinstance(value, torch.Generator):
        raise TypeError(f"{name} must be a torch.Generator, got {type(value).__name__}")


def split_heads_input(x: object, num_heads: object) -> None:
    """``x`` (..., T, d_model) can be cut into ``num_heads`` heads of d_model / num_heads features."""
    int_at_least("num_heads", num_heads)
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"split_heads: x must be a tensor of shape (..., T, d_model), got {got}")
    if x.size(-1) % num_heads:
        raise ValueError(
            f"split_heads: the last axis of x (d_model={x.size(-1)}) must be divisible by num_heads={num_heads}"
        )


def merge_heads_input(x: object) -> None:
    """``x`` is a tensor of heads (..., h, T, d_k)."""
    if not isinstance(x, torch.Tensor) or x.dim() < 3:
        got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"merge_heads: x must be a tensor of shape (..., h, T, d_k), got {got}")


def torch_masks(key_padding_mask: object, attn_mask: object, num_heads: object) -> None:
    """``nn.MultiheadAttention``'s masks: a boolean (B, T_k) ``key_padding_mask``; a boolean or float
    ``attn_mask`` (T_q, T_k) or (B*num_heads, T_q, T_k)."""
    int_at_least("num_heads", num_heads)
    if key_padding_mask is not None:
        if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
            got = key_padding_mask.dtype if isinstance(key_padding_mask, torch.Tensor) else type(key_padding_mask).__name__
            raise TypeError(f"key_padding_mask must be a boolean tensor (True = padding), got {got}")
        if key_padding_mask.dim() != 2:
            raise ValueError(f"key_padding_mask must have shape (B, T_k), got {tuple(key_padding_mask.shape)}")
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor) or not (attn_mask.dtype == torch.bool or attn_mask.is_floating_point()):
            got = attn_mask.dtype if isinstance(attn_mask, torch.Tensor) else type(attn_mask).__name__
            raise TypeError(f"attn_mask must be a boolean (True = ignore) or float (additive) tensor, got {got}")
        if attn_mask.dim() == 3 and attn_mask.size(0) % num_heads:
            raise ValueError(
                f"a 3-D attn_mask must have shape (B*num_heads, T_q, T_k); its first axis {attn_mask.size(0)} "
                f"is not a multiple of num_heads={num_heads}"
            )
        if attn_mask.dim() not in (2, 3):
            raise ValueError(f"attn_mask must have shape (T_q, T_k) or (B*h, T_q, T_k), got {tuple(attn_mask.shape)}")


def attention_config(
    d_model: object, num_heads: object, dropout: object, bias: object, batch_first: object, fused_qkv: object
) -> None:
    """A multi-head attention's constructor arguments: d_model splits into num_heads heads."""
    int_at_least("d_model", d_model)
    int_at_least("num_heads", num_heads)
    if d_model % num_heads:
        raise ValueError(
            f"d_model={d_model} must be divisible by num_heads={num_heads} (each head gets d_model / num_heads features)"
        )
    probability("dropout", dropout)
    for name, value in (("bias", bias), ("batch_first", batch_first), ("fused_qkv", fused_qkv)):
        flag(name, value)


def torch_attention(mha: object) -> None:
    """An ``nn.MultiheadAttention`` whose weights a ``MultiHeadAttention`` can hold."""
    if not isinstance(mha, nn.MultiheadAttention):
        raise TypeError(f"from_torch needs an nn.MultiheadAttention, got {type(mha).__name__}")
    if not mha._qkv_same_embed_dim:
        raise ValueError(
            f"from_torch supports kdim = vdim = embed_dim only, got kdim={mha.kdim}, vdim={mha.vdim}, "
            f"embed_dim={mha.embed_dim}"
        )
    if mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError("from_torch does not support add_bias_kv=True or add_zero_attn=True")


def _attention_inputs(query: object, key: object, value: object, d_model: int, batch_first: bool,
                      parameter: torch.Tensor) -> None:
    named = (("query", query),) if query is key and key is value else (("query", query), ("key", key), ("value", value))
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() not in (2, 3) or t.size(-1) != d_model:
            layout = "(B, T, d_model)" if batch_first else "(T, B, d_model)"
            raise ValueError(
                f"{name} must have shape {layout} or unbatched (T, d_model) with d_model={d_model}, got {tuple(t.shape)}"
            )
        if t.dim() != query.dim():
            raise ValueError(f"query and {name} must both be batched or both unbatched, got {query.dim()}-D and {t.dim()}-D")
        if t.dtype != parameter.dtype or t.device != parameter.device:
            raise TypeError(
                f"{name} is {t.dtype} on {t.device} but the module's parameters are {parameter.dtype} on "
                f"{parameter.device}; move one of them with .to(...)"
            )
    if len(named) == 3:
        batch_axis = 0 if batch_first else 1
        if query.dim() == 3 and not (query.size(batch_axis) == key.size(batch_axis) == value.size(batch_axis)):
            raise ValueError(
                f"query, key and value must have the same batch size, got shapes {tuple(query.shape)}, "
                f"{tuple(key.shape)}, {tuple(value.shape)} (batch_first={batch_first})"
            )
        seq_axis = -2 if query.dim() == 2 else 1 - batch_axis
        if key.size(seq_axis) != value.size(seq_axis):
            raise ValueError(f"key and value must have the same length, got {key.size(seq_axis)} and {value.size(seq_axis)}")


def _attention_masks(mask: object, key_padding_mask: object, query: torch.Tensor,
                     full: tuple[int, int, int, int], unbatched: bool) -> None:
    batch, t_k = full[0], full[3]
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
        if mask.dtype != torch.bool and not mask.is_floating_point():
            raise TypeError(
                f"mask must be boolean (True = may attend) or a float mask added to the scores, got {mask.dtype}; "
                "for a 0/1 mask use mask.bool()"
            )
        if mask.is_floating_point() and mask.dtype != query.dtype:
            raise TypeError(f"a float mask must have the query's dtype {query.dtype}, got {mask.dtype}")
        if mask.device != query.device:
            raise ValueError(f"mask is on {mask.device} but the query is on {query.device}")
        fits = mask.dim() <= 4 and all(m in (1, f) for m, f in zip(reversed(mask.shape), reversed(full)))
        if not fits:
            shown = full[1:] if unbatched else full
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to (B, h, T_q, T_k) = {shown}")
    if key_padding_mask is None:
        return
    if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
        raise TypeError(f"key_padding_mask must be a boolean tensor (True = padding), got {describe(key_padding_mask)}")
    expected = (t_k,) if unbatched else (batch, t_k)
    if tuple(key_padding_mask.shape) != expected or key_padding_mask.device != query.device:
        raise ValueError(
            f"key_padding_mask must have shape {'(T_k,)' if unbatched else '(B, T_k)'} = {expected} on {query.device}, "
            f"got {describe(key_padding_mask)}"
        )


def attention_call(
    module: nn.Module, query: object, key: object, value: object, mask: object, key_padding_mask: object,
    is_causal: object, need_weights: object, average_weights: object,
) -> bool:
    """Every argument of ``MultiHeadAttention.forward``; returns True when the inputs are unbatched (T, d_model).

    ``module`` gives d_model, num_heads, batch_first and the parameters' dtype and device.
    """
    if not isinstance(is_causal, bool) or not isinstance(need_weights, bool) or not isinstance(average_weights, bool):
        raise TypeError("is_causal, need_weights and average_weights must be True or False")
    _attention_inputs(query, key, value, module.d_model, module.batch_first, module.out_proj.weight)
    unbatched = query.dim() == 2
    if unbatched:
        batch, t_q, t_k = 1, query.size(0), key.size(0)
    elif module.batch_first:
        batch, t_q, t_k = query.size(0), query.size(1), key.size(1)
    else:
        batch, t_q, t_k = query.size(1), query.size(0), key.size(0)
    _attention_masks(mask, key_padding_mask, query, (batch, module.num_heads, t_q, t_k), unbatched)
    return unbatched


def even(name: str, value: object) -> None:
    """``value`` is a positive even int (a width whose features come in sin/cos pairs)."""
    int_at_least(name, value)
    if value % 2:
        raise ValueError(f"{name} must be even (the features come in sin/cos pairs), got {value}")


def positive_number(name: str, value: object) -> None:
    """``value`` is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def learned_positions_call(x: object, max_len: int, d_model: int) -> None:
    """``LearnedPositionalEncoding.forward``'s input: x (B, T, d_model) with T <= max_len, the table's rows
    (IndexError past them: a learned table has no vector for a position it never saw)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.size(-1) != d_model:
        raise ValueError(f"x must have shape (B, T, d_model={d_model}), got {describe(x)}")
    if x.size(1) > max_len:
        raise IndexError(f"a learned table has {max_len} positions; "
                         f"there is no vector for position {max_len} or later (T = {x.size(1)})")


# --- chapter 1's recurrent networks and chapter 2's projections --------------------------------------------

def like_weights(name: str, x: torch.Tensor, weight: torch.Tensor) -> None:
    """``x`` has the dtype and device of a module's ``weight`` (a matrix product refuses mixed ones)."""
    if x.dtype != weight.dtype or x.device != weight.device:
        raise TypeError(f"{name} must have the weights' dtype and device ({weight.dtype} on {weight.device}), "
                        f"got {x.dtype} on {x.device}: convert it with .to({weight.dtype}) (or the model with "
                        f".to(...))")


def rnn_cell_call(x_t: torch.Tensor, h_prev: torch.Tensor, d_x: int, d_h: int, weight: torch.Tensor) -> None:
    """``RNNCell.forward``'s inputs: x_t (B, d_x) and h_prev (B, d_h), both like the cell's ``weight``."""
    if x_t.dim() != 2 or x_t.size(1) != d_x:
        raise ValueError(f"x_t must have shape (B, d_x={d_x}), got {tuple(x_t.shape)}")
    if tuple(h_prev.shape) != (x_t.size(0), d_h):
        raise ValueError(f"h_prev must have shape (B={x_t.size(0)}, d_h={d_h}), got {tuple(h_prev.shape)}")
    like_weights("x_t", x_t, weight)
    like_weights("h_prev", h_prev, weight)


def rnn_call(x: object, weight: torch.Tensor) -> None:
    """``RNN.forward``'s input: x (B, N, d_x) with N >= 1, like the cell's ``weight`` (the cell checks d_x and h0)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"x must be a tensor of shape (B, N, d_x), got {getattr(x, 'shape', type(x).__name__)}")
    if x.size(1) == 0:
        raise ValueError("x must hold at least one time step (N >= 1), got N = 0; nn.RNN refuses it too")
    like_weights("x", x, weight)


def last_token_attention_call(tokens: object, max_len: int) -> None:
    """``LastTokenAttentionClassifier.forward``'s input: tokens (B, N) with 1 <= N <= max_len (one learned
    position vector per position)."""
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or not 1 <= tokens.size(1) <= max_len:
        got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(f"tokens must have shape (B, N) with 1 <= N <= {max_len}, got {got}")


def qkv_projection_call(x: object, d_model: int) -> None:
    """``QKVProjection.forward``'s input: x (..., T, d_model)."""
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.size(-1) != d_model:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must have shape (..., T, d_model={d_model}), got {got}")


# --- chapter 6's blocks and chapter 12's translator -------------------------------------------------------

def float_tensor(name: str, x: object) -> None:
    """``x`` is a floating-point tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def stream(name: str, x: object, d_model: int, dims: int | None = None) -> None:
    """``x`` is a floating-point tensor (..., d_model); with ``dims``, of exactly that many dimensions."""
    float_tensor(name, x)
    if dims is not None and x.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimensions (B, T, d_model), got shape {tuple(x.shape)}")
    if x.dim() == 0 or x.shape[-1] != d_model:
        raise ValueError(f"{name} must end in d_model={d_model}, got shape {tuple(x.shape)}")


def block_mask(name: str, mask: object) -> None:
    """``mask`` is None, or a boolean (True = may attend) or float (added to the scores) tensor."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"{name} must be boolean (True = may attend) or a float additive mask, got dtype {mask.dtype}")


def encoder_block_call(d_model: int, x: object, allowed: object) -> None:
    """``EncoderBlock.forward``'s inputs: x (B, T, d_model) and a mask or None."""
    stream("x", x, d_model, dims=3)
    block_mask("allowed", allowed)


def decoder_block_call(d_model: int, y: object, memory: object, self_allowed: object, memory_allowed: object) -> None:
    """``DecoderBlock.forward``'s inputs: y (B, T_dec, d_model), memory (B, T_enc, d_model) of y's batch, masks."""
    stream("y", y, d_model, dims=3)
    stream("memory", memory, d_model, dims=3)
    if memory.shape[0] != y.shape[0]:
        raise ValueError(f"memory must have y's batch size {y.shape[0]}, got shape {tuple(memory.shape)}")
    block_mask("self_allowed", self_allowed)
    block_mask("memory_allowed", memory_allowed)


def block_config(d_model: object, n_heads: object, d_ff: object, rates: dict[str, object], norm_first: object,
                 layer_norm_eps: object) -> None:
    """An encoder or decoder block's constructor arguments; ``rates`` maps each dropout's name to its rate."""
    for name, value in (("d_model", d_model), ("n_heads", n_heads), ("d_ff", d_ff)):
        int_at_least(name, value)
    for name, rate in rates.items():
        probability(name, rate)
    flag("norm_first", norm_first)
    positive_number("layer_norm_eps", layer_norm_eps)


def ffn_config(d_model: object, d_ff: object, activation: object, dropout: object, choices: dict) -> None:
    """A feed-forward network's constructor arguments; ``choices`` are the activations it knows."""
    int_at_least("d_model", d_model)
    int_at_least("d_ff", d_ff)
    probability("dropout", dropout)
    if activation not in choices:
        raise ValueError(f"activation must be one of {sorted(choices)}, got {activation!r}")


def token_ids(name: str, tokens: object, vocab_size: int | None = None) -> None:
    """``tokens`` is a (B, T) int64 tensor of ids in 0 .. vocab_size - 1."""
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"{name} must be a tensor of token ids, got {type(tokens).__name__}")
    if tokens.dim() != 2 or tokens.dtype != torch.long:
        raise ValueError(f"{name} must be a 2-D int64 tensor (batch, length) of token ids, got shape "
                         f"{tuple(tokens.shape)} and dtype {tokens.dtype}")
    if tokens.numel() and (tokens.min() < 0 or (vocab_size is not None and tokens.max() >= vocab_size)):
        raise ValueError(f"{name} holds ids outside 0..{vocab_size - 1 if vocab_size else '...'}: "
                         f"min {int(tokens.min())}, max {int(tokens.max())}")


def model_config(vocab_size: object, d_model: object, num_heads: object, d_ff: object, num_layers: object,
                 max_len: object, dropout: object) -> None:
    """A whole model's sizes (chapter 12's translator and language model): ints >= 1, d_model even (the
    sinusoids come in sin/cos pairs) and divisible by num_heads, dropout a probability."""
    sizes(vocab_size=vocab_size, d_model=d_model, num_heads=num_heads, d_ff=d_ff, num_layers=num_layers,
          max_len=max_len)
    if d_model % num_heads or d_model % 2:
        raise ValueError(f"d_model={d_model} must be even and divisible by num_heads={num_heads}")
    probability("dropout", dropout)


def single_token_id(name: str, value: object, vocab_size: int) -> None:
    """``value`` is one token id, an int in 0 .. vocab_size - 1 (e.g. the padding id)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab_size:
        raise ValueError(f"{name} must be a token id in 0..{vocab_size - 1}, got {value!r}")


def encoded_source(memory: object, src_allowed: object, batch: int, d_model: int) -> None:
    """A decoder's ``memory`` and ``src_allowed`` are what the encoder returned for a batch of ``batch`` sources."""
    if not isinstance(memory, torch.Tensor) or memory.dim() != 3 or memory.shape[0] != batch or memory.shape[2] != d_model:
        raise ValueError(f"memory must be encode's (B, T_src, d_model) = ({batch}, T_src, {d_model}) for tgt_in's batch "
                         f"of {batch}, got {describe(memory)}")
    expected = (batch, 1, 1, memory.shape[1])
    if not isinstance(src_allowed, torch.Tensor) or src_allowed.dtype != torch.bool or tuple(src_allowed.shape) != expected:
        raise ValueError(f"src_allowed must be encode's boolean mask of shape (B, 1, 1, T_src) = {expected}, "
                         f"got {describe(src_allowed)}")


# --- chapter 12's training loops, language model, KV cache and sampling ------------------------------------

ARCHITECTURE = ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "tied")  # what a trainer passes on


def translator_training(seed: object, steps: object, batch: object, label_smoothing: object, use_warmup: object,
                        snapshot_at: object, architecture: dict) -> None:
    """``train_translator``'s arguments; ``architecture`` may hold only Transformer's ARCHITECTURE keywords
    (the vocabulary and the padding id are the task's: another pad_id would mask the wrong token)."""
    int_at_least("seed", seed, 0)
    int_at_least("steps", steps)
    int_at_least("batch", batch)
    probability("label_smoothing", label_smoothing)
    flag("use_warmup", use_warmup)  # "no" would be truthy: warm-up on
    unknown = sorted(set(architecture) - set(ARCHITECTURE))
    if unknown:
        raise TypeError(f"train_translator got unexpected keyword arguments {unknown}: besides its own it takes "
                        f"only the Transformer's {', '.join(ARCHITECTURE)}")
    if not isinstance(snapshot_at, (tuple, list)) or not all(
            isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= steps for s in snapshot_at):
        raise ValueError(f"snapshot_at must be a tuple of steps in 1..{steps}, got {snapshot_at!r}")


def lm_training(ids: object, vocab_size: object, seed: object, steps: object, batch: object, context: object,
                warmup: object) -> None:
    """``train_gpt``'s arguments: ``ids`` a 1-D int64 tensor of ids below ``vocab_size``, longer than a window."""
    sizes(vocab_size=vocab_size, steps=steps, batch=batch, context=context, warmup=warmup)
    int_at_least("seed", seed, 0)
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.long or ids.numel() <= context + 1:
        raise ValueError(f"ids must be a 1-D tensor of int64 token ids longer than context + 1 = {context + 1}, "
                         f"got {describe(ids)}")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"ids holds ids outside 0..{vocab_size - 1}: min {int(ids.min())}, max {int(ids.max())}")


def lm_call(model: nn.Module, tokens: object, cache: object, explicit: object) -> None:
    """A language model's input: (B, T_new) token ids and, if given, a cache made for this model and batch,
    written under ``torch.no_grad()``, with room for the new positions."""
    token_ids("tokens", tokens, model.vocab_size)
    flag("explicit", explicit)
    start = 0
    if cache is not None:
        if not all(hasattr(cache, name) for name in ("k", "v", "length", "update")):  # chapter 12's KVCache
            raise TypeError(f"cache must be a KVCache (model.new_cache(batch)), got {type(cache).__name__}")
        weight = model.embed.weight
        expected = (model.num_layers, tokens.size(0), model.num_heads, model.d_model // model.num_heads)
        got = (*cache.k.shape[:3], cache.k.shape[4])
        if got != expected:
            raise ValueError(f"cache must hold (layers, batch, heads, d_k) = {expected} for this model and tokens' "
                             f"batch of {tokens.size(0)}, got {got}: make it with model.new_cache(batch)")
        if (cache.k.dtype, cache.k.device) != (weight.dtype, weight.device):
            raise ValueError(f"cache must have the model's dtype and device ({weight.dtype}, {weight.device}), got "
                             f"({cache.k.dtype}, {cache.k.device}): make it with model.new_cache(batch)")
        if torch.is_grad_enabled() and weight.requires_grad:
            raise RuntimeError("a KV cache is for generation: call the model under torch.no_grad() (the cache is "
                               "written in place, so no gradient could flow back through it)")
        start = cache.length
    if start + tokens.size(1) > model.max_len:
        raise ValueError(f"positions up to {start + tokens.size(1)} exceed max_len={model.max_len} "
                         f"({start} cached + {tokens.size(1)} new tokens)")


def block_cache(cache: object, layer: object, explicit: object) -> None:
    """A cached block is told which of the cache's layers is its own (a default would make every block
    write layer 0)."""
    flag("explicit", explicit)
    if cache is not None and layer is None:
        raise ValueError("layer must be given with a cache: the index of this block's layer in the cache "
                         "(every block writes its own layer)")


def cached_attention_call(cache: object, query: object, key: object, value: object, mask: object, is_causal: object,
                          key_padding_mask: object) -> None:
    """With a cache, attention is self-attention under the cache's own causal mask, and nothing else: a mask,
    padding mask or is_causal would be measured against the new tokens only, not the cached ones."""
    if cache is None:
        return
    if (key is not None and key is not query) or (value is not None and value is not query):
        raise ValueError("with a cache, CachedSelfAttention is self-attention only: pass the query alone")
    if mask is not None or key_padding_mask is not None or is_causal is not False:
        raise ValueError("with a cache, the cache's bottom-right causal mask is the only mask: mask, "
                         "key_padding_mask and is_causal would apply to the new tokens only (pass none of them)")


def sampling_call(logits: object, temperature: object, top_k: object, top_p: object) -> None:
    """``next_token``'s arguments: (B, V) float logits from which every row can draw a token, a finite
    temperature >= 0, top_k in 1..V or None, top_p in (0, 1] or None."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or not logits.is_floating_point():
        raise ValueError(f"logits must be a 2-D floating-point tensor (B, V), got {describe(logits)}")
    if torch.isnan(logits).any():
        raise ValueError(f"logits contain NaN ({int(torch.isnan(logits).sum())} of {logits.numel()} entries): "
                         "no token can be drawn from them")
    hopeless = torch.isneginf(logits).all(-1)  # (B,): every token ruled out
    if hopeless.any():
        raise ValueError(f"logits row {int(hopeless.nonzero()[0])} is -inf for every token: no token can be drawn "
                         "from it (was every token masked?)")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
            math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None:
        int_at_least("top_k", top_k)
        if top_k > logits.size(-1):
            raise ValueError(f"top_k must be an int in 1..{logits.size(-1)} (the vocabulary) or None, got {top_k}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be a number in (0, 1] or None, got {top_p!r}")


def generate_call(prompt: object, new_tokens: object, seed: object, use_cache: object) -> None:
    """``generate``'s arguments (the model checks the prompt's ids)."""
    int_at_least("new_tokens", new_tokens, 0)
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2 or prompt.size(1) < 1:
        raise ValueError(f"prompt must be a (batch, length >= 1) tensor of token ids, got {describe(prompt)}")
    int_at_least("seed", seed, 0)
    flag("use_cache", use_cache)
