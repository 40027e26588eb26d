"""Masks as GeoJSON for QuPath: `<id>_mask.geojson`, a FeatureCollection with one feature per connected
component of each foreground class.

Conventions (QuPath's GeoJSON import): coordinates are full-image pixel coordinates (x right, y down) of pixel
corners, so a pixel (x, y) is the unit square [x, x+1] x [y, y+1] and the polygons cover exactly the mask's
pixels (holes kept as interior rings); each feature has `"objectType": "annotation"` and
`"classification": {"name", "color": [r, g, b]}` from the model card's class names and SegScope's class colours.
A component is 8-connected (as the defect metrics count it); where its pixels touch only at a corner, its
geometry is a MultiPolygon of the edge-connected parts, which meet at that corner. Every ring is simple (it
never passes a corner twice), as OGC validity asks: where a part touches itself at a corner, it becomes an
exterior and a hole that meet there. Exterior rings run counter-clockwise by the shoelace formula on the
coordinates as written, holes clockwise (RFC 7946).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import cv2
import numpy as np

from ..palette import class_color
from ..roi import Roi
from ..wording import class_name

#: Steps (dx, dy) of the four edge directions, y down: east, south, west, north. Walking an edge, the
#: foreground lies on the right.
_STEPS = ((1, 0), (0, 1), (-1, 0), (0, -1))
EAST, SOUTH, WEST, NORTH = range(4)


def _edge_bits(mask: np.ndarray) -> np.ndarray:
    """Per pixel corner (H+1 x W+1), a bit per direction of the boundary edges that start there."""
    height, width = mask.shape
    padded = np.pad(mask, 1)
    inner = padded[1:-1, 1:-1]
    bits = np.zeros((height + 1, width + 1), np.uint8)
    bits[:-1, :-1][inner & ~padded[:-2, 1:-1]] |= 1 << EAST  # top edge, from the top-left corner
    bits[:-1, 1:][inner & ~padded[1:-1, 2:]] |= 1 << SOUTH  # right edge, from the top-right corner
    bits[1:, 1:][inner & ~padded[2:, 1:-1]] |= 1 << WEST  # bottom edge, from the bottom-right corner
    bits[1:, :-1][inner & ~padded[1:-1, :-2]] |= 1 << NORTH  # left edge, from the bottom-left corner
    return bits


def _right_pixel(x: int, y: int, direction: int) -> tuple[int, int]:
    """(row, column) of the foreground pixel on the right of the edge leaving corner (x, y) in `direction`."""
    return ((y, x), (y, x - 1), (y - 1, x - 1), (y - 1, x))[direction]


def boundary_rings(mask: np.ndarray, parts: np.ndarray) -> list[tuple[list[tuple[int, int]], int]]:
    """The closed outlines of a bool mask along pixel edges, each as its corner points (closed: the first
    repeated last) and the label in `parts` (the mask's 4-connected components) of the part it bounds:
    exteriors have a positive shoelace area, holes a negative one."""
    bits = _edge_bits(mask)
    used = np.zeros_like(bits)
    rings = []
    for y0, x0 in zip(*np.nonzero(bits)):
        x0, y0 = int(x0), int(y0)
        while free := int(bits[y0, x0] & ~used[y0, x0]):
            start = (free & -free).bit_length() - 1  # the lowest free direction
            rings.append((_walk(bits, used, parts, x0, y0, start), int(parts[_right_pixel(x0, y0, start)])))
    return rings


def _turn(out: int, parts: np.ndarray, x: int, y: int, direction: int) -> int:
    """The direction that leaves corner (x, y) after arriving there in `direction`. Where two pixels touch
    only at this corner (two ways out), the walk stays around the pixel on its right when they are of
    different parts (two polygons meeting at a point) and crosses to the other when they are of one part
    (its outline and the hole it closes there meeting at a point): either way no ring passes twice."""
    right, left = (direction + 1) % 4, (direction + 3) % 4
    if out >> right & 1 and out >> left & 1:
        dx, dy = _STEPS[direction]
        same = parts[_right_pixel(x - dx, y - dy, direction)] == parts[_right_pixel(x, y, left)]
        return left if same else right
    return next(d for d in (right, direction, left) if out >> d & 1)


def _walk(bits: np.ndarray, used: np.ndarray, parts: np.ndarray, x0: int, y0: int, start: int
          ) -> list[tuple[int, int]]:
    x, y, direction = x0, y0, start
    points: list[tuple[int, int]] = []
    while True:
        used[y, x] |= 1 << direction
        dx, dy = _STEPS[direction]
        x, y = x + dx, y + dy
        turn = _turn(int(bits[y, x]), parts, x, y, direction)
        if turn != direction:
            points.append((x, y))
        if (x, y, turn) == (x0, y0, start):
            return [*points[-1:], *points[:-1], points[-1]]  # starting and ending at the start corner
        direction = turn


def _area(ring: list[tuple[int, int]]) -> float:
    xs, ys = np.array(ring, np.float64).T
    return float(np.dot(xs[:-1], ys[1:]) - np.dot(xs[1:], ys[:-1])) / 2


def class_features(mask: np.ndarray, offset: tuple[int, int], name: str, color: Sequence[int]) -> list[dict]:
    """One GeoJSON feature per 8-connected component of a bool mask, shifted by `offset` (x, y)."""
    edge_parts = cv2.connectedComponents(mask.view(np.uint8), connectivity=4)[1]
    components = cv2.connectedComponents(mask.view(np.uint8), connectivity=8)[1]
    dx, dy = offset
    polygons: dict[int, list[list[list[int]]]] = {}  # edge-connected part -> exterior, holes
    part_of: dict[int, int] = {}  # edge-connected part -> its 8-connected component
    component_of = np.zeros(int(edge_parts.max()) + 1, np.int64)
    component_of[edge_parts.ravel()] = components.ravel()  # a part lies in one component
    for ring, part in boundary_rings(mask, edge_parts):
        part_of[part] = int(component_of[part])
        coordinates = [[x + dx, y + dy] for x, y in ring]
        rings = polygons.setdefault(part, [])
        if _area(ring) > 0:
            rings.insert(0, coordinates)
        else:
            rings.append(coordinates)
    by_component: dict[int, list[list[list[list[int]]]]] = {}
    for part in sorted(polygons):
        by_component.setdefault(part_of[part], []).append(polygons[part])
    properties = {"objectType": "annotation", "classification": {"name": name, "color": list(color)}}
    features = []
    for _, parts in sorted(by_component.items()):
        geometry = ({"type": "Polygon", "coordinates": parts[0]} if len(parts) == 1
                    else {"type": "MultiPolygon", "coordinates": parts})
        features.append({"type": "Feature", "geometry": geometry, "properties": properties})
    return features


def mask_geojson(labels: np.ndarray, roi: Roi, num_classes: int, class_names: Sequence[str] = ()) -> bytes:
    """The GeoJSON document of an ROI's class labels (0 = background), in full-image coordinates."""
    features = []
    for index in range(1, num_classes):
        name = class_name(class_names, index)
        features += class_features(labels == index, (roi.x0, roi.y0), name, class_color(index))
    return (json.dumps({"type": "FeatureCollection", "features": features}, separators=(",", ":")) + "\n").encode()
