"""What the client uploads with a pipeline: every file the stream and its model need on the host."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.remote.backend import RemoteBackend
from segscope.core.remote.connection import SshOptions
from segscope.core.remote.deploy import project_bundle
from segscope.core.roi import Roi

from .sshd import Sshd
from .test_remote_backend import slide_png


def _with_postprocessor(data: dict) -> None:
    stream = data["unet_mindspore"]
    stream["mxpi_tensorinfer0"]["next"] = "mxpi_semanticsegpostprocessor0"
    stream["mxpi_semanticsegpostprocessor0"] = {
        "factory": "mxpi_semanticsegpostprocessor", "next": "mxpi_dumpdata0",
        "props": {"dataSource": "mxpi_tensorinfer0", "postProcessConfigPath": "models/seg.cfg",
                  "labelPath": "models/seg.names", "postProcessLibPath": "libdeeplabv3post.so"}}


def test_post_processor_files_and_external_weights_travel_with_the_pipeline(tiny_model_project) -> None:
    root: Path = tiny_model_project.root
    (root / "models" / "seg.cfg").write_text("CLASS_NUM=2\nMODEL_TYPE=0\n")
    (root / "models" / "seg.names").write_text("background\ndefect\n")
    model = onnx.load(str(tiny_model_project.onnx))
    onnx.save(model, str(tiny_model_project.onnx), save_as_external_data=True, all_tensors_to_one_file=True,
              location="tiny.weights", size_threshold=0)
    pipeline = tiny_model_project.write_pipeline("seg.pipeline", _with_postprocessor)

    bundle, inside = project_bundle(pipeline)

    expected = ["models/aipp_unet_simple_opencv.cfg", "models/seg.cfg", "models/seg.names", "models/tiny.onnx",
                "models/tiny.weights", "models/unet_hw960_bs1.json", "pipelines/seg.pipeline"]
    assert inside == "pipelines/seg.pipeline"
    assert sorted(bundle.files) == expected  # the .om is absent here (it may exist only on the host)
    for name in expected:
        assert bundle.files[name] == (root / name).read_bytes()


@pytest.mark.ssh
def test_a_post_processed_stream_with_external_weights_runs_on_the_host(tiny_model_project, sshd: Sshd,
                                                                        ssh_options: SshOptions,
                                                                        worker_options: dict) -> None:
    root: Path = tiny_model_project.root
    (root / "models" / "seg.cfg").write_text("CLASS_NUM=2\nMODEL_TYPE=0\n")
    model = onnx.load(str(tiny_model_project.onnx))
    onnx.save(model, str(tiny_model_project.onnx), save_as_external_data=True, all_tensors_to_one_file=True,
              location="tiny.weights", size_threshold=0)
    pipeline = tiny_model_project.write_pipeline("seg.pipeline", _with_postprocessor)
    image, roi = slide_png(), Roi(40, 30, 300, 220)
    with EmbeddedBackend(pipeline) as local:
        expected = local.infer(image, roi)
    with RemoteBackend(pipeline, sshd.target, ssh_options, **worker_options) as remote:
        result = remote.infer(image, roi)
    np.testing.assert_array_equal(result.argmax, expected.argmax)
    np.testing.assert_array_equal(result.probabilities, expected.probabilities)
