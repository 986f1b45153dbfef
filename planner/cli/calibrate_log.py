"""`kvplan calibrate --from-log`: a vLLM / vllm-ascend start-up log's device total and runtime reserve written
into the card's profile (parse -> call -> format; the log's arithmetic is planner/engines/vllm/log.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from planner import units
from planner.cli.options import print_json
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
    typer.echo(
        f"memory_capacity_gib {hw.memory_capacity_gib:g} -> "
        f"{units.bytes_to_gib(machine.device_total_bytes):.4f}, "
        f"runtime_overhead_gib {hw.runtime_overhead_gib:g} -> {units.bytes_to_gib(machine.runtime_bytes):.4f}"
    )
    typer.echo(
        f"wrote {out} (plan with --card {out} and --memory-fraction {machine.gpu_memory_utilization:g})"
    )


def learned_machine(hw: HardwareProfile, *, log_path: Path, util: float | None) -> LearnedMachine:
    """What the start-up log says of the machine (PlanInputError when it holds no vLLM start-up line)."""
    from planner import readers
    from planner.engines.vllm import log as vllm_log

    figures = vllm_log.parse_vllm_log(readers.read_text_capped(log_path, flag="--from-log"))
    if not figures.found_anything:
        raise PlanInputError(
            f"--from-log {log_path}: no vLLM start-up line in it (got none of 'Available KV cache memory', "
            "'GPU KV cache size', 'Maximum concurrency', expected the engine's start-up log; "
            "MindIE logs go to "
            "`kvplan mindie --from-log`)"
        )
    return vllm_log.learn_machine(
        figures, card_capacity_bytes=hw.memory_capacity_bytes, gpu_memory_utilization=util
    )


def learned_profile_text(hw: HardwareProfile, machine: LearnedMachine, *, source: Path, log_name: str) -> str:
    """The profile YAML with the log's figures, validated before anything is written.

    memory_capacity_gib := the total the runtime reported; runtime_overhead_gib := non-torch memory (+ memory
    held by other processes on a 310P); the terms go to `measured.samples` (vllm_* in bytes).
    """
    from calibration.profile_writer import measured_yaml, replace_measured

    measured = learned_block(hw, machine, log_name=log_name)
    text = _with_memory(
        replace_measured(source.read_text(encoding="utf-8"), measured_yaml(measured)),
        capacity_gib=units.bytes_to_gib(machine.device_total_bytes),
        runtime_gib=units.bytes_to_gib(machine.runtime_bytes),
    )
    _validate_profile_text(text, source)
    return text


def from_log_json(
    hw: HardwareProfile, machine: LearnedMachine, *, log_path: Path, written: Path
) -> dict[str, object]:
    """`calibrate --from-log --json`: the log's terms (bytes per rank), the profile's memory figures before
    and after (GiB as the profile holds them: after = bytes / 2^30, written to 6 decimals), and the file."""
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
        "before": {
            "memory_capacity_gib": hw.memory_capacity_gib,
            "runtime_overhead_gib": hw.runtime_overhead_gib,
        },
        "after": {
            "memory_capacity_gib": units.bytes_to_gib(machine.device_total_bytes),
            "runtime_overhead_gib": units.bytes_to_gib(machine.runtime_bytes),
        },
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


def _with_memory(text: str, *, capacity_gib: float, runtime_gib: float) -> str:
    """Profile text with its top-level memory_capacity_gib and runtime_overhead_gib values replaced."""
    import re

    for key, value in (("memory_capacity_gib", capacity_gib), ("runtime_overhead_gib", runtime_gib)):
        text = re.sub(
            rf"^{key}:[^\n]*$",
            f"{key}: {value:.6f}    # from `kvplan calibrate --from-log`",
            text,
            count=1,
            flags=re.MULTILINE,
        )
    return text


def _validate_profile_text(text: str, source: Path) -> None:
    """Validate the new profile text before anything is written (DataFileError naming the source)."""
    import yaml
    from pydantic import ValidationError

    from planner.errors import DataFileError
    from planner.schema import HardwareProfile

    try:
        HardwareProfile.model_validate(yaml.safe_load(text))
    except ValidationError as exc:
        raise DataFileError(
            f"{source}: profile with the log's memory figures fails validation ({exc})"
        ) from exc
