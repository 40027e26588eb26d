"""mindx-model and ais-bench against their doubles: the same numbers as the embedded backend on the card's ONNX
file, the .om's metadata checked against the card, device errors in one line, one mx_init per process."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backend_spec import BackendSpec, Devices, open_backend
from segscope.core.backends.base import InferenceRequest
from segscope.core.backends.mindx_model import deinitialise
from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi

from .conftest import NORMALISED, make_image, make_om_project

KINDS = ("mindx-model", "ais-bench")
#: The sizes users have: slides larger than the model input (64), ROIs of several shapes, the whole image.
ROIS = (Roi(10, 20, 300, 200), None, Roi(150, 40, 170, 230))


@pytest.fixture
def api(request: pytest.FixtureRequest) -> str:
    """Each kind with its double installed: `mindx-model` with a fake $MX_SDK_HOME, `ais-bench` on sys.path."""
    request.getfixturevalue("model_api_home" if request.param == "mindx-model" else "ais_bench_api")
    return request.param


def host() -> object:
    import ascend_om  # the doubles' fake host, imported by the double in this (fake) process

    return ascend_om


@pytest.fixture(scope="module")
def images() -> list[bytes]:
    return [make_image(320, 240, seed) for seed in range(len(ROIS))]


@pytest.fixture(scope="module")
def aipp_card(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_om_project(tmp_path_factory.mktemp("aipp"))


@pytest.fixture(scope="module")
def fp16_card(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """No AIPP: SegScope normalises on the CPU; the .om takes and gives float16 (atc --input_fp16_nodes,
    --output_type=FP16)."""
    return make_om_project(tmp_path_factory.mktemp("fp16"), aipp=False, input_fp16=True, output_fp16=True)


def _embedded(card: Path, images: list[bytes]) -> list:
    with open_backend(BackendSpec("embedded", card)) as backend:
        return [backend.infer(image, roi) for image, roi in zip(images, ROIS)]


@pytest.mark.parametrize("api", KINDS, indirect=True)
def test_the_om_gives_the_embedded_numbers_on_the_onnx(api: str, aipp_card: Path, images: list[bytes]) -> None:
    expected = _embedded(aipp_card, images)
    with open_backend(BackendSpec(api, aipp_card)) as backend:
        assert backend.capabilities.name == api and backend.capabilities.input_size == (64, 64)
        assert backend.capabilities.details["model"] == str(aipp_card.with_suffix(".om"))
        results = [backend.infer(image, roi) for image, roi in zip(images, ROIS)]
        many = list(backend.infer_many([InferenceRequest(image, roi) for image, roi in zip(images, ROIS)]))
    for result, again, reference in zip(results, many, expected):
        # the double does the AIPP in float64 on the uint8 pixels SegScope sends: agreement to float32 rounding
        np.testing.assert_array_equal(result.argmax, reference.argmax)
        np.testing.assert_allclose(result.probabilities, reference.probabilities, rtol=0, atol=1e-6)
        assert (result.roi, result.image_size, result.backend) == (reference.roi, reference.image_size, api)
        np.testing.assert_array_equal(again.probabilities, result.probabilities)
    device_stage = [r.timings.get("device") for r in results]
    if api == "ais-bench":  # the NPU's own time, as summary().exec_time_list reports it (ms)
        assert device_stage == pytest.approx([t / 1000 for t in host().EXEC_TIMES[:len(results)]])
    else:
        assert device_stage == [None] * len(results)


@pytest.mark.parametrize("api", KINDS, indirect=True)
def test_cpu_normalisation_into_a_float16_om(api: str, fp16_card: Path, images: list[bytes]) -> None:
    expected = _embedded(fp16_card, images)
    with open_backend(BackendSpec(api, fp16_card)) as backend:
        results = [backend.infer(image, roi) for image, roi in zip(images, ROIS)]
    for result, reference in zip(results, expected):
        assert result.probabilities.dtype == np.float32
        # float16 in and out: within fp16 rounding of the float32 run, and the class map with it
        np.testing.assert_allclose(result.probabilities, reference.probabilities, rtol=0, atol=2e-3)
        assert np.mean(result.argmax == reference.argmax) > 0.999


@pytest.mark.parametrize("api", KINDS, indirect=True)
def test_a_dynamic_batch_om_runs_at_batch_one(api: str, tmp_path: Path, images: list[bytes]) -> None:
    card = make_om_project(tmp_path, dynamic_batch=[1, 4, 8])
    expected = _embedded(card, images[:1])[0]
    with open_backend(BackendSpec(api, card)) as backend:
        result = backend.infer(images[0], ROIS[0])
    np.testing.assert_allclose(result.probabilities, expected.probabilities, rtol=0, atol=1e-6)


def _edit(path: Path, **changes: object) -> Path:
    """Change a JSON file's top-level fields (None drops one)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}), encoding="utf-8")
    return path


