"""`kvplan calibrate --from-log`: a vLLM / vllm-ascend start-up log's device total and runtime reserve written
into the card's profile (parse -> call -> format; the log's arithmetic is planner/engines/vllm/log.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from planner import units
from planner.cli.options import print_json
from planner.engines import common
from planner.errors import PlanInputError

if TYPE_CHECKING:
    from planner.engines.vllm.log import LearnedMachine
    from planner.schema import HardwareProfile, MeasuredBlock


def calibrate_from_log(
    card: str, *, log_path: Path, out: Path, force: bool, util: float | None, as_json: bool = False
) -> None:
    """`--from-log`: the card's profile with the log's device total and runtime reserve, written atomically;
    printed as text or, with --json, as from_log_json's object."""
    from calibration.profile_writer import write_atomic
    from planner import catalog
    from planner.engines.vllm import log as vllm_log

    hw = catalog.resolve_card(card)
    machine = learned_machine(hw, log_path=log_path, util=util)
    if not as_json:
        for line in vllm_log.learned_lines(machine):
            typer.echo(line)
    source = (
        Path(card)
        if Path(card).suffix in (".yaml", ".yml")
        else catalog.data_dir("hwprofiles") / f"{hw.id}.yaml"
    )
    write_atomic(out, learned_profile_text(hw, machine, source=source, log_name=log_path.name), force=force)
    if as_json:
        return print_json(from_log_json(hw, machine, log_path=log_path, written=out))
    after = learned_figures(hw, machine)
    typer.echo(
        f"device total {units.bytes_to_gib(hw.device_total_bytes):.4f} -> "
        f"{units.bytes_to_gib(machine.device_total_bytes):.4f} GiB (visible_memory_bytes), "
        f"runtime_overhead_gib {hw.runtime_overhead_gib:g} -> {after['runtime_overhead_gib']:.4f}"
        + (f", memory_capacity_gib {hw.memory_capacity_gib:g} -> {after['memory_capacity_gib']:.4f}"
           if "memory_capacity_gib" in after else "")
        + (f"; variant {hw.variant} dropped (a logged total, not the listed SKU's)" if hw.variant else "")
    )  # fmt: skip
    typer.echo(
        f"wrote {out} (plan with --card {out} and --memory-fraction {machine.gpu_memory_utilization:g})"
    )


def learned_machine(hw: HardwareProfile, *, log_path: Path, util: float | None) -> LearnedMachine:
    """What the start-up log says of the machine; PlanInputError naming `--from-log FILE` when it holds no
    vLLM start-up line, or its figures are refused (planner/engines/vllm/log.py learn_machine)."""
    from planner import readers
    from planner.engines.vllm import log as vllm_log

    text = readers.read_text_capped(log_path, flag="--from-log")
    try:
        figures = vllm_log.parse_vllm_log(text)
        if not figures.found_anything:
            raise PlanInputError(
                "--from-log: no vLLM start-up line in it (got none of 'Available KV cache memory', "
                "'GPU KV cache size', 'Maximum concurrency', expected the engine's start-up log; MindIE logs "
                "go to `kvplan mindie --from-log`)"
            )
        return vllm_log.learn_machine(
            figures, card_capacity_bytes=hw.memory_capacity_bytes, gpu_memory_utilization=util
        )
    except PlanInputError as exc:  # the log's own refusals name the file; another flag's keep their flag
        message = str(exc).removeprefix("--from-log: ")
        named = message if message.startswith("--") else f"--from-log {log_path}: {message}"
        raise PlanInputError(named) from None


def learned_figures(hw: HardwareProfile, machine: LearnedMachine) -> dict[str, float | int | None]:
    """The profile's top-level figures the log sets: the logged device total's (common.logged_total_figures,
    the rule MindIE's log correction uses too) and runtime_overhead_gib := runtime_bytes / 2^30."""
    figures = common.logged_total_figures(hw, machine.device_total_bytes)
    return {**figures, "runtime_overhead_gib": round(units.bytes_to_gib(machine.runtime_bytes), 6)}


def learned_profile_text(hw: HardwareProfile, machine: LearnedMachine, *, source: Path, log_name: str) -> str:
    """The profile YAML with the log's figures (learned_figures), validated before anything is written;
    the terms also go to `measured.samples` (vllm_* in bytes)."""
    from calibration.profile_writer import measured_yaml, replace_measured
    from planner import readers

    measured = learned_block(hw, machine, log_name=log_name)
    source_text = readers.read_text_capped(source, flag="--card").replace("\r\n", "\n")  # as read_text
    text = replace_measured(source_text, measured_yaml(measured))
    figures = learned_figures(hw, machine)
    for key, value in figures.items():
        text = _with_figure(text, key, value)
    _validate_profile_text(text, source, figures)
    return text


