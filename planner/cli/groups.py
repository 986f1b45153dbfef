"""A command group's default command (`kvplan`, `kvplan models`, `kvplan bench` run alone) and what the group
does with its own --json when a sub-command follows it (`kvplan bench --json import ...`): the sub-command's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup

from planner.cli.options import fail
from planner.errors import PlanInputError

GroupCallback = TypeVar("GroupCallback", bound=Callable[..., None])


def default_command(group: typer.Typer) -> Callable[[GroupCallback], GroupCallback]:
    """Register the decorated function as `group`'s default command: what runs when the arguments name no
    sub-command of the group, and only then (click calls a group's callback before any sub-command's too,
    with ctx.invoked_subcommand set); then the group's --json, if given, goes to the sub-command
    (json_to_subcommand). The function takes `ctx: typer.Context` first."""

    def register(command: GroupCallback) -> GroupCallback:
        @functools.wraps(command)
        def when_no_subcommand(ctx: typer.Context, **values: Any) -> None:
            if ctx.invoked_subcommand is None:
                command(ctx, **values)
            elif values.get("as_json"):
                json_to_subcommand(ctx)

        group.callback(invoke_without_command=True)(when_no_subcommand)
        return command

    return register


def json_to_subcommand(ctx: typer.Context) -> None:
    """The group's --json given before a sub-command (`kvplan models --json import X`) passed on to it, as
    if typed after it (its default through click's default_map, which the sub-command's context reads);
    refused in one line for a sub-command without --json (it would be ignored)."""
    name = ctx.invoked_subcommand or ""
    group = ctx.command
    sub = group.get_command(ctx, name) if isinstance(group, TyperGroup) else None
    if sub is None or not any(param.name == "as_json" for param in sub.params):
        fail(PlanInputError(f"--json: `{ctx.command_path} {name}` prints no JSON (got --json before {name})"))
    defaults = dict(ctx.default_map or {})
    defaults[name] = {**defaults.get(name, {}), "as_json": True}
    ctx.default_map = defaults
