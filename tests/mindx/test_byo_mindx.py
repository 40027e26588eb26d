"""Bring your own model on the MindX backend (through the SDK test double): every card combination gives
the NumPy reference's numbers and the embedded backend's, so the card's postprocess is MindX's too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.backends.mindx import MindXBackend
from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi

_spec = importlib.util.spec_from_file_location("segscope_tests_byo", Path(__file__).parents[1] / "byo_helpers.py")
byo = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(byo)


@pytest.mark.parametrize("transport", ["protobuf", "json"])
@pytest.mark.parametrize(("net_kwargs", "card_input", "outputs", "classes", "prep", "expect"),
                         [c[1:] for c in byo.CASES], ids=[c[0] for c in byo.CASES])
def test_every_card_kind_on_mindx(tmp_path: Path, sdk_home: Path, transport: str, net_kwargs, card_input,
                                  outputs, classes, prep, expect) -> None:
    net = byo.Net(**net_kwargs)
    pipeline = byo.write_project(tmp_path / "project", net, card_input, outputs, classes)
    png = byo.slide_png(channels=4 if prep.get("channels") == 4 else 3)
    with MindXBackend(pipeline, sdk_home, transport=transport) as backend:
        result = backend.infer(png, Roi(*byo.BOX))
        assert backend.capabilities.class_names == (("background", *classes) if len(classes) == 1
                                                    else tuple(classes))
    byo.assert_matches(result, *expect(byo.reference_stream(png, byo.BOX, net, **prep)), outputs)
    with EmbeddedBackend(pipeline, threads=1) as embedded:
        local = embedded.infer(png, Roi(*byo.BOX))
    np.testing.assert_array_equal(result.probabilities, local.probabilities)
    np.testing.assert_array_equal(result.argmax, local.argmax)


def test_a_card_that_does_not_fit_the_graph_is_refused_before_the_sdk_starts(tmp_path: Path,
                                                                             sdk_home: Path) -> None:
    pipeline = byo.write_project(tmp_path, byo.Net(), {"scale": 1}, [{"name": "scores", "layout": "NHWC",
                                                                      "activation": "sigmoid"}], ["crack"])
    with pytest.raises(SegScopeError, match=r"outputs\[0\].layout: NHWC reads the graph's output 'scores'"):
        MindXBackend(pipeline, sdk_home)
    assert "StreamManagerApi" not in sys.modules  # refused before the SDK was even imported