#: The card without AIPP, normalising as the AIPP config does.
NORMALISED_INPUT = {"name": "input", "layout": "NCHW", "width": 64, "height": 64, **NORMALISED}
MISMATCHES = {
    "an AIPP card, an .om without AIPP": ({"aipp": None}, {}, "input: the .om takes float32; the card names an AIPP"),
    "an .om with AIPP, a card without": ({}, {"aipp": None, "input": NORMALISED_INPUT},
                                         "input: the .om takes uint8; it takes pixels, so an AIPP config is "
                                         "compiled in"),
    "dynamic batch without a gear of 1": ({"dynamic_batch": [2, 4]}, {}, "dynamic batch gears are 2, 4, without 1"),
    "another input size": ({"onnx": "small.onnx"}, {}, "input: the .om takes [1, 32, 32, 3] but the card gives "
                                                       "[1, 64, 64, 3]"),
    "an output read in the wrong layout": ({}, {"outputs": [{"name": "softmax", "kind": "softmax", "layout": "NCHW"},
                                                            {"name": "argmax", "kind": "argmax"}]},
                                           "outputs[0].layout: NCHW reads the graph's output 'output"),
}


@pytest.mark.parametrize("api", KINDS, indirect=True)
@pytest.mark.parametrize("case", MISMATCHES)
def test_each_metadata_mismatch_is_one_line(api: str, case: str, tmp_path: Path) -> None:
    from .conftest import build_model

    standin, card_changes, expected = MISMATCHES[case]
    card = make_om_project(tmp_path)
    build_model(card.parent / "small.onnx", 32)
    _edit(card.with_suffix(".om"), **standin)
    _edit(card, onnx=None, **card_changes)  # the card names only the .om: its metadata are all there is to check
    if api == "ais-bench" and case == "dynamic batch without a gear of 1":  # its API lists no gears: the run says
        with open_backend(BackendSpec(api, card)) as backend, pytest.raises(SegScopeError) as raised:
            backend.infer(make_image(80, 60, 0))
        assert str(raised.value).startswith("ais_bench on device 0: inference failed (") and \
            "set dynamic batch size 1 failed" in str(raised.value)
        return
    with pytest.raises(SegScopeError) as raised:
        open_backend(BackendSpec(api, card))
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{card}: ") and message.endswith(" in tiny.om")
    if api == "ais-bench" and case == "an output read in the wrong layout":
        expected = expected.replace("'output", "'softmax")  # ais_bench names the outputs, the Model API does not
    assert expected in message


@pytest.mark.parametrize("api", KINDS, indirect=True)
def test_an_om_the_card_was_not_written_for_is_refused(api: str, tmp_path: Path) -> None:
    card = _edit(make_om_project(tmp_path), sha256={"om": "0" * 64})
    with pytest.raises(SegScopeError, match=r"tiny\.om: its SHA-256 differs from the one tiny\.json records"):
        open_backend(BackendSpec(api, card))


def test_one_mx_init_per_process_and_mx_deinit_after_the_models(model_api_home: Path, aipp_card: Path,
                                                                 images: list[bytes]) -> None:
    for _ in range(2):  # the viewer opens, closes and opens again
        with open_backend(BackendSpec("mindx-model", aipp_card)) as backend:
            backend.infer(images[0])
    left_open = open_backend(BackendSpec("mindx-model", aipp_card))
    from mindx.sdk import base

    assert [name for name, _ in base.CALLS].count("mx_init") == 1
    assert [args for name, args in base.CALLS if name == "Model"] == [(str(aipp_card.with_suffix(".om")), 0)] * 3
    deinitialise()  # at exit: the backend still open is closed first
    assert [name for name, _ in base.CALLS][-1] == "mx_deinit" and base.VIOLATIONS == []
    with pytest.raises(SegScopeError, match="mindx-model backend is closed"):
        left_open.infer(images[0])


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from segscope.core.cli import main

    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _dataset(root: Path, count: int = 2) -> Path:
    import cv2

    for index in range(count):
        folder = root / f"{index:03d}"
        folder.mkdir(parents=True)
        (folder / "image.png").write_bytes(make_image(320, 240, index))
        mask = np.zeros((240, 320), np.uint8)
        cv2.circle(mask, (160, 120), 60, 255, -1)
        cv2.imwrite(str(folder / "mask.png"), mask)
    return root


DEVICE_ERRORS = {
    "a device id the host lacks": ({"FAKE_ASCEND_DEVICES": "2"}, ["--devices", "0,3"], "on device 3: loading the "
                                                                                       "model failed"),
    "a corrupt .om": ({}, [], "on device 0: loading the model failed"),
    "a full device": ({"FAKE_ASCEND_DEVICE_MEMORY": "model"}, [], "copying the input to the device failed"),
}


