"""Fixtures shared by every test folder.

- `tiny_model_project`: a project root in tmp_path (pipelines/ + models/) whose model is a tiny real ONNX
  network made here with `onnx.helper`, so core tests never depend on the trained demo model.
- `small_dataset`: a few small slides with masks in the original `DIR/<id>/image.png + mask.png` layout.
- `write_png`: writes an image file with OpenCV alone (independent of the code under test).
- `shared_data`: the real images in `<repo>/../shared/data`, skipped cleanly when absent.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import pytest

from segscope.core.cache import settings as cache_settings

import byo_helpers
from helpers import TINY_BIAS, TINY_WEIGHT, make_tiny_onnx, tiny_card

REPO = Path(__file__).resolve().parents[1]
SHIPPED_PIPELINE = REPO / "pipelines" / "unet_simple_opencv.pipeline"
SHIPPED_AIPP = REPO / "models" / "aipp_unet_simple_opencv.cfg"


@dataclass
class TinyProject:
    root: Path
    pipeline: Path  # pipelines/unet_simple_opencv.pipeline, the shipped file copied verbatim
    onnx: Path
    card: Path

    def write_pipeline(self, name: str, edit: Callable[[dict], None]) -> Path:
        """A copy of the shipped pipeline, changed by `edit(data)`, saved as pipelines/<name>."""
        data = json.loads(self.pipeline.read_text(encoding="utf-8"))
        edit(data)
        path = self.root / "pipelines" / name
        path.write_text(json.dumps(data, indent=4), encoding="utf-8")
        return path

    def plain_card(self, stem: str = "plain") -> str:
        """models/<stem>.json: the tiny model's card without its AIPP config, the same math stated as its
        preprocessing (for streams that hand the model float32 pixels, which a uint8 AIPP .om refuses); returns
        the modelPath that names it."""
        card = json.loads(self.card.read_text(encoding="utf-8"))
        del card["aipp"]
        card["input"].update(color="RGB", mean=127.5, std=127.5)
        (self.root / "models" / f"{stem}.json").write_text(json.dumps(card), encoding="utf-8")
        return f"models/{stem}.om"

    @staticmethod
    def network_input(bgr: np.ndarray) -> np.ndarray:
        """The shipped AIPP by hand: BGR -> RGB, (x - 127.5) * 0.007843137254902, 1 x 3 x H x W float32."""
        rgb = bgr[..., ::-1].astype(np.float64)
        return ((rgb - 127.5) * 0.007843137254902).transpose(2, 0, 1)[None].astype(np.float32)

    @staticmethod
    def probabilities(tensor: np.ndarray) -> np.ndarray:
        """The tiny network in NumPy: H x W x 2 softmax of the 1x1 convolution of a 1 x 3 x H x W tensor."""
        x = tensor[0].astype(np.float64)
        logits = np.einsum("kc,chw->hwk", TINY_WEIGHT.astype(np.float64), x) + TINY_BIAS
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test's cache (decoded inputs, int8 models) in a folder of its own, never the user's ~/.cache."""
    folder = tmp_path_factory.mktemp("segscope-cache")
    monkeypatch.setenv("SEGSCOPE_CACHE_DIR", str(folder))
    monkeypatch.delenv("SEGSCOPE_NO_CACHE", raising=False)
    monkeypatch.delenv("SEGSCOPE_CACHE_SIZE_GB", raising=False)
    cache_settings.configure()  # what a command line configured in this process before is forgotten
    yield folder
    cache_settings.configure()


@pytest.fixture(autouse=True, scope="session")
def hypothesis_storage(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Hypothesis keeps what it stores (its cache of the source's constants) in a temporary folder, not in a
    `.hypothesis/` of the checkout."""
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))


@pytest.fixture(scope="session")
def byo() -> ModuleType:
    """tests/support/byo_helpers.py (the bring-your-own model builders), as test modules import it."""
    return byo_helpers


@pytest.fixture
def tiny_model_project(tmp_path: Path) -> TinyProject:
    """tmp/project/{pipelines/unet_simple_opencv.pipeline, models/{unet_hw960_bs1.json, tiny.onnx, aipp cfg}}.

    The shipped pipeline names models/unet_hw960_bs1.om; its card (the .json beside it) points at tiny.onnx.
    No .om exists, as on a laptop without Ascend tools.
    """
    root = tmp_path / "project"
    (root / "pipelines").mkdir(parents=True)
    (root / "models").mkdir()
    pipeline = root / "pipelines" / SHIPPED_PIPELINE.name
    shutil.copyfile(SHIPPED_PIPELINE, pipeline)
    shutil.copyfile(SHIPPED_AIPP, root / "models" / SHIPPED_AIPP.name)
    onnx_path = root / "models" / "tiny.onnx"
    make_tiny_onnx(onnx_path)
    card = root / "models" / "unet_hw960_bs1.json"
    card.write_text(json.dumps(tiny_card(), indent=2), encoding="utf-8")
    return TinyProject(root, pipeline, onnx_path, card)


def _write_png(path: Path, array: np.ndarray) -> Path:
    """Write a PNG with OpenCV directly (independent of the code under test); works for non-ASCII paths."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ok, buf = cv2.imencode(path.suffix or ".png", array)
    assert ok
    buf.tofile(str(path))
    return path


def make_slide(rng: np.random.Generator, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """A light textured BGR slide with a dark ellipse (the defect) and its 0/255 mask."""
    image = rng.integers(170, 230, (height, width, 3), dtype=np.uint8)
    mask = np.zeros((height, width), np.uint8)
    centre = (int(rng.integers(width // 4, 3 * width // 4)), int(rng.integers(height // 4, 3 * height // 4)))
    axes = (int(rng.integers(3, width // 4)), int(rng.integers(3, height // 4)))
    cv2.ellipse(mask, centre, axes, float(rng.uniform(0, 180)), 0, 360, 255, -1)
    image[mask > 0] = rng.integers(10, 60, (int((mask > 0).sum()), 3), dtype=np.uint8)
    return image, mask


@pytest.fixture
def write_png() -> Callable[[Path, np.ndarray], Path]:
    """`write_png(path, array)`: encode with OpenCV by the path's suffix and write (parents created)."""
    return _write_png


@pytest.fixture
def small_dataset(tmp_path: Path) -> Path:
    """DIR/{1,2,10}/image.png + mask.png (64x48 slides) and DIR/3/image.png without a mask."""
    root = tmp_path / "dataset"
    rng = np.random.default_rng(7)
    for item in ("1", "2", "3", "10"):
        image, mask = make_slide(rng, 64, 48)
        _write_png(root / item / "image.png", image)
        if item != "3":
            _write_png(root / item / "mask.png", mask)
    return root


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`<repo>/../shared/data` (real industrial images); the test is skipped when it is absent."""
    path = REPO.parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"real data folder {path} not present")
    return path


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
