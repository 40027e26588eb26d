"""The mindx.sdk and ais_bench doubles keep the behaviours of their contracts (docs/mindx-model-api-contract.md,
docs/ais-bench-contract.md) that SegScope's backends must cope with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from .conftest import make_om_project


@pytest.fixture
def base(model_api_home: Path):
    import sys

    sys.path.insert(0, str(model_api_home / "python"))
    from mindx.sdk import base

    return base


@pytest.fixture
def interface(ais_bench_api: None):
    from ais_bench.infer import interface

    return interface


@pytest.fixture(scope="module")
def card(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_om_project(tmp_path_factory.mktemp("doubles"), size=16)


def test_a_tensor_copies_memory_as_it_lies(base) -> None:
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = base.Tensor(array.T)  # a transposed view: the SDK copies the untransposed bytes (its docs' warning)
    assert tensor.shape == [3, 2] and tensor.dtype == base.float32
    np.testing.assert_array_equal(np.array(tensor), array.reshape(3, 2))
    tensor.to_device(0)
    with pytest.raises(RuntimeError):  # a device address read on the host
        np.array(tensor)
    tensor.to_host()
    with pytest.raises(RuntimeError):
        base.Tensor(np.zeros(2, np.complex64))


def test_the_model_api_rules(base, card: Path) -> None:
    om = str(card.with_suffix(".om"))
    with pytest.raises(RuntimeError, match="Code = 1013"):  # no mx_init yet
        base.Model(om, 0)
    assert base.mx_init() == 0 and base.mx_init() == 1030
    with pytest.raises(TypeError):
        base.Model(om, deviceId=0)  # the bindings take *args
    model = base.Model(om, 0)
    assert (model.input_shape(0), model.input_dtype(0), model.input_num, model.output_num) == \
        ([1, 16, 16, 3], base.uint8, 1, 2)
    assert (model.output_shape(0), model.output_dtype(1), model.model_gear()) == ([1, 16, 16, 2], base.int32, [])
    wrong = base.Tensor(np.zeros((1, 16, 16, 3), np.float32))
    assert model.infer([wrong]) == []  # a failed input check returns nothing, it does not raise
    pixels = np.random.default_rng(0).integers(0, 256, (1, 16, 16, 3), dtype=np.uint8)
    outputs = model.infer([base.Tensor(pixels)])
    assert [o.device for o in outputs] == [0, 0]
    for output in outputs:
        output.to_host()
    # the AIPP compiled in (BGR -> RGB, (x - 127.5) * 0.007843137254902), written out by hand, then the network
    session = ort.InferenceSession(str(card.with_suffix(".onnx")), providers=["CPUExecutionProvider"])
    by_hand = ((pixels[..., ::-1].astype(np.float64) - 127.5) * 0.007843137254902).transpose(0, 3, 1, 2)
    expected = session.run(None, {"input": by_hand.astype(np.float32)})
    np.testing.assert_allclose(np.array(outputs[0]), expected[0], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(np.array(outputs[1]), expected[1])
    del model, wrong, outputs
    assert base.mx_deinit() == 0 and base.VIOLATIONS == []


def test_the_ais_bench_rules(interface, card: Path) -> None:
    session = interface.InferSession(0, str(card.with_suffix(".om")))
    (desc,) = session.get_inputs()
    assert (desc.name, desc.datatype.name, desc.format, desc.shape, desc.realsize) == \
        ("input", "uint8", 1, [1, 16, 16, 3], 16 * 16 * 3)
    pixels = np.zeros((1, 16, 16, 3), np.uint8)
    with pytest.raises(RuntimeError, match="wrong infer_mode"):
        session.infer([pixels], mode="dynbatch")  # the guide's spelling; the code's is dymbatch
    with pytest.raises(RuntimeError, match="input size 3072 but the model needs 768"):
        session.infer([pixels.astype(np.float32)])  # bytes as they lie: 4 per pixel for a uint8 input
    outputs = [session.infer([pixels]) for _ in range(2)]
    assert [o.shape for o in outputs[0]] == [(1, 16, 16, 2), (1, 16, 16)]
    assert len(session.summary().exec_time_list) == 2
    session.reset_summaryinfo()
    assert session.summary().exec_time_list == []
    session.free_resource()
    with pytest.raises(RuntimeError):
        session.infer([pixels])
