"""The slide and the result panels: what the user looks at and points into (slide view, tiles, overlays, ROI,
the softmax | argmax | truth panels and their controls)."""
