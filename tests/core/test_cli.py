"""The `segscope` command: eval, demo, compare, exit codes and one-line errors."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core import cli
from segscope.core.backend_spec import BackendSpec, open_backend
from segscope.core.cli import compare as compare_cli
from segscope.core.metrics.scores import image_metrics
from segscope.core.roi import Roi

from helpers import run_cli, without_cache_note

COMPARE_KEYS = ["cosine_similarity", "relative_euclidean_distance", "max_absolute_error",
                "mean_absolute_error", "root_mean_square_error", "max_relative_error", "mean_relative_error",
                "cumulative_relative_error", "kl_divergence", "std_reference", "std_candidate"]




def expected_metrics(pipeline: Path, dataset: Path, ids: list[str], roi: Roi | None = None) -> dict:
    """Each image's metrics computed here with the backend and metrics modules (whole image by default)."""
    metrics = {}
    with open_backend(BackendSpec("embedded", pipeline)) as backend:
        for item in ids:
            image = dataset / item / "image.png"
            mask = cv2.imread(str(dataset / item / "mask.png"), cv2.IMREAD_GRAYSCALE)
            result = backend.infer(image, roi)
            metrics[item] = image_metrics(result, mask)
    return metrics


def assert_one_line_error(capsys, *parts: object) -> str:
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("segscope: error: "), err
    for part in parts:
        assert str(part) in err, err
    return err


# --- eval ---------------------------------------------------------------------------------------------


def test_eval_prints_the_original_lines(tiny_model_project, small_dataset, capsys):
    mask = cv2.imread(str(small_dataset / "2" / "mask.png"), cv2.IMREAD_GRAYSCALE)
    mask[:6, :10] = 255  # truth the model cannot find (light pixels): hard Dice and IoU below 1, and apart
    cv2.imwrite(str(small_dataset / "2" / "mask.png"), mask)
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline)
    assert code == 0
    assert without_cache_note(capsys.readouterr().err) == ""  # no progress bar when stderr is not a terminal
    lines = out.splitlines()
    assert len(lines) == 7
    metrics = expected_metrics(tiny_model_project.pipeline, small_dataset, ["1", "2", "10"])
    for line, item in zip(lines[:4], ["1", "2", "3", "10"]):
        path = small_dataset / item / "image.png"
        if item == "3":
            assert line == f"image: {path}, dice: n/a, iou: n/a (no mask)"
            continue
        m = metrics[item]
        digest = hashlib.sha256((small_dataset / item / "mask.png").read_bytes()).hexdigest()[:12]
        assert line == (f"image: {path}, dice: {m.soft_dice:.6f}, iou: {m.soft_iou:.6f}, "
                        f"hard dice: {m.foreground_dice:.6f}, hard iou: {m.foreground_iou:.6f}, "
                        f"truth: original {item}/mask.png (sha256 {digest})")
    mean_dice = np.mean([m.soft_dice for m in metrics.values()])
    mean_iou = np.mean([m.soft_iou for m in metrics.values()])
    prefix_dice, prefix_iou = "========== Cross Valid dice coeff is: ", "========== Cross Valid IOU is: "
    assert lines[4].startswith(prefix_dice) and lines[5].startswith(prefix_iou)
    assert float(lines[4].removeprefix(prefix_dice)) == pytest.approx(mean_dice, rel=1e-12)
    assert float(lines[5].removeprefix(prefix_iou)) == pytest.approx(mean_iou, rel=1e-12)
    prefix_hard, suffix_hard = "========== Hard foreground dice is: ", " (over 3 images with masks)"
    assert lines[6].startswith(prefix_hard) and lines[6].endswith(suffix_hard)
    hard = float(lines[6].removeprefix(prefix_hard).removesuffix(suffix_hard))
    assert hard == pytest.approx(np.mean([m.foreground_dice for m in metrics.values()]), rel=1e-12)
    # The means differ here, so printing one on another's line (or in another's field) cannot pass.
    assert len({round(v, 9) for v in (mean_dice, mean_iou, hard)}) == 3
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    summary = json.loads(out)["summary"]
    for key in ("soft_dice", "soft_iou", "foreground_dice", "foreground_iou"):
        assert summary[key] == pytest.approx(np.mean([getattr(m, key) for m in metrics.values()]), rel=1e-12)
    assert summary["foreground_iou"] < summary["foreground_dice"] < 1.0


