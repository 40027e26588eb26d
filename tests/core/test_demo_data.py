"""The demo slide generator: determinism, layout, masks that match the drawn defects, overwrite refusal."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.dataset.demo import SURFACES, defect_region, generate_demo_dataset, has_defects, make_slide
from segscope.core.errors import SegScopeError
from segscope.core.files.fileio import read_image, read_mask
from segscope.core.roi import ORIGINAL_DEFAULT_ROI

SMALL = (800, 600)


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return generate_demo_dataset(tmp_path_factory.mktemp("demo") / "data", count=7, seed=3, size=SMALL)


def test_layout_ids_and_image_formats(small_dataset: list[Path]) -> None:
    assert [p.name for p in small_dataset] == ["001", "002", "003", "004", "005", "006", "007"]
    for folder in small_dataset:
        assert sorted(f.name for f in folder.iterdir()) == ["image.png", "mask.png"]
        image = cv2.imread(str(folder / "image.png"), cv2.IMREAD_UNCHANGED)
        mask = cv2.imread(str(folder / "mask.png"), cv2.IMREAD_UNCHANGED)
        assert image.shape == (600, 800, 3) and image.dtype == np.uint8
        assert mask.shape == (600, 800) and mask.dtype == np.uint8
        assert set(np.unique(mask)) <= {0, 255}


def test_same_seed_gives_identical_files_and_other_seeds_differ(small_dataset: list[Path], tmp_path: Path) -> None:
    again = generate_demo_dataset(tmp_path / "again", count=2, seed=3, size=SMALL)
    other = generate_demo_dataset(tmp_path / "other", count=1, seed=4, size=SMALL)
    assert len(again) == 2
    for a, b in zip(small_dataset[:2], again):
        for name in ("image.png", "mask.png"):
            assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (other[0] / "image.png").read_bytes() != (small_dataset[0] / "image.png").read_bytes()


def test_make_slide_is_deterministic_per_generator() -> None:
    a = make_slide(np.random.default_rng(11), (320, 240))
    b = make_slide(np.random.default_rng(11), (320, 240))
    c = make_slide(np.random.default_rng(12), (320, 240))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_one_slide_in_six_is_defect_free_and_the_others_have_defects(small_dataset: list[Path]) -> None:
    defective = [bool(read_mask(folder / "mask.png").any()) for folder in small_dataset]
    assert defective == [has_defects(i) for i in range(len(small_dataset))]
    assert defective.count(False) == 1  # id 003


def test_defects_lie_mostly_in_the_default_roi(small_dataset: list[Path]) -> None:
    region = defect_region(SMALL)
    inside = []
    for folder in small_dataset:
        mask = read_mask(folder / "mask.png") > 0
        if mask.any():
            inside.append(mask[region.y0 : region.y1, region.x0 : region.x1].sum() / mask.sum())
    assert all(share > 0 for share in inside)  # every defective slide shows a defect in the ROI
    assert np.median(inside) > 0.8


def test_masks_mark_visible_defects(small_dataset: list[Path]) -> None:
    """Each defect (mask component) differs from the surface right around it by more than the texture."""
    ratios = []
    for folder in small_dataset:
        gray = read_image(folder / "image.png").astype(np.float32).mean(axis=2)
        mask = read_mask(folder / "mask.png")
        count, labels = cv2.connectedComponents(mask)
        around_all = cv2.dilate(mask, np.ones((5, 5), np.uint8)) > 0
        for label in range(1, count):
            part = (labels == label).astype(np.uint8)
            if part.sum() < 20:
                continue
            ring = (cv2.dilate(part, np.ones((15, 15), np.uint8)) > 0) & ~around_all
            ratios.append(abs(gray[part > 0].mean() - gray[ring].mean()) / (gray[ring].std() + 1e-6))
    assert len(ratios) >= 4
    assert np.median(ratios) > 1.0


def test_every_surface_kind_renders() -> None:
    for name in SURFACES:
        image, mask = make_slide(np.random.default_rng(5), (400, 300), with_defects=False, surface=name)
        assert image.shape == (300, 400, 3) and not mask.any()
        assert image.std() > 2  # textured, not flat


def test_existing_files_are_not_overwritten_unless_asked(tmp_path: Path) -> None:
    first = generate_demo_dataset(tmp_path, count=1, seed=1, size=(200, 150))
    before = (first[0] / "image.png").read_bytes()
    with pytest.raises(SegScopeError, match=r"001[/\\]image\.png: already exists"):
        generate_demo_dataset(tmp_path, count=2, seed=2, size=(200, 150))
    assert (first[0] / "image.png").read_bytes() == before
    assert not (tmp_path / "002").exists()  # refused before writing anything
    generate_demo_dataset(tmp_path, count=2, seed=2, size=(200, 150), overwrite=True)
    assert (first[0] / "image.png").read_bytes() != before
    assert (tmp_path / "002" / "mask.png").exists()


def test_bad_arguments_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(SegScopeError, match="count 0"):
        generate_demo_dataset(tmp_path, count=0)
    with pytest.raises(SegScopeError, match="10x10"):
        generate_demo_dataset(tmp_path, count=1, size=(10, 10))


def test_full_size_slide_in_the_original_layout(tmp_path: Path) -> None:
    (folder,) = generate_demo_dataset(tmp_path, count=1)
    image, mask = read_image(folder / "image.png"), read_mask(folder / "mask.png")
    assert image.shape == (3000, 4000, 3) and mask.shape == (3000, 4000)
    assert defect_region((4000, 3000)).as_tuple() == ORIGINAL_DEFAULT_ROI
    x0, y0, x1, y1 = ORIGINAL_DEFAULT_ROI
    assert mask[y0:y1, x0:x1].sum() > 0.5 * mask.sum() > 0
