"""MindIE's plugin_params (ModelConfig[0]): the base's plugins read as MindIE reads them, merged by plugin
type with the ones kvplan writes (mtp, prefix_cache). Sources: MindIE-LLM @8b4871a
src/config_manager/model_deploy_config.cpp:200-203 (a non-string value is dumped to its JSON string);
docs/zh/user_guide/feature/mtp.md (MTP excludes parallel decoding); docs/mindie.md `--base`.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from planner import readers
from planner.engines.mindie import rules as mindie_rules
from planner.engines.mindie.fields import MODEL
from planner.errors import DataFileError, PlanInputError

KVPLAN_PLUGINS = ("mtp", "prefix_cache")
MTP_EXCLUSIVE_PLUGINS = ("memory_decoding", "la")  # [mtp.md] MTP cannot combine with parallel decoding
MISSING = object()  # a field absent from the config (config.lookup's answer)


def base_plugins(base_value: object) -> dict[str, Any]:
    """The base's plugin_params as an object. MindIE takes a JSON object string or the object itself (it
    dumps a non-string to its string: model_deploy_config.cpp:200-203 @8b4871a); DataFileError for any
    other value (a list, number, boolean or null would reach its plugins as no object)."""
    where = mindie_rules.dotted((*MODEL, "plugin_params"))
    if base_value is MISSING or (isinstance(base_value, str) and not base_value.strip()):
        return {}
    existing = base_value
    if isinstance(base_value, str):
        try:
            existing = readers.parse_json(base_value, where=where)
        except DataFileError as exc:
            raise DataFileError(f'{exc}; expected e.g. \'{{"plugin_type":"mtp"}}\'') from exc
    if not isinstance(existing, dict):
        got = json.dumps(base_value)[:60] if not isinstance(base_value, str) else repr(base_value)[:60]
        raise DataFileError(
            f"{where}: not a JSON object (got {got}, expected an object or its string form, "
            f'e.g. {{"plugin_type":"splitfuse"}})'
        )
    kinds = existing.get("plugin_type", "")
    if not isinstance(kinds, str):
        raise DataFileError(
            f"{where}: plugin_type is not a string (got {json.dumps(kinds)[:60]}, expected comma-separated "
            f'plugin names, e.g. "splitfuse,prefix_cache")'
        )
    return existing


class PluginMerge(NamedTuple):
    """What the config writes for plugin_params (None: remove the field) and the notes the merge owes."""

    params: str | None
    notes: list[str]


def merge_plugins(base_value: object, *, mtp: int, prefix_cache: bool) -> PluginMerge:
    """The base's plugins (base_plugins) minus the ones kvplan owns (KVPLAN_PLUGINS), plus what the flags
    ask, as MindIE's JSON string; one note per owned plugin the base turns on and the flags leave off (a
    merge into a user's config should say what it dropped)."""
    existing = base_plugins(base_value)
    kinds = [p for p in str(existing.get("plugin_type", "")).split(",") if p]
    kept = [p for p in kinds if p not in KVPLAN_PLUGINS]
    if mtp and set(kept) & set(MTP_EXCLUSIVE_PLUGINS):
        raise PlanInputError(
            f"--mtp: MindIE's MTP cannot be combined with parallel decoding "
            f"(got plugin_type {','.join(kept)} in the base, "
            f"expected none of {', '.join(MTP_EXCLUSIVE_PLUGINS)})"
        )
    asked = {"mtp": mtp > 0, "prefix_cache": prefix_cache}
    flags = {"mtp": "--mtp N", "prefix_cache": "--prefix-cache"}
    notes = [
        f"--base's {kind} plugin removed: kvplan writes it only when asked ({flags[kind]} keeps it)"
        for kind in KVPLAN_PLUGINS
        if kind in kinds and not asked[kind]
    ]
    wanted = [*kept, *(kind for kind in KVPLAN_PLUGINS if asked[kind])]
    if not wanted:
        return PluginMerge(None, notes)
    params = {k: v for k, v in existing.items() if k not in ("plugin_type", "num_speculative_tokens")}
    drafts = {"num_speculative_tokens": mtp} if mtp else {}
    text = json.dumps({"plugin_type": ",".join(wanted), **drafts, **params}, separators=(",", ":"))
    return PluginMerge(text, notes)