def test_eval_without_any_mask_says_so_and_writes_valid_json(tiny_model_project, small_dataset):
    for item in ("1", "2", "10"):
        (small_dataset / item / "mask.png").unlink()
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline)
    assert code == 0
    assert "========== Cross Valid dice coeff is: n/a (no image has a mask)" in out.splitlines()
    assert "nan" not in out
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    assert code == 0
    summary = json.loads(out)["summary"]  # strict JSON: NaN would not parse in other tools
    assert summary["images_with_masks"] == 0 and summary["soft_dice"] is None and "NaN" not in out


def test_eval_json_with_roi(tiny_model_project, small_dataset):
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
                        "--roi", "8,4,56,40", "--json")
    assert code == 0
    document = json.loads(out)
    rows = document["images"]
    assert [r["id"] for r in rows] == ["1", "2", "3", "10"]
    assert all(r["roi"] == "8,4,56,40" for r in rows)
    assert "soft_dice" not in rows[2]
    metrics = expected_metrics(tiny_model_project.pipeline, small_dataset, ["1", "2", "10"],
                               Roi(8, 4, 56, 40))
    for row in (rows[0], rows[1], rows[3]):
        m = metrics[row["id"]]
        assert row["soft_dice"] == pytest.approx(m.soft_dice, rel=1e-12)
        assert row["precision"] == pytest.approx(m.precision) and row["recall"] == pytest.approx(m.recall)
        assert row["dice"] == pytest.approx(list(m.dice))
        stages = ("decode", "crop", "resize", "preprocess", "infer", "postprocess")
        assert {f"time_{s}_ms" for s in stages} <= set(row)
    summary = document["summary"]
    assert summary["images_with_masks"] == 3
    assert summary["soft_dice"] == pytest.approx(np.mean([m.soft_dice for m in metrics.values()]), rel=1e-12)
    for key in ("soft_dice", "soft_iou", "foreground_dice", "foreground_iou"):
        expected = np.mean([getattr(m, key) for m in metrics.values()])
        assert summary[key] == pytest.approx(expected, rel=1e-12), key
    # What ranks the images worst first, and what each number is.
    assert document["ranking"]["name"] == "foreground_dice" and document["ranking"]["higher_is_better"] is True
    assert {m["name"] for m in document["metrics"]} >= {"soft_dice", "foreground_dice", "dice_<i>"}


def test_eval_export(tiny_model_project, small_dataset, tmp_path, capsys):
    out_dir = tmp_path / "out"
    args = ["eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
            "--export", out_dir]
    code, _ = run_cli(*args)
    assert code == 0
    assert (f"segscope: note: exported mask, canvas, softmax, heatmap for 4 images, and metrics.csv and "
            f"metrics.json, to {out_dir}") in capsys.readouterr().err.splitlines()  # where the files went
    kinds = ("mask.png", "mask_full.png", "softmax.npy", "heatmap.png", "provenance.json")
    expected = {f"{i}_{kind}" for i in ("1", "2", "3", "10") for kind in kinds}
    expected |= {"metrics.csv", "metrics.json"}
    assert {p.name for p in out_dir.iterdir()} == expected
    mask = cv2.imread(str(out_dir / "1_mask.png"), cv2.IMREAD_UNCHANGED)
    assert mask.shape == (48, 64) and set(np.unique(mask)) <= {0, 255}
    assert np.load(out_dir / "10_softmax.npy").shape == (960, 960, 2)
    provenance = json.loads((out_dir / "1_provenance.json").read_text())
    assert provenance["backend"] == "embedded" and provenance["model"]["file"].endswith(".onnx")
    assert len(provenance["model"]["sha256"]) == 64 and provenance["source_image"].endswith("image.png")
    document = json.loads((out_dir / "metrics.json").read_text())
    assert [r["id"] for r in document["images"]] == ["1", "2", "3", "10"]
    assert (out_dir / "metrics.csv").read_text().splitlines()[0].startswith("id,image,roi,")
    before = (out_dir / "1_mask.png").read_bytes()
    capsys.readouterr()
    code, _ = run_cli(*args)
    assert code == 2
    assert_one_line_error(capsys, f"{out_dir / '1_mask.png'} and 21 more files: each already exists", "--overwrite")
    assert (out_dir / "1_mask.png").read_bytes() == before
    code, _ = run_cli(*args, "--overwrite", "--export-kinds", "mask")
    assert code == 0 and (out_dir / "1_mask.png").read_bytes() == before


