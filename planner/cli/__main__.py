"""`python -m planner.cli`: the same as the `kvplan` command."""

from planner.cli import main

main()
