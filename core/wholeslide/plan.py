"""The plan of a viewer's whole-slide run, without Qt: tiles of the dataset's ROI size (the scale the model was
trained at) overlapping by twice the model's edge effect, each counted only inside it (`TilePlan`'s default,
with a seams map), at the model's own output scale or another one, and what the stitched canvases need at a
scale against their memory bound, and the policy that picks the scale (`output_plan`); what an overlap costs, in
words (the CLI's note and the viewer's message)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..backends.base import Capabilities
from ..errors import SegScopeError
from ..roi import Roi
from .evaluate import TilePlan
from .tiling import DEFAULT_MAX_CANVAS_BYTES, canvas_bytes, fitting_scale, output_size, stitched_bytes


def plain_tiles(plan: TilePlan, region: Roi, slide_size: tuple[int, int]) -> int:
    """The tiles `plan` would take over `region` without overlap (what its overlap costs is measured against)."""
    return len(replace(plan, overlap=0, margin=0, max_tiles=1 << 62).grid(region, slide_size))


def overlap_note(plan: TilePlan, tiles: int, plain: int) -> str:
    """The plan's overlap, what it is for and what it costs, as one clause (`tiles` it takes, `plain` without
    overlap)."""
    width, height = plan.tile
    cost = f"{tiles:,} tiles, {tiles / max(plain, 1):.2f}x the {plain:,} without overlap"
    if not plan.overlap:
        return f"{width}x{height} px tiles without overlap (tile borders may show: the model's edge effect)"
    if plan.margin:
        return (f"{width}x{height} px tiles overlapping by {plan.overlap} px, each counted only inside its outer "
                f"{plan.margin} px (the model's edge effect) and the slide's borders mirrored by as much: {cost}")
    return f"{width}x{height} px tiles overlapping by {plan.overlap} px, blended: {cost}"


@dataclass(frozen=True)
class SlideRun:
    """A whole-slide run of a slide `size` with the open model: its region, tile, classes and the model's own
    output scale (model input px per tile px)."""

    size: tuple[int, int]
    tile: tuple[int, int]
    classes: int
    own_scale: float
    max_bytes: int = DEFAULT_MAX_CANVAS_BYTES

    @classmethod
    def of(cls, size: tuple[int, int], roi: Roi, capabilities: Capabilities) -> SlideRun:
        """The run of a slide of `size` in tiles of the dataset's default `roi` size (clipped to the slide)."""
        tile = min(roi.width, size[0]), min(roi.height, size[1])
        return cls(size, tile, len(capabilities.class_names) or 2, capabilities.input_size[0] / tile[0])

    @property
    def region(self) -> Roi:
        return Roi.whole(*self.size)

    def needed(self, scale: float) -> int:
        """Bytes the stitched canvases (with the seams map) take at output `scale`."""
        return canvas_bytes(self.region, scale, self.classes, seams=True)

    def stored_bytes(self, scale: float) -> int:
        """Bytes its stitched result (with the seams map) holds at output `scale`, kept or stored after the run."""
        return stitched_bytes(self.region, scale, self.classes, seams=True)

    def fitting(self, scale: float) -> float:
        """The largest output scale up to `scale` whose canvases fit the memory bound."""
        return fitting_scale(self.region, scale, self.classes, True, self.max_bytes)

    def output_size(self, scale: float) -> tuple[int, int]:
        return output_size(self.region, scale)

    def plan(self, scale: float) -> TilePlan:
        """The tiling at output `scale` (the model's own is left to the backend, as `TilePlan` takes it)."""
        return TilePlan(self.tile, seams=True, output_scale=None if scale == self.own_scale else scale)

    def tiles(self, plan: TilePlan) -> int:
        """How many tiles `plan` takes."""
        return len(plan.grid(self.region, self.size))

    def overlap_note(self, plan: TilePlan) -> str:
        """`plan`'s overlap and its cost on this slide, as one clause."""
        return overlap_note(plan, self.tiles(plan), plain_tiles(plan, self.region, self.size))


def gigabytes(size: int) -> str:
    """A memory size in GiB, the unit `--max-canvas` takes (file sizes are decimal, as file managers show them)."""
    return f"{size / 2**30:.1f} GiB"


@dataclass(frozen=True)
class OutputPlan:
    """A whole-slide run as it will go: its tiling, how many tiles, and why its output scale is not the model's
    own ("" when it is)."""

    plan: TilePlan
    tiles: int
    scale_note: str = ""


def output_plan(run: SlideRun, chosen: float = 0.0) -> OutputPlan:
    """The output-scale policy of a viewer's whole-slide run: `chosen` (0: automatic) when its canvases fit the
    memory bound, else refused (one line naming the largest that fits); automatic is the model's own scale unless
    its canvases would pass the bound, then the largest scale that fits, said in the note."""
    own = run.own_scale
    scale = chosen or own
    needed, bound = run.needed(scale), gigabytes(run.max_bytes)
    note = ""
    if needed > run.max_bytes:
        fitting = run.fitting(scale)
        if chosen:
            raise SegScopeError(f"At output scale {chosen:.4g} the stitched result needs {gigabytes(needed)}, over "
                                f"the {bound} bound: choose {fitting:.4g} or less (or Automatic) in Run > "
                                "Whole-slide output scale…")
        note = (f"output scale {fitting:.4g} (automatic: the model's own {own:.4g} would need "
                f"{gigabytes(needed)}, over the {bound} bound)")
        scale = fitting
    elif chosen:
        note = f"output scale {chosen:.4g} (chosen in Run > Whole-slide output scale…)"
    plan = run.plan(scale)
    return OutputPlan(plan, run.tiles(plan), note)
