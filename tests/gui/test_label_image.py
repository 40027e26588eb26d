"""Labels drawn smaller keep every foreground pixel: each screen pixel shows its block's largest code."""

from __future__ import annotations

import numpy as np
import pytest

from segscope.gui.widgets.label_image import max_downsample


def block_max(labels: np.ndarray, fy: int, fx: int) -> np.ndarray:
    """The reference: a loop over the blocks (edge blocks smaller)."""
    h, w = labels.shape
    out = np.zeros((-(-h // fy), -(-w // fx)), labels.dtype)
    for by in range(out.shape[0]):
        for bx in range(out.shape[1]):
            out[by, bx] = labels[by * fy:(by + 1) * fy, bx * fx:(bx + 1) * fx].max()
    return out


@pytest.mark.parametrize("shape, fy, fx", [((37, 53), 4, 4), ((40, 40), 2, 5), ((31, 17), 7, 3), ((9, 9), 1, 1)])
def test_each_block_shows_its_largest_code(shape, fy, fx):
    rng = np.random.default_rng(sum(shape) + fy * 10 + fx)
    labels = np.where(rng.random(shape) < 0.05, rng.integers(1, 4, shape), 0).astype(np.uint8)
    labels[-1, -1] = 3  # a lone pixel in the corner block survives
    np.testing.assert_array_equal(max_downsample(labels, fy, fx), block_max(labels, fy, fx))
