"""`python -m tpu_estimator_compat.scan PATH...`: which code bases run unchanged, and why not.

A tool on top of the library that reads code without importing or running it, and without
TensorFlow: `analyze.py` resolves a file's imports and attribute chains to full legacy names,
`names.py` gives each its verdict from the tables the library serves them from
(`legacy/estimator_map.py`, `legacy/contrib_map.py`, `_tf/patch_table.py`) and TensorFlow's
public names (`tf_api_names.txt`, written by `dev/tf_api_names.py`), `files.py` finds and
reads the files, `report.py` prints the verdicts and `cli.py` is the command line.
"""
