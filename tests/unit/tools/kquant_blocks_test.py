#!/usr/bin/env python3
"""tools/scripts/kquant_blocks.py against the gguf package's own K-quant
dequantizers (ggml's layouts, written independently): each block read back
lies within a quantization step of the values it was written from."""
import os
import sys
import unittest

import gguf
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tools/scripts"))
import kquant_blocks  # noqa: E402

TYPES = {gguf.GGMLQuantizationType.Q4_K: 15, gguf.GGMLQuantizationType.Q5_K: 31,
         gguf.GGMLQuantizationType.Q6_K: 63}


def rows_to_quantize():
    """Gaussian rows, a row with a zero sub-block and an outlier, a constant
    row and an all-zero row."""
    rng = np.random.default_rng(3)
    rows = (rng.standard_normal((6, 512)) * 0.05).astype(np.float32)
    rows[1, 32:64] = 0.0
    rows[1, 300] = 2.0
    rows[2, :] = 0.25
    rows[3, :] = 0.0
    return rows


class KQuantBlocksTest(unittest.TestCase):
    def test_blocks_read_back_within_a_step(self):
        rows = rows_to_quantize()
        for quant_type, levels in TYPES.items():
            with self.subTest(type=quant_type.name):
                blocks = kquant_blocks.quantize(rows, quant_type)
                block_bytes = gguf.GGML_QUANT_SIZES[quant_type][1]
                self.assertEqual(blocks.shape, (rows.shape[0], rows.shape[1] // 256 * block_bytes))
                back = gguf.quants.dequantize(blocks, quant_type)
                self.assertFalse(np.isnan(back).any())
                # A step: the sub-block's range over its levels, plus the
                # rounding of its 6-bit (Q6_K: 8-bit) scale and min, at most
                # the super-block's largest value over 63.
                sub = 16 if quant_type == gguf.GGMLQuantizationType.Q6_K else 32
                spans = rows.reshape(rows.shape[0], -1, sub)
                span = np.maximum(np.abs(spans).max(axis=2), spans.max(axis=2) - np.minimum(spans.min(axis=2), 0))
                super_blocks = np.abs(rows.reshape(rows.shape[0], -1, 256)).max(axis=2)
                step = np.repeat(span / levels, sub, axis=1) + np.repeat(super_blocks / 63, 256, axis=1)
                self.assertTrue((np.abs(back - rows) <= step).all(),
                                f"largest excess over a step {np.max(np.abs(back - rows) - step):.3g}")
                np.testing.assert_array_equal(back[3], 0.0)

    def test_refuses_rows_of_partial_super_blocks(self):
        with self.assertRaisesRegex(ValueError, "multiple of 256"):
            kquant_blocks.quantize(np.zeros((2, 300), dtype=np.float32), gguf.GGMLQuantizationType.Q4_K)


if __name__ == "__main__":
    unittest.main()
