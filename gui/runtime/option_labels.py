"""How the viewer names the options core's errors carry (`SegScopeError.option`): the control a user changes,
where the command line names its flag. An option the viewer has no control for stays its flag."""

from __future__ import annotations

OPTION_LABELS = {
    "--output-scale": "Output scale",  # Run > Whole-slide output scale…
    "--roi": "ROI",  # the box dragged on the slide
}
