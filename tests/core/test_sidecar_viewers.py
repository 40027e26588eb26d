"""Issue 40: two viewers moving and resetting ROIs of one dataset in any order: the sidecar always holds each
image's latest move (Hypothesis stateful), whichever viewer made it; none is lost to the other's save."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import cv2
import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from segscope.core.dataset.dataset import Dataset
from segscope.core.roi import Roi

IDS = ("001", "002", "003")
VIEWERS = ("A", "B")


class TwoViewers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="segscope-sidecar-"))
        for item in IDS:
            (self.root / item).mkdir()
            cv2.imwrite(str(self.root / item / "image.png"), np.zeros((40, 50, 3), np.uint8))
        self.viewers = {v: Dataset.open(self.root) for v in VIEWERS}
        self.memory: dict[str, dict[str, list[int]]] = {v: {} for v in VIEWERS}  # what each viewer shows as picked
        self.disk: dict[str, list[int]] = {}  # each image's latest move, by whichever viewer

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(viewer=st.sampled_from(VIEWERS), item=st.sampled_from(IDS), x=st.integers(0, 20), w=st.integers(1, 29))
    def move(self, viewer: str, item: str, x: int, w: int) -> None:
        dataset = self.viewers[viewer]
        dataset.set_roi(dataset.item(item), Roi(x, 0, x + w, 10))
        self.memory[viewer][item] = self.disk[item] = [x, 0, x + w, 10]

    @rule(viewer=st.sampled_from(VIEWERS), item=st.sampled_from(IDS))
    def reset(self, viewer: str, item: str) -> None:
        dataset = self.viewers[viewer]
        dataset.reset_roi(dataset.item(item))
        if self.memory[viewer].pop(item, None) is not None:  # (a viewer without a picked ROI has nothing to reset)
            self.disk.pop(item, None)

    @rule(viewer=st.sampled_from(VIEWERS))
    def reopen(self, viewer: str) -> None:
        self.viewers[viewer] = Dataset.open(self.root)
        self.memory[viewer] = dict(self.disk)

    @invariant()
    def the_sidecar_holds_every_latest_move(self) -> None:
        sidecar = self.root / "segscope.json"
        rois = json.loads(sidecar.read_text())["rois"] if sidecar.exists() else {}
        assert rois == self.disk
        for viewer, dataset in self.viewers.items():
            assert {i: list(r.as_tuple()) for i in IDS if (r := dataset.stored_roi(dataset.item(i)))} == \
                self.memory[viewer]


def test_two_viewers_rois_all_survive_in_any_order() -> None:
    machine = settings(max_examples=60, stateful_step_count=20, deadline=None, database=None,
                       derandomize=True)(TwoViewers)
    machine.TestCase().runTest()