def test_demo_then_eval(tiny_model_project, tmp_path, capsys):
    demo = tmp_path / "demo"
    code, out = run_cli("demo", demo, "--count", "1")
    assert code == 0 and "wrote 1 demo slides" in out
    assert sorted(p.name for p in demo.iterdir()) == ["001"]
    code, out = run_cli("eval", "--dataset", demo, "--pipeline", tiny_model_project.pipeline, "--json")
    assert code == 0
    rows = json.loads(out)["images"]
    assert [r["roi"] for r in rows] == ["2200,1000,4000,2800"]  # a 4000x3000 slide: the original default
    metrics = expected_metrics(tiny_model_project.pipeline, demo, ["001"], Roi(2200, 1000, 4000, 2800))
    for row in rows:
        assert row["soft_dice"] == pytest.approx(metrics[row["id"]].soft_dice, rel=1e-12)
        assert 0.0 <= row["soft_dice"] <= 1.0
    capsys.readouterr()
    assert run_cli("demo", demo, "--count", "1")[0] == 2
    assert_one_line_error(capsys, demo / "001" / "image.png", "already exists")


# --- one-line errors ----------------------------------------------------------------------------------


def test_missing_dataset(tiny_model_project, tmp_path, capsys):
    assert run_cli("eval", "--dataset", tmp_path / "nope", "--pipeline", tiny_model_project.pipeline)[0] == 2
    assert_one_line_error(capsys, tmp_path / "nope", "dataset folder not found")


@pytest.mark.parametrize("roi", ["1,2,3", "a,b,c,d", "5,5,2,2", "-1,0,4,4"])
def test_bad_roi(tiny_model_project, small_dataset, capsys, roi):
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
                      f"--roi={roi}")
    assert code == 2
    assert_one_line_error(capsys, "--roi")


def test_roi_outside_the_image_names_the_image(tiny_model_project, small_dataset, capsys):
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
                      "--roi", "100,100,200,200")
    assert code == 2
    assert_one_line_error(capsys, "lies outside", small_dataset / "1" / "image.png")


def test_bad_pipeline(small_dataset, tmp_path, capsys):
    bad = tmp_path / "bad.pipeline"
    bad.write_text('{"s": {"a": {"factory": "appsrc"')
    assert run_cli("eval", "--dataset", small_dataset, "--pipeline", bad)[0] == 2
    assert_one_line_error(capsys, f"{bad}:1:", "invalid JSON")
    assert run_cli("eval", "--dataset", small_dataset, "--pipeline", tmp_path / "absent.pipeline")[0] == 2
    assert_one_line_error(capsys, tmp_path / "absent.pipeline", "not found")


def test_corrupt_image(tiny_model_project, small_dataset, capsys):
    broken = small_dataset / "2" / "image.png"
    broken.write_bytes(broken.read_bytes()[:60])
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline)
    assert code == 2
    assert_one_line_error(capsys, broken, "not a readable image")
    assert out.startswith(f"image: {small_dataset / '1' / 'image.png'}, dice: ")  # image 1 was done


def test_mask_of_the_wrong_size(tiny_model_project, small_dataset, capsys, write_png):
    mask = write_png(small_dataset / "10" / "mask.png", np.zeros((48, 63), np.uint8))
    assert run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline)[0] == 2
    assert_one_line_error(capsys, mask, "mask is 63x48 but the image is 64x48")


def test_image_over_the_pixel_limit(tiny_model_project, small_dataset, capsys):
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
                      "--max-pixels", "3000")
    assert code == 2
    assert_one_line_error(capsys, small_dataset / "1" / "image.png", "over the limit of 3,000",
                          "--max-pixels")


def test_export_to_an_unwritable_place_is_a_user_error(tiny_model_project, small_dataset, tmp_path, capsys):
    not_a_folder = tmp_path / "out"
    not_a_folder.write_text("a file where the export folder should be")
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
                      "--export", not_a_folder)
    assert code == 2
    assert_one_line_error(capsys, not_a_folder, "cannot write here")


# --- compare ------------------------------------------------------------------------------------------


