"""The colours SegScope draws with, in one place for the viewer (`gui.colormaps`), the exports (the heatmap
image, the GeoJSON export's QuPath classifications) and the report: the Okabe-Ito palette, which stays
distinguishable with the common forms of colour blindness, for classes and for any other series (stages,
operator types), and one colour map for the probability heatmap."""

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


#: Colours of series that are not classes (timing stages, operator types), in order; greys after the seven.
SERIES_COLORS = (SKY_BLUE, ORANGE, BLUISH_GREEN, YELLOW, BLUE, VERMILLION, REDDISH_PURPLE, (150, 150, 150),
                 (90, 90, 90), (200, 200, 200))

#: The probability heatmap's colour map, by name: perceptually uniform and colour-blind safe, shipped with
#: pyqtgraph (the viewer) and OpenCV (`cv2.COLORMAP_VIRIDIS`: the exported heatmap images).
HEATMAP_COLORMAP = "viridis"


def series_color(index: int) -> tuple[int, int, int]:
    """The RGB colour of series `index` (>= 0); the palette repeats past its length."""
    return SERIES_COLORS[index % len(SERIES_COLORS)]
