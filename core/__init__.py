"""SegScope's headless core: pipelines, backends, datasets, metrics and export.

Nothing under this package imports Qt or pyqtgraph: the CLI, the remote worker and the tests use it
without a display.
"""
