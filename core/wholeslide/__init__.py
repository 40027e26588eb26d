"""Whole slides in tiles: the grid and stitcher, tiled evaluation, its plan, metrics and export."""