def test_compare_prints_every_metric(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    np.save(tmp_path / "b.npy", np.array([[1.0, 2.0], [3.0, 5.0]], np.float32))
    code, out = run_cli("compare", tmp_path / "a.npy", tmp_path / "b.npy")
    assert code == compare_cli.EXIT_FAIL == 3 and capsys.readouterr().err == ""  # FAIL: not 0, apart from 2
    values = {}
    *metric_lines, verdict = out.splitlines()
    for line in metric_lines:
        key, value = line.split()
        values[key] = float(value)
    assert list(values) == COMPARE_KEYS
    assert verdict.startswith("FAIL: relative Euclidean")  # the thresholds: tests/core/test_profiling_imports.py
    assert values["cosine_similarity"] == pytest.approx(34 / math.sqrt(30 * 39), rel=1e-8)
    assert values["relative_euclidean_distance"] == pytest.approx(1 / math.sqrt(30), rel=1e-8)
    assert values["max_absolute_error"] == 1.0 and values["mean_absolute_error"] == 0.25
    assert values["root_mean_square_error"] == 0.5
    assert values["cumulative_relative_error"] == pytest.approx(0.1)
    assert values["max_relative_error"] == pytest.approx(0.25)
    assert values["mean_relative_error"] == pytest.approx(0.0625)
    assert values["std_reference"] == pytest.approx(math.sqrt(1.25), rel=1e-8)
    assert values["kl_divergence"] > 0
    code, out = run_cli("compare", tmp_path / "a.npy", tmp_path / "b.npy", "--json")
    document = json.loads(out)
    assert code == 3 and list(document) == [*COMPARE_KEYS, "verdict"] and document["verdict"] == verdict
    assert json.loads(out)["kl_divergence"] == pytest.approx(values["kl_divergence"], rel=1e-8)


def test_compare_exit_code_says_pass_or_fail_and_help_documents_it(tmp_path, capsys):
    reference = np.array([[0.1, 0.9], [0.8, 0.2]], np.float32)
    np.save(tmp_path / "a.npy", reference)
    np.save(tmp_path / "same.npy", reference)
    np.save(tmp_path / "far.npy", reference[::-1])  # cosine 0.1*0.8+0.9*0.2+... well below 0.99
    for extra in ((), ("--json",)):
        code, out = run_cli("compare", tmp_path / "a.npy", tmp_path / "same.npy", *extra)
        assert code == 0 and "PASS" in out
        code, out = run_cli("compare", tmp_path / "a.npy", tmp_path / "far.npy", *extra)
        assert code == 3 and "FAIL: cosine" in out and capsys.readouterr().err == ""
    # a lenient threshold passes what the default fails: the code follows the verdict, not the data
    assert run_cli("compare", tmp_path / "a.npy", tmp_path / "far.npy", "--cosine", "0", "--rel-euclidean", "10",
                   "--kl", "100")[0] == 0
    for argv, documented in ((["compare", "--help"], "0 PASS, 3 FAIL"),
                             (["--help"], "3 a failed check (compare's FAIL verdict")):
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert documented in " ".join(capsys.readouterr().out.split())


def test_small_texts_of_demo_and_cache(capsys, tmp_path):
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for option in ("--count COUNT how many slides, 1 to 10000 (default 8)", "--seed SEED the random seed",
                   "--overwrite replace existing files", "dir the folder to write"):
        assert option in shown, shown
    assert run_cli("cache", "--cache-dir", tmp_path)[0] == 2  # no action: both are named, with what they do
    assert_one_line_error(capsys, "segscope cache needs an action: `segscope cache info`: where the cache is",
                          "`segscope cache clear`: remove the decoded inputs")


def test_an_option_is_taken_only_by_its_whole_name(tmp_path, capsys):
    """`eval --out DIR` (review's and report's option) was taken as the one option it starts, --output-scale, and
    refused as a bad scale; a number there would have changed the run without a word."""
    for args in (("eval", "--dataset", tmp_path, "--out", "0.5"), ("review", "--dataset", tmp_path, "--min", "1")):
        assert run_cli(*args)[0] == 2  # pointed to the help that lists the command's options
        assert_one_line_error(capsys, f"unrecognized arguments: {args[3]} {args[4]} (see segscope {args[0]} --help)")


def test_compare_errors(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((3, 2), np.float32))
    (tmp_path / "c.npy").write_text("not numpy")
    assert run_cli("compare", tmp_path / "a.npy", tmp_path / "b.npy")[0] == 2
    assert_one_line_error(capsys, tmp_path / "b.npy", "(3, 2)", "(2, 3)", "compare the same output of the same input")
    (tmp_path / "cut.npy").write_bytes((tmp_path / "a.npy").read_bytes()[:40])  # the header itself cut short
    assert run_cli("compare", tmp_path / "a.npy", tmp_path / "cut.npy")[0] == 2
    assert_one_line_error(capsys, tmp_path / "cut.npy", "unreadable .npy header", "save the tensor again with "
                          "numpy.save")
    assert run_cli("compare", tmp_path / "a.npy", tmp_path / "absent.npy")[0] == 2
    assert_one_line_error(capsys, tmp_path / "absent.npy", "file not found")
    assert run_cli("compare", tmp_path / "c.npy", tmp_path / "a.npy")[0] == 2
    assert_one_line_error(capsys, tmp_path / "c.npy", "not a NumPy .npy file")
    cv2.imwrite(str(tmp_path / "image.png"), np.zeros((4, 4), np.uint8))  # the user passed an image by mistake
    assert run_cli("compare", tmp_path / "image.png", tmp_path / "a.npy")[0] == 2
    assert_one_line_error(capsys, tmp_path / "image.png", "not a NumPy .npy file")
    pickled = np.array([{"a": 1}], dtype=object)
    np.save(tmp_path / "objects.npy", pickled, allow_pickle=True)
    assert run_cli("compare", tmp_path / "objects.npy", tmp_path / "a.npy")[0] == 2
    assert_one_line_error(capsys, tmp_path / "objects.npy", "holds object values")


def test_internal_errors_exit_1_with_details_on_request(tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "a.npy", np.ones(3))

    def broken(a, b):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(compare_cli, "compare_tensors", broken)
    assert run_cli("compare", tmp_path / "a.npy", tmp_path / "a.npy")[0] == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: ZeroDivisionError: boom" in err and "--debug" in err
    assert run_cli("--debug", "compare", tmp_path / "a.npy", tmp_path / "a.npy")[0] == 1
    assert "Traceback" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["eval"])
    assert info.value.code == 2 and "--dataset" in capsys.readouterr().err


