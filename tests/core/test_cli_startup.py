"""`segscope` starts without importing what the command line does not run: building the parser (every
subcommand's options) and parsing a command imports no subcommand's run code and none of the libraries only
some runs use; each command imports those when it runs. Checked in a fresh interpreter (`sys.modules`), not
timed."""

from __future__ import annotations

import subprocess
import sys

import cv2
import numpy as np
import pytest

#: Each was imported by `from segscope.core.cli import main` before the subcommands imported their run code
#: in their handlers: none of them is needed to build the parser or to parse a command line.
RUN_ONLY = (
    "tifffile",  # the OME-TIFF writer of `eval --tile --export`
    "imagecodecs",
    "importlib.metadata",  # the version line, read for --version only
    "email",
    "xml.etree.ElementTree",  # OME-XML of TIFF slides
    "pycocotools",  # the COCO export
    "diskcache",  # the decoded-input cache's store, opened when a run decodes inputs
    "sqlite3",
    "segscope.core.card.builder",
    "segscope.core.stream.check",
    "segscope.core.cli.eval_driver",
    "segscope.core.cli.eval_image",
    "segscope.core.cli.eval_tiled",
    "segscope.core.report.collect",
    "segscope.core.cli.review_run",
    "segscope.core.review.queue",
    "segscope.core.profiling.insight",
    "segscope.core.wholeslide.export",
    "segscope.core.export.files",
    "segscope.core.cache.store",
    "onnxruntime",  # eval's --precision options no longer come with the variants (precision_options)
    "segscope.core.evaluate",
    "segscope.core.backends.embedded",
)


def loaded_after(code: str) -> list[str]:
    """The modules of `RUN_ONLY` a fresh interpreter holds after running `code`."""
    script = f"import sys\n{code}\nprint(*[m for m in {RUN_ONLY!r} if m in sys.modules], sep='\\n')"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("argv", [
    ["eval", "--dataset", "d", "--precision", "int8"],
    ["eval", "--dataset", "d", "--tile", "--export", "out"],
    ["report", "--dataset", "d", "--out", "r.html"],
    ["review", "--dataset", "d", "--against", "b.pipeline", "--json"],
    ["card", "m.onnx", "--out", "p", "--size", "352x352"],
    ["check", "a.pipeline"],
    ["profile", "--import", "op_summary.csv"],
    ["cache", "info"],
    ["demo", "d"],
])
def test_parsing_a_command_line_imports_no_run_code(argv) -> None:
    code = f"from segscope.core.cli import build_parser\nbuild_parser().parse_args({argv!r})"
    assert loaded_after(code) == []


@pytest.mark.parametrize("argv", [["--help"], ["eval", "--help"], ["--version"], ["eval", "--dataset"]])
def test_help_version_and_usage_errors_import_no_run_code(argv) -> None:
    code = ("import contextlib, io\nfrom segscope.core.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            f"    try:\n        main({argv!r})\n    except SystemExit:\n        pass")
    read_for_version = {"importlib.metadata", "email"} if argv == ["--version"] else set()  # the package's metadata
    assert set(loaded_after(code)) <= read_for_version


def test_a_png_is_never_offered_to_openslide(tmp_path) -> None:
    pytest.importorskip("openslide")
    image = np.zeros((40, 60, 3), np.uint8)
    assert cv2.imwrite(str(tmp_path / "image.png"), image)
    code = ("import sys\nfrom pathlib import Path\nfrom segscope.core.slides import open_slide, slide_size\n"
            f"path = Path({str(tmp_path / 'image.png')!r})\n"
            "with open_slide(path) as slide:\n    print(slide_size(path), slide.size)\n"
            "print('openslide' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["(60, 40) (60, 40)", "False"]
