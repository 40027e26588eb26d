"""`segscope report`: a dataset's evaluation as one self-contained HTML page (collect.py gathers the run,
plots.py draws with matplotlib, html.py writes the page; the command is core/cli/report.py)."""
