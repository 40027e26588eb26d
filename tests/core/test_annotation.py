"""The mask editor: exact pixels of each tool, undo/redo, dirty state, history memory, saving and recovery."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.compat import pairwise
from segscope.core.dataset.truth import backup_mask_path, corrected_mask_path, default_mask_path
from segscope.core.editing.annotation import Clip, MaskEditor, allowed_map, prediction_labels
from segscope.core.editing.files import (
    discard_recovery,
    find_each_recoveries,
    find_recovery,
    load_recovery,
    recovery_path,
    save_mask,
    write_recovery,
)
from segscope.core.errors import SegScopeError
from segscope.core.files.fileio import read_mask
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi

H, W = 150, 200


def reference_stroke(shape: tuple[int, int], points: list[tuple[int, int]], radius: int, pad: int = 64) -> np.ndarray:
    """The stroke drawn on a padded full-size canvas (no boxes, no clipping), cropped back: bool."""
    canvas = np.zeros((shape[0] + 2 * pad, shape[1] + 2 * pad), np.uint8)
    shifted = [(x + pad, y + pad) for x, y in points]
    for a, b in pairwise(shifted):
        cv2.line(canvas, a, b, 1, max(2 * radius, 1))
    for p in shifted:
        cv2.circle(canvas, p, radius, 1, -1)
    return canvas[pad:-pad, pad:-pad].astype(bool)


def distance_to_polyline(shape: tuple[int, int], points: list[tuple[int, int]]) -> np.ndarray:
    yy, xx = np.mgrid[: shape[0], : shape[1]].astype(np.float64)
    best = np.full(shape, np.inf)
    for (x0, y0), (x1, y1) in zip(points, points[1:] or points):
        dx, dy = x1 - x0, y1 - y0
        t = np.clip(((xx - x0) * dx + (yy - y0) * dy) / max(dx * dx + dy * dy, 1e-12), 0, 1)
        best = np.minimum(best, np.hypot(xx - (x0 + t * dx), yy - (y0 + t * dy)))
    return best


def box_of(changed: np.ndarray) -> Roi:
    ys, xs = np.nonzero(changed)
    return Roi(int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)


def make_result(probabilities: np.ndarray, roi: Roi, image_size: tuple[int, int]) -> InferenceResult:
    return InferenceResult(probabilities.astype(np.float32), probabilities.argmax(-1).astype(np.uint8), roi,
                           image_size, backend="embedded")


def test_stroke_paints_exactly_the_round_capped_polyline() -> None:
    editor = MaskEditor(np.zeros((H, W), np.uint8))
    points = [(20, 30), (80, 40), (120, 100)]
    box = editor.stroke(points, 6, 255)
    painted = editor.mask == 255
    assert np.array_equal(painted, reference_stroke((H, W), points, 6))
    # The geometry, independent of OpenCV: everything well inside the capsule painted, nothing well outside.
    distance = distance_to_polyline((H, W), points)
    assert painted[distance <= 6].all() and not painted[distance > 6.75].any()
    assert set(np.unique(editor.mask)) == {0, 255}
    assert box == box_of(painted)


def test_stroke_clipped_at_the_borders_and_fully_outside() -> None:
    editor = MaskEditor(np.zeros((H, W), np.uint8))
    points = [(-5, 10), (30, -3), (W + 4, H - 2)]
    editor.stroke(points, 8, 255)
    assert np.array_equal(editor.mask == 255, reference_stroke((H, W), points, 8))
    assert editor.stroke([(-50, -50), (-30, -40)], 5, 255) is None
    assert editor.stroke([], 5, 255) is None


def test_single_point_stroke_is_a_disc_and_eraser_clears() -> None:
    editor = MaskEditor(np.full((H, W), 255, np.uint8))
    box = editor.stroke([(50, 60)], 4, 0)
    erased = editor.mask == 0
    assert np.array_equal(erased, reference_stroke((H, W), [(50, 60)], 4))
    assert box == Roi(46, 56, 55, 65)
    assert erased.sum() == np.count_nonzero(distance_to_polyline((H, W), [(50, 60)]) <= 4.0)


def test_polygon_fills_inside_and_edges_only() -> None:
    editor = MaskEditor(np.zeros((H, W), np.uint8))
    points = [(10, 10), (90, 20), (60, 80), (15, 60)]
    box = editor.polygon(points, 255)
    reference = np.zeros((H, W), np.uint8)
    cv2.fillPoly(reference, [np.array(points, np.int32)], 1)
    assert np.array_equal(editor.mask == 255, reference.astype(bool))
    assert box == Roi(10, 10, 91, 81)
    contour = np.array(points, np.float32)
    for x, y in [(40, 40), (89, 21), (100, 100), (5, 5)]:
        inside = cv2.pointPolygonTest(contour, (x, y), False) >= 0
        assert (editor.mask[y, x] == 255) == inside
    assert editor.polygon([(1, 1), (5, 5)], 255) is None


def bfs_fill(mask: np.ndarray, seed: tuple[int, int]) -> np.ndarray:
    """4-connected region of the seed's value, by breadth-first search (the independent reference)."""
    h, w = mask.shape
    region = np.zeros_like(mask, bool)
    x, y = seed
    queue, value = deque([(x, y)]), mask[y, x]
    region[y, x] = True
    while queue:
        x, y = queue.popleft()
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nx < w and 0 <= ny < h and not region[ny, nx] and mask[ny, nx] == value:
                region[ny, nx] = True
                queue.append((nx, ny))
    return region


