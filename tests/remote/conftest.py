"""Fixtures for the remote backend: a real OpenSSH sshd on 127.0.0.1 (see `sshd.py`) and projects to run.

`sshd` is started once per session; tests that need it are skipped with the reason when sshd is not
installed (`.ci/run` installs Debian's openssh-server).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from segscope.core.remote.connection import SshOptions

from .sshd import Sshd, SshdUnavailable, start_sshd

SHIPPED_PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "unet_simple_opencv.pipeline"
SHIPPED_AIPP = Path(__file__).resolve().parents[2] / "models" / "aipp_unet_simple_opencv.cfg"


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


@pytest.fixture
def known_hosts(sshd: Sshd, tmp_path: Path) -> Path:
    """A known_hosts file that already trusts the test sshd."""
    path = tmp_path / "known_hosts"
    path.write_text(sshd.known_hosts_line())
    return path


@pytest.fixture
def ssh_options(sshd: Sshd, known_hosts: Path) -> SshOptions:
    """Log in with the generated user key only (no agent, no ~/.ssh keys, no ~/.ssh/config)."""
    return SshOptions(key_filename=sshd.user_key, allow_agent=False, look_for_keys=False, ssh_config=None,
                      known_hosts=known_hosts, connect_timeout=10.0)


@pytest.fixture
def worker_options(sshd: Sshd) -> dict:
    """RemoteBackend options for the test host: this interpreter, and a cache folder in the temp folder."""
    return {"python": sys.executable, "cache_dir": str(sshd.cache_dir), "worker_backend": "embedded",
            "request_timeout": 60.0, "startup_timeout": 60.0}


def make_slow_onnx(path: Path, size: int = 960, width: int = 32, layers: int = 2) -> None:
    """A 960x960 model that takes 0.3-2 s on two cores (idle to loaded): 3x3 convolutions, 2-class softmax.

    Tests use it to catch the worker mid-request (kill, cancel, close while busy).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev, channels = [], [], "input", 3
    for i in range(layers + 1):
        w = (rng.standard_normal((width, channels, 3, 3)) * 0.1).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"W{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"W{i}"], [f"c{i}"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        prev, channels = f"r{i}", width
    inits.append(numpy_helper.from_array((rng.standard_normal((2, width, 1, 1)) * 0.1).astype(np.float32), "Wout"))
    nodes += [
        helper.make_node("Conv", [prev, "Wout"], ["logits_nchw"], kernel_shape=[1, 1]),
        helper.make_node("Transpose", ["logits_nchw"], ["logits"], perm=[0, 2, 3, 1]),
        helper.make_node("Softmax", ["logits"], ["softmax"], axis=-1),
        helper.make_node("ArgMax", ["softmax"], ["argmax64"], axis=-1, keepdims=0),
        helper.make_node("Cast", ["argmax64"], ["argmax"], to=TensorProto.INT32),
    ]
    graph = helper.make_graph(
        nodes, "slow_stand_in", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("softmax", TensorProto.FLOAT, [1, size, size, 2]),
         helper.make_tensor_value_info("argmax", TensorProto.INT32, [1, size, size])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))


@pytest.fixture(scope="session")
def slow_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project (pipelines/ + models/) running the slow model; returns its pipeline path."""
    root = tmp_path_factory.mktemp("slow") / "project"
    (root / "pipelines").mkdir(parents=True)
    (root / "models").mkdir()
    pipeline = root / "pipelines" / SHIPPED_PIPELINE.name
    shutil.copyfile(SHIPPED_PIPELINE, pipeline)
    shutil.copyfile(SHIPPED_AIPP, root / "models" / SHIPPED_AIPP.name)
    make_slow_onnx(root / "models" / "slow.onnx")
    card = {"name": "slow test model", "onnx": "slow.onnx", "aipp": SHIPPED_AIPP.name,
            "input": {"name": "input", "layout": "NCHW", "width": 960, "height": 960},
            "outputs": [{"name": "softmax", "kind": "softmax", "layout": "NHWC"}, {"name": "argmax", "kind": "argmax"}],
            "classes": ["background", "defect"]}
    (root / "models" / "unet_hw960_bs1.json").write_text(json.dumps(card))
    return pipeline
