"""`kvplan dashboard`'s server process: Streamlit's own command line (`python -m dashboard.serve run PAGE
FLAGS` = `streamlit run PAGE FLAGS`), started after importing the planner and plotly modules the page uses.

Streamlit imports a page's modules on its first run, so without this the first visitor after `kvplan
dashboard` waits for numpy, pydantic, the planner and plotly (the first page took 3.1 s without this and
2.3 s with it here: benchmarks/bench_dashboard.py's "server's first session", docs/dashboard.md). The
dashboard's own modules are left to the page's first run: they declare Streamlit caches, which want the
running server.
"""

from __future__ import annotations

import plotly.graph_objects
from streamlit.web import cli as streamlit_cli

import planner.catalog
import planner.inputs
import planner.plan.compose
import planner.sim.pdloop
import planner.sim.run

# what the page's first run would otherwise import: the figures, the model and card lists, the sidebar's
# request, the plan, the Load tab's simulations
PRELOADED = (
    plotly.graph_objects,
    planner.catalog,
    planner.inputs,
    planner.plan.compose,
    planner.sim.pdloop,
    planner.sim.run,
)


def main() -> None:
    """Streamlit's command line on this process's arguments."""
    streamlit_cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
