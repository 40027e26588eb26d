"""Scoring: Dice/IoU and tensor comparison, the metric catalogue, the dataset filter, error review."""