@pytest.mark.parametrize("api", KINDS, indirect=True)
@pytest.mark.parametrize("case", DEVICE_ERRORS)
def test_device_errors_are_one_line(api: str, case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    environment, flags, expected = DEVICE_ERRORS[case]
    card = make_om_project(tmp_path / "project")
    if case == "a corrupt .om":
        card.with_suffix(".om").write_bytes(b"\x00ATC\x01 truncated")
    for name, value in environment.items():
        if value == "model":  # the model's weights and I/O buffers fit; the Model API's input tensor does not
            value = str((card.parent / "tiny.onnx").stat().st_size + 64 * 64 * 3 + 64 * 64 * 2 * 4 + 64 * 64 * 4
                        - (api == "ais-bench"))  # ais_bench copies into the model's own buffer: the load fails
            expected = expected if api == "mindx-model" else "loading the model failed"
        monkeypatch.setenv(name, value)
    code, out, err = _cli(["eval", "--dataset", str(_dataset(tmp_path / "data", 1)), "--model", str(card),
                           "--backend", api, *flags], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("segscope: error: ") and expected in err and "tiny.om" in err


@pytest.mark.parametrize("api", KINDS, indirect=True)
def test_one_model_per_device(api: str, aipp_card: Path, images: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_ASCEND_DEVICES", "2")
    expected = _embedded(aipp_card, images)
    requests = [InferenceRequest(image, roi) for image, roi in zip(images, ROIS)]
    with open_backend(BackendSpec(api, aipp_card, Devices((0, 1)))) as backend:
        results = list(backend.infer_many(requests))
        usage = backend.usage.as_dicts()  # type: ignore[attr-defined]
    assert [u["name"] for u in usage] == ["device 0", "device 1"] and sum(u["images"] for u in usage) == 3
    for result, reference in zip(results, expected):
        np.testing.assert_allclose(result.probabilities, reference.probabilities, rtol=0, atol=1e-6)


def test_eval_gives_the_same_metrics_on_every_backend(model_api_home: Path, ais_bench_api: None, aipp_card: Path,
                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _dataset(tmp_path)
    runs = {}
    for kind in ("embedded", "mindx-model", "ais-bench"):
        code, out, err = _cli(["eval", "--dataset", str(dataset), "--model", str(aipp_card), "--backend", kind,
                               "--roi", "20,10,300,230", "--json"], capsys)
        assert code == 0, err
        runs[kind] = json.loads(out)
    for kind in ("mindx-model", "ais-bench"):
        for key, value in runs["embedded"]["summary"].items():
            if key == "aggregates":  # per metric: counts and means
                for name, found in value.items():
                    assert runs[kind]["summary"][key][name] == pytest.approx(found, abs=1e-6), name
            else:
                assert runs[kind]["summary"][key] == pytest.approx(value, abs=1e-6), key


def test_auto_picks_the_model_api_for_a_card_and_says_so(model_api_home: Path, aipp_card: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _cli(["eval", "--dataset", str(_dataset(tmp_path, 1)), "--model", str(aipp_card)], capsys)
    assert code == 0, err
    # the MindX stream runs pipelines, so a card goes straight to the Model API
    assert "segscope: note: --backend auto picked mindx-model\n" in err


def test_auto_passes_over_what_is_missing(ais_bench_api: None, aipp_card: Path) -> None:
    with open_backend(BackendSpec("auto", aipp_card)) as backend:
        assert backend.capabilities.name == "ais-bench"
        said = backend.capabilities.details["auto"]
    assert said == "picked ais-bench (not found here: MindX Model API)"


def test_the_mindx_stream_backend_refuses_a_card(aipp_card: Path) -> None:
    with pytest.raises(SegScopeError, match=r"a model card runs without a pipeline, but --backend mindx runs MindX "
                                            r"pipelines: give its \.om to --backend mindx-model or ais-bench"):
        open_backend(BackendSpec("mindx", aipp_card))


@pytest.mark.parametrize("api", KINDS, indirect=True)
def test_profile_reports_the_time_per_inference(api: str, aipp_card: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(["profile", "--dataset", str(_dataset(tmp_path, 3)), "--images", "3", "--model",
                           str(aipp_card), "--backend", api, "--json"], capsys)
    assert code == 0, err
    document = json.loads(out)
    assert document["model"] == str(aipp_card.with_suffix(".om")) and document["ops"] == []
    if api == "ais-bench":  # the NPU's time of the 3 runs after the warm-up one
        assert document["model_ms"] == pytest.approx(np.mean(host().EXEC_TIMES[1:4]))
    else:
        assert document["model_ms"] > 0


MISSING = {"mindx-model": "MindX Model API (mindx.sdk) not found: tried $MX_SDK_HOME (not set); PYTHONPATH (no "
                          "mindx module)",
           "ais-bench": "ais_bench not found (ais_bench and aclruntime not installed): install the aclruntime and "
                        "ais_bench wheels"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_host_without_the_api_gets_one_line(npu_host: None, aipp_card: Path, tmp_path: Path, kind: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _cli(["eval", "--dataset", str(_dataset(tmp_path, 1)), "--model", str(aipp_card), "--backend",
                            kind], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith(f"segscope: error: {MISSING[kind]}")
