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

With plugins off that way, pydantic still imports its plugin loader (pydantic.plugin._loader) to be told
so, and the loader imports importlib.metadata (email, zipfile, csv, importlib.resources: ~40 M
instructions, 3 % of the mission command). kvplan then hands pydantic a loader of its own that answers
what pydantic's answers with plugins off, no plugins, without those imports. The loader is private to
pydantic: tests/test_cli_startup.py fails when pydantic moves or changes it.
"""

import gc
import os
import sys
import types
from collections.abc import Iterable

PLUGINS_OFF = ("__all__", "1", "true")  # the values of PYDANTIC_DISABLE_PLUGINS that turn every plugin off
PYDANTIC_PLUGIN_LOADER = "pydantic.plugin._loader"


def no_plugins() -> Iterable[object]:
    """pydantic's get_plugins() with every plugin off: none."""
    return ()


def skip_plugin_loader() -> None:
    """With every pydantic plugin off, give pydantic a plugin loader that finds none without importing
    importlib.metadata (pydantic imports its own only if this one is not in place before)."""
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] in PLUGINS_OFF and PYDANTIC_PLUGIN_LOADER not in sys.modules:
        loader = types.ModuleType(PYDANTIC_PLUGIN_LOADER, "kvplan's stand-in: plugins are off")
        loader.get_plugins = no_plugins  # type: ignore[attr-defined]
        sys.modules[PYDANTIC_PLUGIN_LOADER] = loader


os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
skip_plugin_loader()
_COLLECTING = gc.isenabled()
gc.disable()


def imports_done() -> None:
    """Freeze the objects the imports made and let the collector run again if it ran before them."""
    gc.freeze()
    if _COLLECTING:
        gc.enable()