def test_fill_is_4_connected_and_does_not_leak_through_a_diagonal() -> None:
    mask = np.zeros((40, 50), np.uint8)
    for i in range(40):
        mask[i, 5 + i] = 255  # a one-pixel diagonal: 8-connected gaps that 4-connectivity may not cross
    cv2.circle(mask, (10, 30), 3, 255, -1)
    editor = MaskEditor(mask)
    box = editor.fill((40, 5), 255)
    expected = mask.copy()
    expected[bfs_fill(mask, (40, 5))] = 255
    assert np.array_equal(editor.mask, expected)
    assert box == box_of(editor.mask != mask)
    assert editor.mask[39, 0] == 0  # the other side of the diagonal stays
    assert editor.fill((40, 5), 255) is None  # already that value
    assert editor.fill((500, 5), 255) is None


def test_probability_aware_brush_and_fill_paint_only_where_allowed() -> None:
    rng = np.random.default_rng(1)
    probability = cv2.GaussianBlur(rng.random((H, W)).astype(np.float32), (0, 0), 4)
    allowed = probability >= np.median(probability)
    whole = Clip(Roi.whole(W, H), allowed)
    editor = MaskEditor(np.zeros((H, W), np.uint8))
    points = [(30, 30), (170, 120)]
    editor.stroke(points, 15, 255, whole)
    assert np.array_equal(editor.mask == 255, reference_stroke((H, W), points, 15) & allowed)
    assert 0 < np.count_nonzero(editor.mask) < np.count_nonzero(reference_stroke((H, W), points, 15))

    filler = MaskEditor(np.zeros((H, W), np.uint8))
    seed = tuple(int(v) for v in np.argwhere(allowed)[0][::-1])
    filler.fill(seed, 255, whole)
    expected = bfs_fill(np.where(allowed, 0, 1).astype(np.uint8), seed)  # connected within the allowed pixels
    assert np.array_equal(filler.mask == 255, expected)
    assert filler.fill(tuple(int(v) for v in np.argwhere(~allowed)[0][::-1]), 255, whole) is None
    with pytest.raises(SegScopeError, match="clip box"):
        editor.stroke(points, 3, 255, Clip(Roi.whole(W, H), allowed[:10]))
    with pytest.raises(SegScopeError, match="clip box"):
        editor.stroke(points, 3, 255, Clip(Roi(0, 0, W + 1, H)))


