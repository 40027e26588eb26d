"""Segmentation QA metrics beyond Dice, as reviewers of defects and slides use them (Metrics Reloaded):
boundary distances (HD95, NSD), centreline Dice, per-defect detection and calibration; each module states its
definition, its source and its value for empty masks. Pure NumPy/SciPy/scikit-image, no Qt."""
