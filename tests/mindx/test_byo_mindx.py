"""Bring your own model on the MindX backend (through the SDK test double): projects written by `segscope card`
give the NumPy reference's numbers and the embedded backend's, so the card's postprocess is MindX's too."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.backends.mindx import MindXBackend
from segscope.core.card.builder import CardOptions, propose, write_project
from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi

import byo_helpers as byo

#: The .om's preprocessing is its AIPP: MindX runs 3-channel models (its opencv decoder emits 3 channels; a
#: gray model's csc AIPP is not emulated by the test double).
MINDX_CASES = [c for c in byo.CASES if byo.Net(**c[1]).in_channels == 3]


@pytest.mark.parametrize("transport", ["protobuf", "json"])
@pytest.mark.parametrize(("net_kwargs", "card_input", "outputs", "classes", "prep", "expect"),
                         [c[1:] for c in MINDX_CASES], ids=[c[0] for c in MINDX_CASES])
def test_segscope_card_projects_on_mindx(tmp_path: Path, sdk_home: Path, transport: str, net_kwargs, card_input,
                                         outputs, classes, prep, expect) -> None:
    """The user's path: `segscope card` (its AIPP config baked into the .om), then the MindX stream."""
    net = byo.Net(**net_kwargs)
    model = net.save(tmp_path / "byo.onnx")
    options = CardOptions(color=card_input["color"], scale=card_input.get("scale"),
                          mean=_tuple(card_input.get("mean")), std=_tuple(card_input.get("std")),
                          activation=outputs[0]["activation"], threshold=outputs[0].get("threshold"),
                          classes=tuple(classes))
    pipeline = write_project(model, tmp_path / "project", propose(model, options), options)
    (tmp_path / "project" / "models" / "byo.om").write_bytes(b"stand-in: the double runs the card's ONNX + AIPP")
    png = byo.slide_png()
    with MindXBackend(pipeline, sdk_home, transport=transport) as backend:
        result = backend.infer(png, Roi(*byo.BOX))
        assert backend.capabilities.class_names == (("background", *classes) if len(classes) == 1
                                                    else tuple(classes))
    byo.assert_matches(result, *expect(byo.reference_stream(png, byo.BOX, net, **prep)), outputs, atol=1e-4)
    with EmbeddedBackend(pipeline, threads=1) as embedded:
        local = embedded.infer(png, Roi(*byo.BOX))
    np.testing.assert_allclose(result.probabilities, local.probabilities, atol=1e-5)
    np.testing.assert_array_equal(result.argmax, local.argmax)


def _tuple(value: object) -> tuple[float, ...] | None:
    return None if value is None else tuple(value) if isinstance(value, list) else (float(value),)


def test_a_card_that_does_not_fit_the_graph_is_refused_before_the_sdk_starts(tmp_path: Path,
                                                                             sdk_home: Path) -> None:
    pipeline = byo.write_project(tmp_path, byo.Net(), {"scale": 1}, [{"name": "scores", "layout": "NHWC",
                                                                      "activation": "sigmoid"}], ["crack"])
    with pytest.raises(SegScopeError, match=r"outputs\[0\].layout: NHWC reads the graph's output 'scores'"):
        MindXBackend(pipeline, sdk_home)
    assert "StreamManagerApi" not in sys.modules  # refused before the SDK was even imported