@pytest.mark.parametrize("with_map", [True, False], ids=["box and map", "box only"])
def test_a_clip_paints_exactly_what_the_same_clip_drawn_slide_sized_allows(with_map: bool) -> None:
    rng = np.random.default_rng(4)
    box = Roi(40, 25, 170, 130)
    inside = cv2.GaussianBlur(rng.random((box.height, box.width)).astype(np.float32), (0, 0), 3) >= 0.5
    clip = Clip(box, inside if with_map else None)
    allowed = np.zeros((H, W), bool)  # the reference: the clip as a slide-sized map
    allowed[box.y0:box.y1, box.x0:box.x1] = inside if with_map else True
    mask = np.zeros((H, W), np.uint8)
    cv2.circle(mask, (60, 40), 20, 255, -1)
    cv2.circle(mask, (160, 120), 30, 255, -1)
    editor = MaskEditor(mask)
    points = [(10, 10), (120, 140), (190, 60)]

    editor.stroke(points, 12, 255, clip)
    expected = np.where(reference_stroke((H, W), points, 12) & allowed, 255, mask)
    assert np.array_equal(editor.mask, expected)
    lasso = np.zeros((H, W), np.uint8)
    cv2.fillPoly(lasso, [np.array(points, np.int32)], 1)
    editor.polygon(points, 0, clip)
    expected = np.where(lasso.astype(bool) & allowed, 0, expected)
    assert np.array_equal(editor.mask, expected)
    seed = tuple(int(v) for v in np.argwhere(allowed & (expected == 0))[len(expected) // 2][::-1])
    editor.fill(seed, 128, clip)
    region = bfs_fill(np.where(allowed, expected, 7).astype(np.uint8), seed)  # 7: a value the mask has not
    assert region.sum() > 50
    expected = np.where(region, 128, expected)
    assert np.array_equal(editor.mask, expected)
    assert editor.fill((5, 5), 255, clip) is None  # outside the box
    while editor.undo() is not None:
        pass
    assert np.array_equal(editor.mask, mask)


def random_edits(editor: MaskEditor, rng: np.random.Generator, count: int) -> list[np.ndarray]:
    """Apply `count` mixed edits; returns the mask after each (index 0 = before any)."""
    states = [editor.mask.copy()]
    h, w = editor.shape
    while len(states) <= count:
        tool = rng.integers(4)
        value = int(rng.choice([0, 255]))
        if tool == 0:
            box = editor.stroke([tuple(rng.integers(0, (w, h))) for _ in range(3)], int(rng.integers(1, 12)), value)
        elif tool == 1:
            box = editor.polygon([tuple(rng.integers(0, (w, h))) for _ in range(5)], value)
        elif tool == 2:
            box = editor.fill(tuple(rng.integers(0, (w, h))), value)
        else:
            editor.begin_edit()
            for _ in range(4):
                editor.stroke([tuple(rng.integers(0, (w, h))) for _ in range(2)], 4, value)
            box = editor.end_edit()
        if box is not None:
            states.append(editor.mask.copy())
    return states


def test_undo_and_redo_restore_every_state_exactly() -> None:
    editor = MaskEditor(np.zeros((H, W), np.uint8))
    states = random_edits(editor, np.random.default_rng(7), 25)
    for state in reversed(states[:-1]):
        box = editor.undo()
        assert box is not None and np.array_equal(editor.mask, state)
    assert editor.undo() is None and not editor.can_undo
    for state in states[1:]:
        assert editor.redo() is not None and np.array_equal(editor.mask, state)
    assert editor.redo() is None
    editor.undo()
    editor.undo()
    assert editor.can_redo
    editor.stroke([(3, 3)], 2, 255 if editor.mask[3, 3] == 0 else 0)
    assert not editor.can_redo and editor.redo() is None


def test_an_editor_in_place_edits_the_given_array_and_reverts_it_exactly() -> None:
    given = np.zeros((H, W), np.uint8)
    cv2.circle(given, (100, 70), 40, 255, -1)
    original = given.copy()
    editor = MaskEditor(given, copy=False)
    assert editor.mask is given and editor.untouched
    states = random_edits(editor, np.random.default_rng(11), 12)
    assert not np.array_equal(given, original) and np.array_equal(given, states[-1]) and not editor.untouched
    editor.undo()
    editor.undo()
    editor.begin_edit()
    editor.stroke([(10, 10), (190, 140)], 9, 0)  # an open drag is reverted too
    editor.revert()
    assert editor.mask is given and np.array_equal(given, original) and editor.untouched
    assert MaskEditor(original).mask is not original  # the default editor copies


def test_a_snapshot_taken_while_another_thread_edits_is_one_state_of_the_mask(monkeypatch) -> None:
    """The snapshot thread copies row by row while the editing thread paints; every snapshot must equal the
    mask at one moment (one of the states the edits went through), never a mix of two."""
    monkeypatch.setattr("segscope.core.editing.annotation.SNAPSHOT_ROWS", 1)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, to interleave the copy and the edits
    try:
        editor = MaskEditor(np.zeros((300, 200), np.uint8))
        states = {editor.mask.tobytes()}  # (the turns repeat them: at most 121)
        snapshots: list[bytes] = []
        done = threading.Event()

        def take() -> None:
            while not done.is_set():
                snapshots.append(editor.snapshot().tobytes())

        taker = threading.Thread(target=take)
        taker.start()
        deadline = time.monotonic() + 30
        i = 0
        # Full-height strokes (a torn copy would mix two of them), painted then erased in turns, until the taker has
        # taken a few snapshots meanwhile (on a loaded machine it may not run at all during the first 60).
        while i < 60 or (len(snapshots) <= 5 and time.monotonic() < deadline):
            x = 3 * (i % 60) + 5
            editor.stroke([(x, 0), (x, 299)], 1, 0 if i // 60 % 2 else 255)
            states.add(editor.mask.tobytes())
            i += 1
        done.set()
        taker.join()
    finally:
        sys.setswitchinterval(switch)
    assert len(snapshots) > 5 and all(snapshot in states for snapshot in snapshots)


def test_undo_returns_the_box_the_edit_changed() -> None:
    editor = MaskEditor(np.zeros((H, W), np.uint8))
    box = editor.stroke([(40, 40), (60, 50)], 5, 255)
    assert editor.undo() == box and not editor.mask.any()
    assert editor.redo() == box


def test_a_drag_is_one_undo_step_and_paint_then_erase_is_none() -> None:
    editor = MaskEditor(np.zeros((H, W), np.uint8))
    editor.begin_edit()
    boxes = [editor.stroke([(20 + 10 * i, 30), (30 + 10 * i, 35)], 4, 255) for i in range(8)]
    assert all(b is not None for b in boxes) and editor.dirty and editor.can_undo
    drawn = editor.mask.copy()
    total = editor.end_edit()
    assert total == box_of(drawn > 0)
    assert editor.undo() == total and not editor.mask.any() and not editor.can_undo
    assert editor.redo() == total and np.array_equal(editor.mask, drawn)

    editor.begin_edit()
    editor.stroke([(100, 100)], 6, 255)
    editor.stroke([(100, 100)], 6, 0)
    before = editor.history_bytes
    assert editor.end_edit() is None and editor.history_bytes == before
    editor.undo()  # undoes the first drag, not the empty one
    assert not editor.mask.any()


def test_dirty_tracks_the_saved_state() -> None:
    editor = MaskEditor(np.zeros((H, W), np.uint8))
    assert not editor.dirty
    assert editor.fill((0, 0), 0) is None and not editor.dirty  # a no-op is no edit
    editor.stroke([(10, 10)], 3, 255)
    assert editor.dirty
    editor.undo()
    assert not editor.dirty  # back to the loaded content
    editor.redo()
    editor.mark_saved()
    assert not editor.dirty
    editor.undo()
    assert editor.dirty  # the loaded state is not the saved one any more
    editor.redo()
    assert not editor.dirty
    editor.undo()
    editor.stroke([(10, 10)], 3, 255)  # the same pixels as the saved state, but a different history
    assert editor.dirty


def test_history_of_50_strokes_on_a_4000x3000_mask_stays_small() -> None:
    rng = np.random.default_rng(3)
    mask = np.zeros((3000, 4000), np.uint8)
    for _ in range(40):
        cv2.ellipse(mask, tuple(int(v) for v in rng.integers(0, (4000, 3000))),
                    tuple(int(v) for v in rng.integers(20, 300, 2)), float(rng.uniform(0, 180)), 0, 360, 255, -1)
    original = mask.copy()
    editor = MaskEditor(mask)
    for i in range(50):  # long strokes across the slide: the worst case for box-sized deltas
        points = [tuple(int(v) for v in rng.integers(0, (4000, 3000))) for _ in range(6)]
        assert editor.stroke(points, 40, 255 * (i % 2)) is not None
    assert editor.history_bytes < 25_000_000, f"{editor.history_bytes / 1e6:.1f} MB for 50 strokes"
    while editor.undo() is not None:
        pass
    assert np.array_equal(editor.mask, original)


def test_mask_conventions_and_classes() -> None:
    assert MaskEditor(np.zeros((4, 4), np.uint8)).value_of(1) == 255  # a blank binary mask: 0/255
    assert MaskEditor(np.eye(4, dtype=np.uint8)).value_of(1) == 1  # a 0/1 file stays 0/1
    assert MaskEditor(np.full((4, 4), 255, np.uint8)).value_of(0) == 0
    multi = MaskEditor(np.zeros((4, 4), np.uint8), num_classes=4)
    assert multi.value_of(3) == 3
    with pytest.raises(SegScopeError, match="class 4"):
        multi.value_of(4)
    with pytest.raises(SegScopeError, match="2-D uint8"):
        MaskEditor(np.zeros((4, 4, 3), np.uint8))


def test_accept_prediction_from_argmax_and_threshold() -> None:
    rng = np.random.default_rng(5)
    p1 = cv2.GaussianBlur(rng.random((60, 80)).astype(np.float32), (0, 0), 3)
    p1 = (p1 - p1.min()) / (p1.max() - p1.min())
    roi = Roi(30, 20, 110, 80)  # 80 x 60, the probabilities' size
    result = make_result(np.stack([1 - p1, p1], -1), roi, (W, H))
    mask = np.zeros((H, W), np.uint8)
    mask[0:5] = 255
    editor = MaskEditor(mask)
    box = editor.accept_prediction(prediction_labels(result), roi)
    assert np.array_equal(editor.mask[20:80, 30:110], np.where(p1 > 0.5, 255, 0))
    assert np.array_equal(editor.mask[:5], mask[:5]) and not editor.mask[80:].any()
    assert box == box_of(editor.mask != mask)
    editor.accept_prediction(prediction_labels(result, threshold=0.8), roi)
    assert np.array_equal(editor.mask[20:80, 30:110], np.where(p1 >= 0.8, 255, 0))
    editor.undo()
    editor.undo()
    assert np.array_equal(editor.mask, mask)

    clip = allowed_map(result, 1, 0.7)
    assert clip.box == roi and clip.allowed is not None and np.array_equal(clip.allowed, p1 >= 0.7)


def test_prediction_at_model_resolution_is_resized_to_the_roi() -> None:
    p1 = np.zeros((10, 10), np.float32)
    p1[:, 5:] = 1.0
    result = make_result(np.stack([1 - p1, p1], -1), Roi(0, 0, 40, 20), (W, H))
    labels = prediction_labels(result, threshold=0.5)
    assert labels.shape == (20, 40) and labels[:, :18].max() == 0 and labels[:, 22:].min() == 1


def test_save_corrected_keeps_the_original(tmp_path: Path) -> None:
    original = np.zeros((30, 40), np.uint8)
    original[5:10, 5:10] = 255
    folder = tmp_path / "001"
    folder.mkdir()
    mask_path = folder / "mask.png"
    cv2.imwrite(str(mask_path), original)
    original_bytes = mask_path.read_bytes()
    edited = original.copy()
    edited[20:25, 20:30] = 255
    written = save_mask(edited, mask_path).path
    assert written == folder / "mask_corrected.png" == corrected_mask_path(mask_path)
    assert mask_path.read_bytes() == original_bytes
    assert np.array_equal(read_mask(written), edited)
    edited[0, 0] = 255
    save_mask(edited, mask_path)  # saving again rewrites the corrected file
    assert np.array_equal(read_mask(written), edited)
    assert sorted(p.name for p in folder.iterdir()) == ["mask.png", "mask_corrected.png"]  # no temp files
    assert corrected_mask_path(tmp_path / "a_mask.tif") == tmp_path / "a_mask_corrected.png"


def test_save_replace_keeps_the_first_original_as_backup(tmp_path: Path) -> None:
    first = np.zeros((30, 40), np.uint8)
    mask_path = tmp_path / "slide_mask.png"
    cv2.imwrite(str(mask_path), first)
    first_bytes = mask_path.read_bytes()
    corrected = save_mask(np.full((30, 40), 255, np.uint8), mask_path).path  # an earlier "corrected" save
    second = first.copy()
    second[3:6, 3:6] = 255
    assert save_mask(second, mask_path, "replace").path == mask_path
    assert backup_mask_path(mask_path) == tmp_path / "slide_mask.orig.png"
    assert backup_mask_path(mask_path).read_bytes() == first_bytes
    assert np.array_equal(read_mask(mask_path), second)
    assert not corrected.exists()  # it would shadow the replaced original
    third = second.copy()
    third[10:12] = 255
    save_mask(third, mask_path, "replace")
    assert backup_mask_path(mask_path).read_bytes() == first_bytes  # never overwritten
    assert np.array_equal(read_mask(mask_path), third)

    new_path = tmp_path / "new_mask.png"  # no original yet: just written, no backup
    save_mask(third, new_path, "replace")
    assert new_path.exists() and not backup_mask_path(new_path).exists()
    with pytest.raises(SegScopeError, match="jpg"):
        save_mask(third, tmp_path / "x_mask.jpg", "replace")
    with pytest.raises(SegScopeError, match="save mode"):
        save_mask(third, mask_path, "overwrite")  # type: ignore[arg-type]


def test_default_mask_paths_follow_the_dataset_layouts(tmp_path: Path) -> None:
    assert default_mask_path(tmp_path / "001" / "image.jpg") == tmp_path / "001" / "mask.png"
    assert default_mask_path(tmp_path / "slide7.tif") == tmp_path / "slide7_mask.png"


def test_the_auto_saves_of_many_masks_are_found_from_one_listing_of_their_folder(tmp_path: Path, monkeypatch) -> None:
    """Masks of a flat dataset (and all masks, with a recovery folder of the caller's) share a folder of auto-saves:
    each mask gets its own auto-saves, newest first, and the folder is listed once, not once per mask."""
    from segscope.core.editing import files

    flat = tmp_path / "flat"
    flat.mkdir()
    masks = [flat / f"{name}_mask.png" for name in ("a", "b", "c")]
    edits = {name: np.full((H, W), n, np.uint8) for n, name in enumerate("ab", start=1)}
    older = write_recovery(edits["a"] * 0, masks[0], session="abcdef-1-0000")  # a stopped viewer's, older
    os.utime(older, (time.time() - 30, time.time() - 30))
    for name, mask_file in zip("ab", masks):
        write_recovery(edits[name], mask_file)
    listed: list[Path] = []
    scandir = os.scandir
    monkeypatch.setattr(files.os, "scandir", lambda folder: listed.append(Path(folder)) or scandir(folder))
    found = list(find_each_recoveries(masks))
    assert listed == [flat / ".segscope-recovery"]
    assert [[(r.path, int(r.mask.max())) for r in recoveries] for recoveries, _ in found] == [
        [(recovery_path(masks[0]), 1), (older, 0)], [(recovery_path(masks[1]), 2)], []]
    assert [problems for _, problems in found] == [[], [], []]


def test_the_auto_saves_of_masks_in_folders_of_their_own_are_found_in_their_own_folder(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    """`<id>/mask.png` layout: each image's folder of auto-saves is listed once, and a mask gets only the auto-saves
    of its own folder (every mask has the same name)."""
    from segscope.core.editing import files

    masks = [tmp_path / name / "mask.png" for name in ("001", "002", "003")]
    for mask_file in masks:
        mask_file.parent.mkdir()
    write_recovery(np.full((H, W), 3, np.uint8), masks[1])
    listed: list[Path] = []
    scandir = os.scandir
    monkeypatch.setattr(files.os, "scandir", lambda folder: listed.append(Path(folder)) or scandir(folder))
    found = list(find_each_recoveries([masks[0], masks[1], masks[2], masks[1]]))
    assert listed == [mask_file.parent / ".segscope-recovery" for mask_file in masks]
    assert [[(r.path, int(r.mask.max())) for r in recoveries] for recoveries, _ in found] == [
        [], [(recovery_path(masks[1]), 3)], [], [(recovery_path(masks[1]), 3)]]


def test_recovery_round_trip_and_staleness(tmp_path: Path) -> None:
    source = tmp_path / "001" / "mask.png"
    source.parent.mkdir()
    base = np.zeros((H, W), np.uint8)
    cv2.imwrite(str(source), base)
    past = time.time() - 60
    os.utime(source, (past, past))
    editor = MaskEditor(base)
    editor.stroke([(10, 10), (90, 70)], 7, 255)
    path = write_recovery(editor.mask, source)
    assert path == recovery_path(source) and path.parent == source.parent / ".segscope-recovery"
    recovery = find_recovery(source)
    assert recovery is not None and recovery.source == source and recovery.path == path
    assert np.array_equal(recovery.mask, editor.mask) and abs(recovery.saved_at - time.time()) < 30
    restored = MaskEditor(read_mask(source))
    restored.replace(recovery.mask)
    assert restored.dirty and np.array_equal(restored.mask, editor.mask)

    custom = write_recovery(editor.mask, source, tmp_path / "recover")
    assert custom.parent == tmp_path / "recover" and load_recovery(custom).source == Path("mask.png")
    other = tmp_path / "002" / "mask.png"
    assert recovery_path(other) != recovery_path(source)

    future = time.time() + 60
    save_mask(editor.mask, source)
    os.utime(corrected_mask_path(source), (future, future))  # saved after the auto-save
    assert find_recovery(source) is None
    discard_recovery(source)
    assert not path.exists() and find_recovery(source) is None
    assert not path.parent.exists()  # no empty .segscope-recovery/ left behind after a save
    flat = tmp_path / "flat"  # masks of a flat dataset share one folder: it goes with the last auto-save
    first, second = flat / "a_mask.png", flat / "b_mask.png"
    flat.mkdir()
    for mask_file in (first, second):
        write_recovery(editor.mask, mask_file)
    discard_recovery(first)
    assert recovery_path(second).exists()
    discard_recovery(second)
    assert not (flat / ".segscope-recovery").exists() and flat.is_dir()
    custom_dir = custom.parent
    discard_recovery(source, custom_dir)
    assert custom_dir.is_dir()  # a folder the caller chose stays

    path.parent.mkdir()
    path.write_bytes(b"not a zip")
    with pytest.raises(SegScopeError, match="recovery"):
        load_recovery(path)
