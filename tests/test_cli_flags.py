"""The shared flags (planner/cli/flags.py): each defined once, placed by the commands that take them, never
twice in one command, and every entry of a flag table taken by some command."""

from __future__ import annotations

import inspect
from typing import Any

import typer.main

import planner.cli as cli
from planner.cli import configs, flags, perf
from planner.cli.options import table_params


def every_command() -> dict[str, Any]:
    """Each command path ('' the root) -> its click command, sub-commands built."""
    cli.register_commands()
    root = typer.main.get_command(cli.app)
    found = {"": root}
    for name in root.list_commands(None):  # type: ignore[attr-defined]
        command = root.get_command(None, name)  # type: ignore[attr-defined]
        found[name] = command
        for sub in getattr(command, "commands", {}):
            found[f"{name} {sub}"] = command.commands[sub]
    return found


def test_no_command_takes_a_flag_twice() -> None:
    for path, command in every_command().items():
        names = [param.name for param in command.params]
        spellings = [opt for param in command.params for opt in param.opts]
        assert len(names) == len(set(names)), path
        assert len(spellings) == len(set(spellings)), path


def test_every_table_entry_is_placed_by_a_command() -> None:
    placed = {param for command in every_command().values() for param in command.params}
    for table in (flags.shared_flags, configs.config_flags):
        unused = [name for name, param in table_params(table).items() if param not in placed]
        assert unused == [], table.__name__


def test_a_command_is_called_with_its_own_flags_only() -> None:
    """The shared flags stay in the context's params (options.plan_request reads them there)."""
    serve = every_command()["serve"]
    context = serve.make_context("serve", ["-m", "qwen3-27b", "--tp", "2", "--json"])
    assert context.params["tp"] == 2 and context.params["as_json"] is True
    assert "tp" not in inspect.signature(perf.serve_command).parameters
