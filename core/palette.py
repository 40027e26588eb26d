"""The colours SegScope gives classes, in one place for the viewer (`gui.colormaps`), the GeoJSON export's
QuPath classifications and the report: the Okabe-Ito palette, which stays distinguishable with the common
forms of colour blindness."""

from __future__ import annotations

#: Okabe-Ito colours as RGB.
ORANGE = (230, 159, 0)
SKY_BLUE = (86, 180, 233)
BLUISH_GREEN = (0, 158, 115)
YELLOW = (240, 228, 66)
BLUE = (0, 114, 178)
VERMILLION = (213, 94, 0)
REDDISH_PURPLE = (204, 121, 167)

#: Colours of class 1, 2, ... (class 0, the background, is black or transparent).
CLASS_COLORS = (YELLOW, SKY_BLUE, VERMILLION, BLUISH_GREEN, REDDISH_PURPLE, ORANGE, BLUE)


def class_color(index: int) -> tuple[int, int, int]:
    """The RGB colour of class `index` (>= 1); the palette repeats past its length."""
    return CLASS_COLORS[(index - 1) % len(CLASS_COLORS)]
