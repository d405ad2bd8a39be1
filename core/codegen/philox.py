"""Philox4x32-10 in numpy: the twin of the device generator in common.cuh.

The same (seed, item index, draw) gives the same numbers here and on the GPU, so
a CPU path can reproduce a GPU ensemble member exactly, and tests can check the
CUDA code (compiled as host code) against this and both against Random123's
known-answer vectors (Salmon et al., SC'11).
"""

from __future__ import annotations

import numpy as np

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(counter, key, rounds: int = 10) -> np.ndarray:
    """Philox4x32-R of counters (..., 4) with keys (..., 2), uint32 words; returns
    (..., 4) uint32. Broadcasts counter against key."""
    c = np.asarray(counter, dtype=np.uint64)
    k = np.asarray(key, dtype=np.uint64)
    if c.shape[-1:] != (4,) or k.shape[-1:] != (2,):
        raise ValueError(f"need counters (..., 4) and keys (..., 2), got {c.shape} and {k.shape}")
    shape = np.broadcast_shapes(c.shape[:-1], k.shape[:-1])
    c = np.broadcast_to(c, shape + (4,))
    k = np.broadcast_to(k, shape + (2,))
    c0, c1, c2, c3 = (c[..., i].copy() for i in range(4))
    k0, k1 = k[..., 0].copy(), k[..., 1].copy()
    for r in range(rounds):
        if r > 0:
            k0 = (k0 + np.uint64(W0)) & _MASK32
            k1 = (k1 + np.uint64(W1)) & _MASK32
        p0 = M0 * c0  # < 2**64: both factors are below 2**32
        p1 = M1 * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _MASK32,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _MASK32)
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def stream_words(seed: int, item, n_blocks: int, first_block: int = 0) -> np.ndarray:
    """The 32-bit words item(s) `item` draw from `sbmlgpu_rng_u32`: shape
    (len(item), 4 * n_blocks), in draw order."""
    items = np.atleast_1d(np.asarray(item, dtype=np.uint64))
    blocks = np.arange(first_block, first_block + n_blocks, dtype=np.uint64)
    counter = np.empty(items.shape + blocks.shape + (4,), dtype=np.uint64)
    counter[..., 0] = blocks & _MASK32
    counter[..., 1] = blocks >> np.uint64(32)
    counter[..., 2] = (items & _MASK32)[:, None]
    counter[..., 3] = (items >> np.uint64(32))[:, None]
    key = np.array([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF], dtype=np.uint64)
    return philox4x32(counter, key).reshape(items.size, 4 * n_blocks)


def u01_double(hi, lo) -> np.ndarray:
    """`sbmlgpu_u01_double`: (52-bit integer + 1/2) * 2**-52, in (0, 1)."""
    n = (np.asarray(hi, dtype=np.uint64) >> np.uint64(12) << np.uint64(32)) \
        | np.asarray(lo, dtype=np.uint64)
    return (n.astype(np.float64) + 0.5) * 2.0**-52


def u01_float(w) -> np.ndarray:
    """`sbmlgpu_u01_float`: (23-bit integer + 1/2) * 2**-23 in float32, in (0, 1)."""
    n = (np.asarray(w, dtype=np.uint32) >> np.uint32(9)).astype(np.float32)
    return (n + np.float32(0.5)) * np.float32(2.0**-23)


def uniforms(seed: int, item, count: int, precision: str = "double") -> np.ndarray:
    """The first `count` values of `sbmlgpu_rng_uniform` for each item (first_block 0)."""
    per_value = 2 if precision == "double" else 1
    n_blocks = -(-count * per_value // 4)
    words = stream_words(seed, item, n_blocks)[:, :count * per_value]
    if precision == "double":
        return u01_double(words[:, 0::2], words[:, 1::2])
    return u01_float(words)
