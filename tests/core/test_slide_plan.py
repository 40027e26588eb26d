"""The viewer's whole-slide plan without Qt: tiles of the dataset's ROI size clipped to the slide, overlapping by
twice the edge effect (2/15 of the tile), the model's own output scale, and a scale that fits the memory bound
(numbers worked out by hand)."""

from __future__ import annotations

import dataclasses

from segscope.core.backends.base import Capabilities
from segscope.core.roi import Roi
from segscope.core.wholeslide.plan import SlideRun

CAPS = Capabilities("embedded", "CPU", (480, 480), ("background", "defect", "crack"))


def test_tiles_are_the_roi_size_clipped_to_the_slide_at_the_models_own_scale():
    run = SlideRun.of((3000, 600), Roi(0, 0, 960, 800), CAPS)
    assert run.tile == (960, 600) and run.classes == 3 and run.own_scale == 0.5  # 480 model px per 960 slide px
    plan = run.plan(run.own_scale)
    assert plan.tile == (960, 600) and plan.seams and plan.output_scale is None
    assert (plan.margin, plan.overlap) == (128, 256)  # 2/15 of 960, twice that
    assert run.plan(0.25).output_scale == 0.25
    assert run.output_size(0.5) == (1500, 300)
    # 3000 x 600 widened by 128 px on each side, 960 x 600 tiles overlapping by 256 (strides 704 and 344):
    # x at -128, 576, 1280, 1984 and 2168 (flush with 3128), y at -128 and 128 (flush with 728)
    assert run.tiles(plan) == 10
    assert run.overlap_note(plan) == ("960x600 px tiles overlapping by 256 px, each counted only inside its outer 128 "
                                      "px (the model's edge effect) and the slide's borders mirrored by as much: 10 "
                                      "tiles, 2.50x the 4 without overlap")  # x at 0, 960, 1920, 2040


def test_a_scale_that_fits_the_bound():
    run = SlideRun.of((4000, 4000), Roi(0, 0, 1000, 1000), CAPS)
    needed = run.needed(run.own_scale)
    tight = dataclasses.replace(run, max_bytes=needed // 4)  # a quarter of the bytes: half the scale
    fitting = tight.fitting(run.own_scale)
    assert tight.needed(fitting) <= tight.max_bytes and abs(fitting - run.own_scale / 2) < 0.01 * run.own_scale


def test_the_output_scale_fits_the_memory_bound_by_itself_or_as_chosen():
    """The viewer's policy (`output_plan`, `Session.whole_slide_plan`): the model's own scale unless its canvases
    pass the bound, then the largest that fits (said); a chosen scale over the bound is refused in one line."""
    import pytest

    from segscope.core.errors import SegScopeError
    from segscope.core.wholeslide.plan import output_plan
    from segscope.core.wholeslide.tiling import canvas_bytes

    capabilities = Capabilities("fake", "test", (960, 960), ("background", "defect"))
    run = SlideRun.of((20000, 16000), Roi(0, 0, 1800, 1800), capabilities)
    own = run.own_scale
    assert own == 960 / 1800
    fits = output_plan(run)
    assert fits.plan.output_scale is None and fits.scale_note == ""  # the model's own (left to the backend)
    needed = canvas_bytes(run.region, own, run.classes, seams=True)
    small = dataclasses.replace(run, max_bytes=needed // 4)  # the own scale needs four times what may be held
    planned = output_plan(small)
    scale = planned.plan.output_scale
    assert 0 < scale < own and canvas_bytes(run.region, scale, run.classes, True) <= needed // 4
    assert scale == pytest.approx(own / 2, rel=0.01)  # a quarter of the pixels
    assert planned.scale_note.startswith(f"output scale {scale:.4g} (automatic: the model's own {own:.4g} would need")
    with pytest.raises(SegScopeError) as refused:
        output_plan(small, own)
    assert "Whole-slide output scale" in str(refused.value) and "--" not in str(refused.value)
    chosen = output_plan(small, own / 4)
    assert chosen.plan.output_scale == own / 4 and "chosen in Run > Whole-slide output scale" in chosen.scale_note
    assert chosen.tiles == planned.tiles > 0  # the same tiles, whatever the output scale


def test_the_memory_bound_is_said_in_the_unit_max_canvas_takes():
    """`--max-canvas 2` is 2 GiB (2 x 2^30 bytes): a refusal says "2.0 GiB", not the decimal "2.1 GB"."""
    from segscope.core.wholeslide.plan import output_plan

    run = dataclasses.replace(SlideRun.of((200000, 160000), Roi(0, 0, 1800, 1800), CAPS), max_bytes=2 << 30)
    assert run.needed(run.own_scale) > run.max_bytes
    assert "over the 2.0 GiB bound" in output_plan(run).scale_note
