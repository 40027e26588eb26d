"""Tile grid, blending weights, the stitcher and slide-scale metrics, against NumPy references written here."""

from __future__ import annotations

import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.base import Backend, Capabilities, ImageSource
from segscope.core.errors import CancelledError, SegScopeError
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.slides.opencv_reader import ImageSlide
from segscope.core.wholeslide.evaluate import TilePlan, run_tiled
from segscope.core.wholeslide.metrics import array_reader, mask_at_scale, slide_metrics
from segscope.core.wholeslide.tiling import Stitched, Stitcher, blend_weights, stitched_bytes, tile_grid

MODEL = 16  # the double's model resolution


class MapDouble(Backend):
    """A backend whose per-tile map is known (`tile_map`). Counts the tiles it ran."""

    def __init__(self) -> None:
        self.capabilities = Capabilities("double", "test", (MODEL, MODEL), ("background", "defect"))
        self.calls = 0

    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        assert isinstance(image, np.ndarray) and roi is None
        self.calls += 1
        return InferenceResult(*tile_map(image), Roi.whole(image.shape[1], image.shape[0]),
                               (image.shape[1], image.shape[0]))

    def close(self) -> None:
        pass


def tile_map(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    blue = cv2.resize(pixels[..., 0], (MODEL, MODEL), interpolation=cv2.INTER_AREA).astype(np.float32) / 255
    p1 = 0.5 * blue + 0.5 * np.linspace(0, 1, MODEL, dtype=np.float32)  # a ramp in tile coordinates: seams
    probabilities = np.stack([1 - p1, p1], axis=-1).astype(np.float32)
    return probabilities, (p1 > 0.5).astype(np.uint8)


def slide(width: int = 100, height: int = 70, seed: int = 3) -> tuple[ImageSlide, np.ndarray]:
    image = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return ImageSlide(Path("slide.png"), image), image


# --- grid -----------------------------------------------------------------------------------------------


def test_grid_shifts_edge_tiles_inward_keeping_their_size() -> None:
    grid = tile_grid(Roi(0, 0, 100, 70), (40, 40), 10, (100, 70))
    # x: stride 30 -> 0, 30, then 60 would end at 100 = the edge; y: 0, then 30 ends at 70.
    assert [t.as_tuple() for t in grid.tiles[:3]] == [(0, 0, 40, 40), (30, 0, 70, 40), (60, 0, 100, 40)]
    assert (grid.columns, grid.rows, len(grid)) == (3, 2, 6)
    grid = tile_grid(Roi(0, 0, 100, 70), (40, 40), 0, (100, 70))  # x: 0, 40, 60 (shifted in); y: 0, 30
    assert [t.x0 for t in grid.tiles[:3]] == [0, 40, 60] and [t.y0 for t in grid.tiles[::3]] == [0, 30]
    assert all((t.width, t.height) == (40, 40) for t in grid.tiles)
    # A region smaller than a tile: one tile, moved inside the slide.
    assert tile_grid(Roi(90, 60, 100, 70), (40, 40), 0, (100, 70)).tiles == (Roi(60, 30, 100, 70),)
    assert grid.neighbours(0) == (False, False, True, True) and grid.neighbours(4) == (True, True, True, False)


def test_a_margin_widens_the_grid_past_the_slide_by_the_margin_only() -> None:
    """The overlap-tile grid covers the region widened by the margin (5 px): the tiles' inner parts (5 px in)
    cover the region exactly, and no tile reaches more than the margin past the slide."""
    grid = tile_grid(Roi(0, 0, 100, 70), (40, 40), 10, (100, 70), margin=5)
    # widened to -5..105 x -5..75; stride 30: x at -5, 25, 55 and 65 (flush with 105); y at -5, 25, 35
    assert [t.x0 for t in grid.tiles[:4]] == [-5, 25, 55, 65] and [t.y0 for t in grid.tiles[::4]] == [-5, 25, 35]
    assert all((t.width, t.height) == (40, 40) for t in grid.tiles)
    # A small region: one tile holding it with the margin around it, moved to reach at most 5 px past the slide.
    assert tile_grid(Roi(90, 60, 100, 70), (40, 40), 10, (100, 70), margin=5).tiles == (Roi(65, 35, 105, 75),)
    assert tile_grid(Roi(30, 20, 60, 50), (40, 40), 10, (100, 70), margin=5).tiles == (Roi(25, 15, 65, 55),)
    with pytest.raises(SegScopeError, match="^--overlap: .*half the overlap"):
        tile_grid(Roi(0, 0, 100, 70), (40, 40), 10, (100, 70), margin=6)


def test_the_default_plan_overlaps_by_twice_the_edge_effect() -> None:
    """2/15 of the tile (128 px of the demo model's 960 px input) is the edge effect: the margin, rounded up."""
    assert (TilePlan((1800, 1800)).overlap, TilePlan((1800, 1800)).margin) == (480, 240)
    assert (TilePlan((100, 100)).overlap, TilePlan((100, 100)).margin) == (28, 14)  # 13.3 up
    assert (TilePlan((100, 100), 10).margin, TilePlan((100, 100), 0).margin) == (5, 0)  # at most half the overlap
    assert TilePlan((960, 100)).margin == 25  # at most a quarter of the shorter side


@pytest.mark.parametrize("tile, overlap, field", [((0, 0), 0, "--tile"), ((40, 40), 40, "--overlap"),
                                                  ((40, 40), -1, "--overlap")])
def test_bad_grid_values_are_one_line_errors(tile, overlap, field) -> None:
    with pytest.raises(SegScopeError, match=f"^{field}: ") as caught:
        tile_grid(Roi(0, 0, 100, 70), tile, overlap, (100, 70))
    assert "\n" not in str(caught.value)


# --- weights --------------------------------------------------------------------------------------------


def test_linear_ramps_of_neighbours_sum_to_one_and_a_lone_tile_weighs_one() -> None:
    left = blend_weights("linear", (6, 1), 3, (False, False, True, False))[0]
    right = blend_weights("linear", (6, 1), 3, (True, False, False, False))[0]
    assert left.tolist() == [1, 1, 1, 0.75, 0.5, 0.25] and right.tolist() == [0.25, 0.5, 0.75, 1, 1, 1]
    assert (left[3:] + right[:3]).tolist() == [1, 1, 1]
    assert (blend_weights("linear", (5, 4), 3, (False,) * 4) == 1).all()


def test_gaussian_weights_follow_monai() -> None:
    weights = blend_weights("gaussian", (9, 5), 0)
    sigma_x, sigma_y = 9 * 0.125, 5 * 0.125
    gx = np.exp(-0.5 * ((np.arange(9) - 4) / sigma_x) ** 2)
    gy = np.exp(-0.5 * ((np.arange(5) - 2) / sigma_y) ** 2)
    expected = np.maximum(np.outer(gy, gx), 1e-3)  # both peaks are 1: the product is already normalised
    np.testing.assert_allclose(weights, expected, rtol=1e-6)
    assert weights.min() > 0


@pytest.mark.parametrize("blend", ["linear", "gaussian"])
@pytest.mark.parametrize("scale", [1.0, 0.5, 1.3])
def test_blended_weights_sum_to_one_everywhere_covered(blend: str, scale: float) -> None:
    """Tiles of a constant map stitch to exactly that map: the normalised weights sum to one, edge tiles too."""
    region, size = Roi(3, 5, 97, 70), (100, 70)
    grid = tile_grid(region, (30, 25), 7, size)
    stitcher = Stitcher(region, size, scale, 2, blend, 7)
    constant = np.broadcast_to(np.array([0.375, 0.625], np.float32), (MODEL, MODEL, 2))
    for index, tile in enumerate(grid.tiles):
        stitcher.add(InferenceResult(constant, np.ones((MODEL, MODEL), np.uint8), tile, size), grid.neighbours(index))
    stitched = stitcher.finish()
    assert stitched.covered.all() and stitched.argmax.shape == (int(65 * scale + 0.5), int(94 * scale + 0.5))  # half up
    np.testing.assert_allclose(stitched.probabilities[..., 1], 0.625, rtol=0, atol=1e-6)


# --- stitching against a reference ----------------------------------------------------------------------


def reference_stitch(image: np.ndarray, region: Roi, tiles: list[Roi], scale: float, overlap: int, margin: int,
                     columns: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Linear-ramp blending by hand in float64: each tile's map (of the slide mirrored past its edges, NumPy's
    "reflect") resized to its footprint, weighted (0 over the margin, a ramp over the rest of the overlap),
    summed; the seams map over the pixels each tile counts."""
    def out(v: float) -> int:
        return int(np.floor(v * scale + 0.5))

    height, width = out(region.height), out(region.width)
    total = np.zeros((height, width, 2))
    weight = np.zeros((height, width))
    fg_max, fg_min = np.full((height, width), -np.inf), np.full((height, width), np.inf)
    ramp, zero = out(overlap - 2 * margin), int(np.floor(margin * scale))
    padded = np.pad(image, ((margin, margin), (margin, margin), (0, 0)), mode="reflect")
    for index, tile in enumerate(tiles):
        row, column = divmod(index, columns)
        x0, y0 = out(tile.x0 - region.x0), out(tile.y0 - region.y0)
        x1, y1 = out(tile.x1 - region.x0), out(tile.y1 - region.y0)
        assert -margin <= tile.x0 and tile.x1 <= image.shape[1] + margin  # never past the mirrored margin
        probabilities, _ = tile_map(padded[tile.y0 + margin:tile.y1 + margin, tile.x0 + margin:tile.x1 + margin])
        p = cv2.resize(probabilities, (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR).astype(np.float64)

        def ramp1d(n: int, rise: bool, fall: bool) -> np.ndarray:
            w = np.ones(n)
            for k in range(n):
                for distance, ramped in ((k, rise), (n - 1 - k, fall)):
                    if distance < zero:
                        w[k] = 0
                    elif ramped and distance - zero < ramp:
                        w[k] = min(w[k], (distance - zero + 1) / (ramp + 1))
            return w

        w = np.outer(ramp1d(y1 - y0, row > 0, row < rows - 1), ramp1d(x1 - x0, column > 0, column < columns - 1))
        cx0, cy0, cx1, cy1 = max(x0, 0), max(y0, 0), min(x1, width), min(y1, height)
        piece, wp = p[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0], w[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
        total[cy0:cy1, cx0:cx1] += piece * wp[..., None]
        weight[cy0:cy1, cx0:cx1] += wp
        counted = np.where(wp > 0, piece[..., 1], np.nan)
        fg_max[cy0:cy1, cx0:cx1] = np.fmax(fg_max[cy0:cy1, cx0:cx1], counted)
        fg_min[cy0:cy1, cx0:cx1] = np.fmin(fg_min[cy0:cy1, cx0:cx1], counted)
    assert (weight > 0).all()  # every output pixel counted by some tile
    return total / weight[..., None], fg_max - fg_min


@pytest.mark.parametrize("margin", [0, None])  # plain blended tiles; the default: half the overlap (4 px) here
@pytest.mark.parametrize("region, scale", [(None, None), (Roi(7, 4, 91, 66), 0.45), (Roi(2, 25, 75, 70), 1.3)])
def test_stitched_output_equals_a_numpy_reference(region: Roi | None, scale: float | None, margin: int | None
                                                  ) -> None:
    reader, image = slide()
    backend = MapDouble()
    plan = TilePlan((32, 32), 8, "linear", scale, seams=True, **({} if margin is None else {"margin": margin}))
    assert plan.margin == (4 if margin is None else 0)  # the edge effect of 32 px tiles (5 px) is over 8 / 2
    stitched = run_tiled(backend, reader, plan, region)
    whole = region or Roi(0, 0, 100, 70)
    grid = tile_grid(whole, (32, 32), 8, (100, 70), margin=plan.margin)
    expected, seams = reference_stitch(image, whole, list(grid.tiles), scale or MODEL / 32, 8, plan.margin,
                                       grid.columns, grid.rows)
    assert backend.calls == len(grid) == grid.columns * grid.rows > 4
    np.testing.assert_allclose(stitched.probabilities, expected, rtol=0, atol=2e-6)
    assert stitched.seams is not None and stitched.covered.all()
    np.testing.assert_allclose(stitched.seams, seams, rtol=0, atol=2e-6)
    height, width = expected.shape[:2]  # what the finished arrays hold, known before the run
    per_pixel = 2 * 4 + 1 + 1 + 4  # float32 probabilities of 2 classes, classes, coverage, float32 seams
    assert stitched_bytes(whole, stitched.scale, 2, seams=True) == stitched.nbytes == height * width * per_pixel
    assert stitched.seams.max() > 0.05  # neighbours disagree somewhere on noise
    decided = np.abs(expected[..., 1] - 0.5) > 1e-5
    assert (stitched.argmax[decided] == (expected[..., 1] > 0.5)[decided]).all()


def test_output_pixels_map_to_slide_pixels() -> None:
    reader, _ = slide()
    stitched = run_tiled(MapDouble(), reader, TilePlan((32, 32), 0, output_scale=0.5), Roi(10, 20, 90, 60))
    assert stitched.argmax.shape == (20, 40)
    assert stitched.to_slide(Roi(0, 0, 40, 20)) == (10, 20, 90, 60)
    assert stitched.to_slide(Roi(3, 1, 4, 2)) == (16, 22, 18, 24)
    assert stitched.from_slide(Roi(16, 22, 18, 24)) == Roi(3, 1, 4, 2)


def test_a_crop_of_the_stitched_output_is_a_result_of_that_box() -> None:
    rng = np.random.default_rng(2)
    p1 = rng.random((100, 200)).astype(np.float32)  # region 400 x 200 slide px at scale 0.5
    probabilities = np.stack([1 - p1, p1], axis=-1)
    covered = np.ones((100, 200), bool)
    covered[90:, 190:] = False  # a corner no tile reached
    stitched = Stitched(Roi(100, 50, 500, 250), 0.5, (640, 480), probabilities, (p1 > 0.5).astype(np.uint8),
                        None, covered)
    crop = stitched.crop(Roi(200, 100, 300, 150))
    assert crop is not None and crop.roi == Roi(200, 100, 300, 150) and crop.image_size == (640, 480)
    # slide x 200..300, y 100..150 -> output x (200 - 100) / 2 .. (300 - 100) / 2, y (100 - 50) / 2 .. 50
    np.testing.assert_array_equal(crop.probabilities, probabilities[25:50, 50:100])
    np.testing.assert_array_equal(crop.argmax, p1[25:50, 50:100] > 0.5)
    assert stitched.crop(Roi(50, 100, 150, 150)) is None  # leaves the stitched region
    assert stitched.crop(Roi(400, 200, 500, 250)) is None  # meets the corner no tile reached
    foreground = stitched.foreground()
    np.testing.assert_allclose(foreground[:90], p1[:90], rtol=0, atol=1e-6)  # 1 - p(background)
    assert (foreground[90:, 190:] == 0).all()


def test_a_canvas_beyond_the_memory_bound_is_refused_naming_the_bytes_and_the_option() -> None:
    with pytest.raises(SegScopeError) as caught:
        Stitcher(Roi(0, 0, 100_000, 80_000), (100_000, 80_000), 0.5, 2, max_bytes=1 << 30)
    message = str(caught.value)
    needed = 50_000 * 40_000 * (3 * 4 + 1)  # two classes + the weights, float32, and the argmax
    assert f"{needed:,} bytes" in message and "--output-scale" in message and "\n" not in message


def test_cancel_stops_within_one_tile() -> None:
    reader, _ = slide()
    backend, cancel, seen = MapDouble(), threading.Event(), []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if done == 2:
            cancel.set()

    # Progress counts tiles blended in, one behind the model (blending overlaps the next tile's inference):
    # set at 2 blended, the run stops before a fourth tile is started (of 5 x 3: 108 x 78 px with the margins).
    with pytest.raises(CancelledError, match="after 3/15 tiles"):
        run_tiled(backend, reader, TilePlan((32, 32), 8), None, progress, cancel)
    assert seen == [(1, 15), (2, 15)] and backend.calls == 3


# --- slide-scale metrics --------------------------------------------------------------------------------


def full_array_metrics(probabilities: np.ndarray, argmax: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    onehot = np.stack([labels == 0, labels == 1], axis=-1).astype(np.float64)
    p = probabilities.astype(np.float64)
    soft = 2 * (p * onehot).sum() / ((p * p).sum() + onehot.sum() + 1e-6)
    tp = int(((argmax == 1) & (labels == 1)).sum())
    fp = int(((argmax == 1) & (labels == 0)).sum())
    fn = int(((argmax == 0) & (labels == 1)).sum())
    return {"soft_dice": soft, "dice_1": 2 * tp / (2 * tp + fp + fn), "iou_1": tp / (tp + fp + fn),
            "precision": tp / (tp + fp), "recall": tp / (tp + fn)}


@pytest.mark.parametrize("scale", [1.0, 0.37])
def test_slide_metrics_equal_full_array_metrics(scale: float) -> None:
    reader, _ = slide()
    mask = np.zeros((70, 100), np.uint8)
    cv2.ellipse(mask, (40, 30), (30, 18), 20.0, 0, 360, 255, -1)
    stitched = run_tiled(MapDouble(), reader, TilePlan((32, 32), 8, "gaussian", scale))
    metrics = slide_metrics(stitched, array_reader(mask), (100, 70))
    height, width = stitched.argmax.shape
    truth = mask if scale == 1.0 else cv2.resize(mask, (width, height), interpolation=cv2.INTER_NEAREST)
    expected = full_array_metrics(stitched.probabilities, stitched.argmax, (truth > 127).astype(np.uint8))
    assert metrics.soft_dice == pytest.approx(expected["soft_dice"], rel=1e-9)
    assert metrics.dice[1] == pytest.approx(expected["dice_1"], rel=1e-12)
    assert metrics.iou[1] == pytest.approx(expected["iou_1"], rel=1e-12)
    assert (metrics.precision, metrics.recall) == pytest.approx((expected["precision"], expected["recall"]))
    with pytest.raises(SegScopeError, match="mask is 99x70 but the slide is 100x70"):
        slide_metrics(stitched, array_reader(mask[:, :99]), (99, 70))


def test_the_mask_is_sampled_as_opencv_nearest_a_band_at_a_time() -> None:
    mask = np.random.default_rng(5).integers(0, 256, (301, 457), dtype=np.uint8)
    region = Roi(11, 7, 440, 290)
    expected = cv2.resize(mask[7:290, 11:440], (173, 97), interpolation=cv2.INTER_NEAREST)
    reads: list[Roi] = []

    def read(box: Roi) -> np.ndarray:
        reads.append(box)
        return mask[box.y0:box.y1, box.x0:box.x1]

    assert (mask_at_scale(read, region, (173, 97), band_pixels=429 * 10) == expected).all()
    assert len(reads) > 5 and all(box.height <= 10 for box in reads)  # never more than a band in memory
