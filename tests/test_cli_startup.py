"""`kvplan` run as a program builds its sub-commands only when the arguments ask for one (start-up time of
the mission command), and answers exactly as the fully built app does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import planner.cli as cli

ROOT = Path(__file__).resolve().parents[1]
MISSION = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8"]


def run_as_program(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Exit code and stdout+stderr of `app(args)` the way the `kvplan` script calls it."""
    with pytest.raises(SystemExit) as done:
        cli.app(args, prog_name="kvplan")
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


def test_mission_builds_no_sub_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built: list[str] = []
    real = cli.KvplanGroup._load

    def spy(self: cli.KvplanGroup) -> None:
        built.append("sub-commands")
        real(self)

    monkeypatch.setattr(cli.KvplanGroup, "_load", spy)
    code, text = run_as_program(MISSION, capsys)
    assert code == 0 and "Recommended: max_batch_size" in text
    assert built == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [MISSION, ["--help"], ["models", "--help"], ["mindei"], ["--json", "cardz"], ["cards", "--json"]],
)
def test_program_matches_fully_built_app(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run_as_program(args, capsys)
    full = CliRunner().invoke(cli.app, args, prog_name="kvplan")
    assert (code, text) == (full.exit_code, full.output)


def test_mission_plans_memory_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mission command sizes memory once (capacity.memory_breakdown: weights, activations, KV budget);
    the load knee and the rendering read that plan."""
    from planner import capacity

    calls: list[int] = []
    real = capacity.memory_breakdown

    def counted(dep: Any) -> Any:
        calls.append(dep.ctx_tokens)
        return real(dep)

    monkeypatch.setattr(capacity, "memory_breakdown", counted)
    for args in (MISSION, [*MISSION, "--json"]):
        calls.clear()
        code, text = run_as_program(args, capsys)
        assert code == 0 and "max_batch_size" in text
        assert calls == [32768]


def test_mission_imports_no_sub_command_module() -> None:
    """The mission command imports none of the sub-commands' modules (nor what only they need, like the
    dashboard's urllib), in a fresh interpreter."""
    probe = (
        "import sys, planner.cli\n"
        "try:\n    planner.cli.app(sys.argv[1:], prog_name='kvplan')\n"
        "except SystemExit:\n    pass\n"
        "names = [m for m in sys.modules if m.startswith(('planner.cli.', 'urllib.request'))]\n"
        "print(' '.join(sorted(names)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *MISSION], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = done.stdout.splitlines()[-1].split()
    assert "Recommended: max_batch_size" in done.stdout
    sub_commands = ["bench", "calibrate", "configs", "dashboard", "layouts", "models", "perf", "simulate"]
    assert "planner.cli.render" in loaded
    assert not {f"planner.cli.{name}" for name in sub_commands} & set(loaded)
    assert "urllib.request" not in loaded


@pytest.mark.parametrize(("given", "kept"), [(None, "__all__"), ("logfire", "logfire")])
def test_cli_import_leaves_the_collector_running_and_plugins_off(given: str | None, kept: str) -> None:
    """After `import planner.cli` (fresh interpreter) the garbage collector runs again, the imports' objects
    are frozen out of its generations, and pydantic plugins are off unless the environment says otherwise."""
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if given is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = given
    probe = (
        "import gc, os, planner.cli\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 10000, os.environ['PYDANTIC_DISABLE_PLUGINS'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT, env=env
    )
    assert done.stdout.split() == ["True", "True", kept]


def test_mission_imports_no_importlib_metadata() -> None:
    """With pydantic's plugins off, the mission command builds its validators without pydantic's plugin
    loader and the importlib.metadata it imports (planner/cli/startup.py's stand-in, in a fresh
    interpreter). Fails when pydantic imports importlib.metadata some other way, or stops using the loader."""
    probe = (
        "import sys, planner.cli\n"
        "try:\n    planner.cli.app(sys.argv[1:], prog_name='kvplan')\n"
        "except SystemExit:\n    pass\n"
        "print('importlib.metadata' in sys.modules, sys.modules['pydantic.plugin._loader'].__doc__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    done = subprocess.run(
        [sys.executable, "-c", probe, *MISSION], capture_output=True, text=True, check=True, cwd=ROOT, env=env
    )
    assert done.stdout.splitlines()[-1] == "False kvplan's stand-in: plugins are off"


def test_stand_in_plugin_loader_answers_as_pydantic_s_own() -> None:
    """The stand-in replaces a private module of pydantic: pydantic must still import `get_plugins` from
    pydantic.plugin._loader alone, when it builds a validator, and its own get_plugins must take no
    arguments and return no plugins with PYDANTIC_DISABLE_PLUGINS=__all__, as the stand-in does. A pydantic
    release that changes any of this fails here (then drop or adapt startup.skip_plugin_loader)."""
    probe = (
        "import inspect, pydantic.plugin._schema_validator as s, pydantic.plugin._loader as loader\n"
        "source = inspect.getsource(s.create_schema_validator)\n"
        "print(source.count('from ._loader import get_plugins'), inspect.getsource(s).count('_loader'),"
        " list(loader.get_plugins()), len(inspect.signature(loader.get_plugins).parameters))\n"
    )
    env = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__"}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT, env=env
    )
    assert done.stdout.split() == ["1", "1", "[]", "0"]
