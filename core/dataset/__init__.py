"""Datasets of images with ground-truth masks, the mask conventions, and the demo dataset."""
