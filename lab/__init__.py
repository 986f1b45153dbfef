"""The lab: reference harnesses, one-off table builders, raw runs, published corpora and accuracy scripts.

Not packaged (pyproject.toml's packages leave it out) and never imported by planner/, dashboard/,
calibration/ or the default tests; lab checks run under `pytest -m lab`. See lab/README.md.
"""
