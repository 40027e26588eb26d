"""One describer for both front ends: a user error is its one line, its option worded by the front end; anything
else is a bug with its traceback."""

from __future__ import annotations

import pickle

import pytest

from segscope.core.errors import SegScopeError, describe
from segscope.core.roi import Roi
from segscope.core.wholeslide.tiling import Stitcher

LABELS = {"--output-scale": "Output scale"}


def stitcher_error(scale: float) -> SegScopeError:
    with pytest.raises(SegScopeError) as info:
        Stitcher(Roi(0, 0, 64, 64), (64, 64), scale, 2)
    return info.value


def test_an_option_error_reads_as_the_flag_on_the_command_line_and_as_the_label_in_the_viewer():
    error = stitcher_error(0.0)
    assert error.option == "--output-scale"
    assert str(error) == "--output-scale: must be a positive number, got 0.0"  # the CLI's text, as before
    cli = describe(error)
    assert (cli.bug, cli.line) == (False, "--output-scale: must be a positive number, got 0.0")
    viewer = describe(error, LABELS)
    assert (viewer.bug, viewer.line) == (False, "Output scale: must be a positive number, got 0.0")
    # the Messages details: the user's words and the flag, never the class name "SegScopeError:"
    assert viewer.details == "Output scale: must be a positive number, got 0.0\n(on the command line: --output-scale)"
    assert cli.details == cli.line


def test_an_option_without_a_label_and_an_error_without_an_option_stay_as_they_are():
    with pytest.raises(SegScopeError) as info:
        Roi.parse("1,2,3")
    assert describe(info.value, LABELS).line == "--roi: expected four integers x0,y0,x1,y1, got '1,2,3'"
    plain = SegScopeError("data/x.png: not an image")
    assert plain.option is None and describe(plain, LABELS).line == "data/x.png: not an image"


def test_a_bug_is_its_type_and_text_with_the_traceback():
    try:
        {}["roi"]
    except KeyError as exc:
        described = describe(exc, LABELS)
    assert described.bug and described.line == "KeyError: 'roi'"
    assert described.details.startswith("Traceback (most recent call last):")
    assert described.details.rstrip().endswith("KeyError: 'roi'")


def test_the_option_survives_pickling_as_between_a_cluster_worker_and_the_client():
    error = pickle.loads(pickle.dumps(stitcher_error(-1.0)))
    assert str(error) == "--output-scale: must be a positive number, got -1.0"
    assert describe(error, LABELS).line == "Output scale: must be a positive number, got -1.0"
