"""ggml's K-quant block layouts (Q4_K, Q5_K, Q6_K) written from f32 rows with
numpy, for test models whose matrices are K-quants: the gguf package
(0.19) quantizes to Q8_0 but not to these.

The choice of each block's scales is a plain one (every sub-block's range
split evenly; the super-block's factors the largest sub-block's over 63 or
127), not llama.cpp's searched one: the layouts are ggml's exactly, the
rounding somewhat coarser. `quantize(rows, type)` returns uint8 rows of whole
blocks, for GGUFWriter.add_tensor(..., raw_dtype=type).
"""

import gguf
import numpy as np

SUPER_BLOCK = 256


def _half(values):
    """`values` rounded to f16, and that f16's value back as f32."""
    halves = values.astype(np.float16)
    return halves, halves.astype(np.float32)


def _divide(numerator, denominator):
    """numerator / denominator, and 0 where the denominator is 0."""
    safe = np.where(denominator == 0, 1, denominator)
    return np.where(denominator == 0, 0, numerator / safe)


def _pack_scales_and_mins(scales, mins):
    """Eight 6-bit scales and mins per block as ggml's 12 bytes
    (get_scale_min_k4's inverse)."""
    out = np.zeros(scales.shape[:-1] + (12,), dtype=np.uint8)
    for j in range(4):
        out[..., j] = (scales[..., j] & 63) | ((scales[..., j + 4] >> 4) << 6)
        out[..., j + 4] = (mins[..., j] & 63) | ((mins[..., j + 4] >> 4) << 6)
        out[..., j + 8] = (scales[..., j + 4] & 0xF) | ((mins[..., j + 4] & 0xF) << 4)
    return out


def _scaled_min(blocks, levels):
    """Q4_K / Q5_K's quantization of blocks [n, 256]: per 32-value sub-block
    x ~ d * scale * q - dmin * min with q in 0..levels; returns (d, dmin as
    f16, scales, mins, q)."""
    sub = blocks.reshape(blocks.shape[0], 8, 32)
    low = np.minimum(sub.min(axis=2), 0.0)
    sub_scale = (sub.max(axis=2) - low) / levels
    d_half, d = _half(sub_scale.max(axis=1) / 63)
    dmin_half, dmin = _half((-low).max(axis=1) / 63)
    scales = np.clip(np.rint(_divide(sub_scale, d[:, None])), 0, 63).astype(np.int32)
    mins = np.clip(np.rint(_divide(-low, dmin[:, None])), 0, 63).astype(np.int32)
    step = d[:, None] * scales
    q = np.rint(_divide(sub + (dmin[:, None] * mins)[:, :, None], step[:, :, None]))
    q = np.clip(q, 0, levels).astype(np.uint8).reshape(blocks.shape[0], SUPER_BLOCK)
    return d_half, dmin_half, scales, mins, q


def _q4_k(blocks):
    d, dmin, scales, mins, q = _scaled_min(blocks, 15)
    qs = np.zeros((blocks.shape[0], 128), dtype=np.uint8)
    for g in range(4):
        qs[:, 32 * g:32 * g + 32] = q[:, 64 * g:64 * g + 32] | (q[:, 64 * g + 32:64 * g + 64] << 4)
    return np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2),
                           _pack_scales_and_mins(scales, mins), qs], axis=1)


def _q5_k(blocks):
    d, dmin, scales, mins, q = _scaled_min(blocks, 31)
    qs = np.zeros((blocks.shape[0], 128), dtype=np.uint8)
    qh = np.zeros((blocks.shape[0], 32), dtype=np.uint8)
    for g in range(4):
        first, second = q[:, 64 * g:64 * g + 32], q[:, 64 * g + 32:64 * g + 64]
        qs[:, 32 * g:32 * g + 32] = (first & 0xF) | ((second & 0xF) << 4)
        qh |= ((first >> 4) << (2 * g)) | ((second >> 4) << (2 * g + 1))
    return np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2),
                           _pack_scales_and_mins(scales, mins), qh, qs], axis=1)


def _q6_k(blocks):
    """Per 16-value sub-block x ~ d * scale * (q - 32), q in 0..63, int8
    scales."""
    sub = blocks.reshape(blocks.shape[0], 16, 16)
    sub_scale = np.abs(sub).max(axis=2) / 31
    d_half, d = _half(sub_scale.max(axis=1) / 127)
    scales = np.clip(np.rint(_divide(sub_scale, d[:, None])), -128, 127).astype(np.int8)
    step = d[:, None] * scales.astype(np.float32)
    q = np.clip(np.rint(_divide(sub, step[:, :, None])) + 32, 0, 63).astype(np.uint8)
    q = q.reshape(blocks.shape[0], SUPER_BLOCK)
    ql = np.zeros((blocks.shape[0], 128), dtype=np.uint8)
    qh = np.zeros((blocks.shape[0], 64), dtype=np.uint8)
    for n in range(2):
        q1, q2, q3, q4 = (q[:, 128 * n + 32 * k:128 * n + 32 * k + 32] for k in range(4))
        ql[:, 64 * n:64 * n + 32] = (q1 & 0xF) | ((q3 & 0xF) << 4)
        ql[:, 64 * n + 32:64 * n + 64] = (q2 & 0xF) | ((q4 & 0xF) << 4)
        qh[:, 32 * n:32 * n + 32] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)
    return np.concatenate([ql, qh, scales.view(np.uint8), d_half.view(np.uint8).reshape(-1, 2)], axis=1)


QUANTIZERS = {gguf.GGMLQuantizationType.Q4_K: _q4_k, gguf.GGMLQuantizationType.Q5_K: _q5_k,
              gguf.GGMLQuantizationType.Q6_K: _q6_k}


def quantize(rows, quant_type):
    """rows [n, cols] (cols a multiple of 256) as uint8 rows of `quant_type`
    blocks."""
    rows = np.asarray(rows, dtype=np.float32)
    if rows.ndim != 2 or rows.shape[1] % SUPER_BLOCK:
        raise ValueError(f"K-quant rows need a multiple of {SUPER_BLOCK} columns, not shape {rows.shape}")
    blocks = QUANTIZERS[quant_type](rows.reshape(-1, SUPER_BLOCK))
    return np.ascontiguousarray(blocks.reshape(rows.shape[0], -1))
