"""Bring your own model over SSH: a 1-channel sigmoid-logits model with RGB/255 preprocessing runs on the
host's worker (a real sshd on loopback) with the NumPy reference's numbers and the local backend's."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.remote.backend import RemoteBackend
from segscope.core.roi import Roi

import byo_helpers as byo

pytestmark = pytest.mark.ssh


def test_one_channel_sigmoid_model_over_ssh(tmp_path: Path, sshd, ssh_options, worker_options) -> None:
    case = next(c for c in byo.CASES if c[0] == "rgb-255-sigmoid-logits")
    _, net_kwargs, card_input, outputs, classes, prep, _ = case
    outputs = [{**outputs[0], "threshold": 0.7}]  # the card's threshold travels with the result

    def expect(raw):
        return byo.two_class(byo.sigmoid(raw[..., 0]), 0.7)

    net = byo.Net(**net_kwargs)
    pipeline = byo.write_project(tmp_path / "project", net, card_input, outputs, classes)
    png = byo.slide_png()
    # CI names a bare Ascend-like host interpreter (Python 3.9, old NumPy/OpenCV/ONNX Runtime, no onnx package).
    host_python = os.environ.get("SEGSCOPE_TEST_HOST_PYTHON") or worker_options["python"]
    backend = RemoteBackend(pipeline, sshd.target, ssh_options, **{**worker_options, "python": host_python},
                            probabilities="float32")
    try:
        assert backend.capabilities.class_names == ("background", "crack")
        assert backend.capabilities.input_size == (net.size, net.size)
        result = backend.infer(png, Roi(*byo.BOX))
    finally:
        backend.close()
    byo.assert_matches(result, *expect(byo.reference_stream(png, byo.BOX, net, **prep)), outputs)
    with EmbeddedBackend(pipeline, threads=1) as local:
        expected = local.infer(png, Roi(*byo.BOX))
    np.testing.assert_array_equal(result.probabilities, expected.probabilities)
    np.testing.assert_array_equal(result.argmax, expected.argmax)
    assert result.threshold == expected.threshold == 0.7
