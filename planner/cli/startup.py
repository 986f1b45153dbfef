"""Start-up of a `kvplan` process: the cyclic garbage collector rests while planner/cli imports its modules,
and what those imports made is frozen out of its generations once they are done.

Importing this module pauses the collector (planner/cli/__init__.py imports it before any other
module, typer included); `imports_done()`, at the end of planner/cli/__init__.py, freezes (gc.freeze)
and restarts it.
Imports allocate a few hundred thousand objects that live as long as the process and free almost none, so
the ~90 collections they would trigger find nothing, and once frozen the command's own collections
(building validators, rendering) no longer walk them: about 0.1 s of CPU of the mission command on this
machine (benchmarks/bench_startup.py).

kvplan's models run without pydantic plugins (PYDANTIC_DISABLE_PLUGINS, pydantic's own switch, unless the
environment sets it already): otherwise the first validator built reads the entry points of every installed
distribution to look for plugins, about 25 ms of CPU here, and kvplan has none to load.
"""

from __future__ import annotations

import gc
import os

os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
_COLLECTING = gc.isenabled()
gc.disable()


def imports_done() -> None:
    """Freeze the objects the imports made and let the collector run again if it ran before them."""
    gc.freeze()
    if _COLLECTING:
        gc.enable()