def from_log_json(
    hw: HardwareProfile, machine: LearnedMachine, *, log_path: Path, written: Path
) -> dict[str, object]:
    """`calibrate --from-log --json`: the log's terms (bytes per rank), the profile's memory figures before
    and after (as the profile holds them: learned_figures, GiB written to 6 decimals), and the file."""
    before = {
        "memory_capacity_gib": hw.memory_capacity_gib,
        "visible_memory_bytes": hw.visible_memory_bytes,
        "runtime_overhead_gib": hw.runtime_overhead_gib,
        "variant": hw.variant,
    }
    return {
        "card": hw.id,
        "log": str(log_path),
        "source": machine.source,
        "gpu_memory_utilization": machine.gpu_memory_utilization,
        "device_total_bytes": machine.device_total_bytes,
        "weights_bytes": machine.weights_bytes,
        "activation_bytes": machine.activation_bytes,
        "non_torch_bytes": machine.non_torch_bytes,
        "cleared_bytes": machine.cleared_bytes,
        "available_kv_bytes": machine.available_kv_bytes,
        "available_kv_halved": machine.halved,
        "runtime_bytes": machine.runtime_bytes,
        "before": before,
        "after": before | learned_figures(hw, machine),
        "written": str(written),
    }


def learned_block(hw: HardwareProfile, machine: LearnedMachine, *, log_name: str) -> MeasuredBlock:
    """The profile's `measured` block with the log's terms added to its samples (vllm_* in bytes), the
    card's earlier measurements and coefficients kept."""
    from planner.schema import MeasuredBlock

    samples = {
        "vllm_device_total_bytes": [float(machine.device_total_bytes)],
        "vllm_non_torch_bytes": [float(machine.non_torch_bytes)],
        "vllm_cleared_bytes": [float(machine.cleared_bytes)],
        "vllm_available_kv_bytes": [float(machine.available_kv_bytes)],
    }
    if machine.activation_bytes is not None:
        samples["vllm_activation_bytes"] = [float(machine.activation_bytes)]
    base = hw.measured
    return MeasuredBlock(
        tool="kvplan calibrate --from-log",
        tool_version="0.1.0",
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        device_name=f"start-up log {log_name} ({machine.source})",
        backend=base.backend if base else "bench-fit",
        coefficients=base.coefficients if base else hw.default_coefficients,
        memory_bandwidth_gb_per_s=base.memory_bandwidth_gb_per_s if base else None,
        usable_memory_gib=units.bytes_to_gib(machine.device_total_bytes),
        samples={**(base.samples if base else {}), **samples},
        notes=(base.notes + "; " if base and base.notes else "")
        + f"memory_capacity_gib and runtime_overhead_gib from the start-up log {log_name}",
    )


def _with_figure(text: str, key: str, value: float | int | None) -> str:
    """Profile text with its top-level `key:` line set to `value` (YAML null for None), or, absent, the line
    added after memory_capacity_gib's (the key's place in the catalogued profiles)."""
    import re

    written = "null" if value is None else f"{value:.6f}" if isinstance(value, float) else str(value)
    line = f"{key}: {written}    # from `kvplan calibrate --from-log`"
    found = re.search(rf"^{key}:[^\r\n]*", text, flags=re.MULTILINE)
    if found is not None:
        return text[: found.start()] + line + text[found.end() :]
    anchor = re.search(r"^memory_capacity_gib:[^\r\n]*(\r?\n)", text, flags=re.MULTILINE)
    if anchor is None:
        return text
    return text[: anchor.end()] + line + anchor.group(1) + text[anchor.end() :]


def _validate_profile_text(text: str, source: Path, figures: dict[str, float | int | None]) -> None:
    """Validate the new profile text before anything is written: a HardwareProfile holding `figures` at
    the top level (DataFileError naming --card's file otherwise: a profile whose keys are not on lines
    of their own, as a flow mapping's, cannot take them)."""
    from calibration.profile_writer import validated_profile
    from planner.errors import DataFileError

    profile = validated_profile(text, where=f"--card {source}", what="the log's figures")
    missed = [key for key, value in figures.items() if getattr(profile, key) != value]
    if missed:
        raise DataFileError(
            f"--card {source}: cannot set {', '.join(missed)} from the log (got no top-level "
            f"`{missed[0]}:` line kvplan can rewrite, expected one per key, as hwprofiles/*.yaml have)"
        )