# --- the installed console script ---------------------------------------------------------------------


def segscope_command() -> str:
    script = Path(sys.executable).with_name("segscope")
    found = str(script) if script.exists() else shutil.which("segscope")
    assert found, "the `segscope` console script is not installed (pip install -e .)"
    return found


def test_a_command_ends_with_its_output_whole_and_what_is_registered_for_exit_run(tiny_model_project,
                                                                                  small_dataset, tmp_path):
    """`segscope` skips Python's module teardown after a headless command (`cli.run`): its output still arrives
    whole through a pipe, the exit code is the command's, and what is registered to run at exit (the MindX SDK's
    release of its devices) still runs, after a good run and after a refused one."""
    script = ("import atexit, sys; atexit.register(lambda: print('registered ran', file=sys.stderr)); "
              "sys.argv[0] = 'segscope'; from segscope.core.cli import run; run()")
    done = subprocess.run([sys.executable, "-c", script, "eval", "--dataset", str(small_dataset), "--pipeline",
                           str(tiny_model_project.pipeline), "--json"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["images"]) == 4  # the whole document: the pipe's last buffer too
    assert done.stderr.endswith("registered ran\n")
    done = subprocess.run([sys.executable, "-c", script, "eval", "--dataset", str(tmp_path / "absent")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"segscope: error: {tmp_path / 'absent'}: dataset folder not found\nregistered ran\n"


def test_console_script(tiny_model_project, small_dataset, tmp_path):
    command = segscope_command()
    done = subprocess.run([command, "eval", "--dataset", str(small_dataset), "--pipeline",
                           str(tiny_model_project.pipeline)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"image: {small_dataset / '1' / 'image.png'}, dice: ")
    assert lines[4].startswith("========== Cross Valid dice coeff is: ")
    assert lines[5].startswith("========== Cross Valid IOU is: ")
    done = subprocess.run([command, "eval", "--dataset", str(tmp_path / "absent")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"segscope: error: {tmp_path / 'absent'}: dataset folder not found\n"
