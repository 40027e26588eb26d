"""Writing results to disk: the files, their names, their provenance, the writer beside inference."""
