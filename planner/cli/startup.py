"""Start-up of a `kvplan` process: the cyclic garbage collector rests while planner/cli imports its modules,
and what those imports made is frozen out of its generations once they are done.

Importing this module pauses the collector (planner/cli/__init__.py imports it before any other planner
module); `imports_done()`, at the end of planner/cli/__init__.py, freezes (gc.freeze) and restarts it.
Imports allocate a few hundred thousand objects that live as long as the process and free almost none, so
the ~90 collections they would trigger find nothing, and once frozen the command's own collections
(building validators, rendering) no longer walk them: about 0.1 s of CPU of the mission command on this
machine (benchmarks/bench_startup.py).
"""

from __future__ import annotations

import gc

_COLLECTING = gc.isenabled()
gc.disable()


def imports_done() -> None:
    """Freeze the objects the imports made and let the collector run again if it ran before them."""
    gc.freeze()
    if _COLLECTING:
        gc.enable()
