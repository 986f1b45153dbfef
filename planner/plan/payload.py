"""The plan in the engine's own words and the next command, for the plan's text and its --json alike, and
the --json document itself: `kvplan --json` and the dashboard's "Plan (JSON)" download both build it here.

No rich here: `kvplan --json` imports this module and not the text renderer (planner/cli/render.py).
"""

from __future__ import annotations

from typing import Any, TypedDict

from planner.deployment import Deployment
from planner.engines import registry
from planner.results import Plan


class EngineConfig(TypedDict):
    """The --json object: the engine's config title, its fields or flags by name, the next command."""

    title: str
    fields: dict[str, str]
    next_command: str


def engine_config(result: Plan, dep: Deployment, *, flags: str) -> EngineConfig | None:
    """The recommendation in the engine's own words and the command that writes its config with the same
    `flags`: {"title", "fields": {engine field or flag: value as the text prints it}, "next_command"};
    None for an engine kvplan writes no config for (planner.engines.registry.config_words). A plan that
    counts prefix-cache hits (--prefix-cached-fraction > 0) adds --prefix-cache, so the config turns the
    cache on as the plan's TTFT assumed (MindIE's prefix_cache plugin, vLLM --enable-prefix-caching)."""
    words = registry.config_words(result, dep)
    if words is None:
        return None
    title, fields, needs = words
    cache = "--prefix-cache" if dep.prefix_cached_fraction > 0 else ""
    command = " ".join(part for part in (f"kvplan {dep.engine}", flags, cache, needs) if part)
    return EngineConfig(title=title, fields=dict(fields), next_command=command)


def plan_payload(result: Plan, dep: Deployment, *, flags: str) -> dict[str, Any]:
    """`kvplan --json`'s document: the plan's JSON values (Plan.json_payload) and its engine_config with
    the next command repeating `flags` (the plan's options as the command line spells them)."""
    return {**result.json_payload(), "engine_config": engine_config(result, dep, flags=flags)}
