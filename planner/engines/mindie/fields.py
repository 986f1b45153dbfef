"""The mapping table of MindIE config.json fields kvplan owns: path, derivation, and the MindIE doc it cites.

Kept apart from config.py (which builds the values) so that module stays small; sources are tagged as
there: [DOC] service_parameter_configuration.md, [KV] kvcache_settings.py, [GEN] generator.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.mindie import rules as mindie_rules

DEPLOY, MODEL, SCHEDULE = mindie_rules.DEPLOY, mindie_rules.MODEL, mindie_rules.SCHEDULE


@dataclass(frozen=True)
class OwnedField:
    """One config.json field kvplan sets: where it lives, how kvplan derives it, what MindIE documents."""

    path: tuple[str | int, ...]
    derivation: str
    doc: str

    @property
    def key(self) -> str:
        """The field's own name (unique across the table)."""
        return str(self.path[-1])

    @property
    def dotted(self) -> str:
        """Path as MindIE's docs write it: BackendConfig.ScheduleConfig.maxBatchSize."""
        return mindie_rules.dotted(self.path)


# THE mapping table: every field kvplan overrides, in file order. Nothing else in the base is touched.
OWNED_FIELDS: tuple[OwnedField, ...] = (
    OwnedField(
        ("BackendConfig", "modelInstanceNumber"), "1: kvplan plans one instance", "[DOC] uint32 [1, 10]"
    ),
    OwnedField(
        ("BackendConfig", "npuDeviceIds"),
        "[--devices], default 0..tp-1",
        "[DOC] one set of logical ids per instance",
    ),
    OwnedField((*DEPLOY, "maxSeqLen"), "--ctx (input + output)", "[DOC] uint32 > 0, default 2560"),
    OwnedField(
        (*DEPLOY, "maxInputTokenLen"),
        "--max-input-tokens, default ctx - output",
        "[DOC] [1, 4194304]; effective min(value, maxSeqLen - 1)",
    ),
    OwnedField(
        (*DEPLOY, "truncation"),
        "false: over-long prompts fail loudly instead of losing context",
        "[DOC] bool, default false",
    ),
    OwnedField(
        (*MODEL, "modelName"),
        "--model-name, default --model as typed (its last part if MindIE refuses that)",
        "[DOC] served model name",
    ),
    OwnedField((*MODEL, "modelWeightPath"), "--weights-path", "[DOC] checkpoint directory"),
    OwnedField((*MODEL, "worldSize"), "--tp", "[DOC] must equal the number of NPUs of the instance"),
    OwnedField(
        (*MODEL, "cpuMemSize"),
        "0: the plan never needs preemption (maxPreemptCount 0)",
        "[DOC] uint32 GB; 0 only if maxPreemptCount = 0",
    ),
    OwnedField(
        (*MODEL, "npuMemSize"),
        "-1 (auto) or floor(KV budget minus states, GiB) (explicit)",
        "[DOC] int32 GB, -1 or (0, 2147483647]; [KV]: GB means GiB",
    ),
    OwnedField((*MODEL, "backendType"), "atb", "[DOC] atb | ms"),
    OwnedField(
        (*MODEL, "trustRemoteCode"),
        "true when the card's checkpoint needs its own code (trust_remote_code), else the base's",
        "[DOC] bool, default false",
    ),
    OwnedField(
        (*MODEL, "plugin_params"),
        "--mtp N (or --speculative-config method mtp) / --prefix-cache, other plugins kept",
        "[DOC] JSON string; mtp.md, prefix_cache.md",
    ),
    OwnedField((*SCHEDULE, "cacheBlockSize"), "--block-size", "[DOC] [1, 128], multiples of 16, 128 advised"),
    OwnedField(
        (*SCHEDULE, "maxPrefillBatchSize"), "min(maxBatchSize, 50)", "[DOC] [1, maxBatchSize], 0 = max"
    ),
    OwnedField(
        (*SCHEDULE, "maxPrefillTokens"),
        "max(--max-prefill-tokens (default 8192), maxInputTokenLen)",
        "[DOC] [1, 4194304] and >= maxInputTokenLen",
    ),
    OwnedField(
        (*SCHEDULE, "prefillTimeMsPerReq"),
        "roofline TTFT at maxInputTokenLen, else 150",
        "[DOC] [0, 1000] ms, used when supportSelectBatch",
    ),
    OwnedField(
        (*SCHEDULE, "decodeTimeMsPerReq"),
        "roofline decode step at maxBatchSize, else 50",
        "[DOC] [0, 1000] ms, used when supportSelectBatch",
    ),
    OwnedField(
        (*SCHEDULE, "maxBatchSize"),
        "plan max_batch_size (at most the card cap)",
        "[DOC] [1, 5000] before 3.0.0.beta.3 (819200 since; [1, 2000] on 300I Duo), >= maxPreemptCount",
    ),
    OwnedField((*SCHEDULE, "maxIterTimes"), "--max-output-tokens, default ctx / 4", "[DOC] [1, maxSeqLen]"),
    OwnedField((*SCHEDULE, "maxPreemptCount"), "0: every planned sequence fits", "[DOC] [0, maxBatchSize]"),
    OwnedField(
        (*SCHEDULE, "supportSelectBatch"),
        "true only with calibrated roofline times within 1000 ms (used only then)",
        "[DOC] bool, default false",
    ),
    OwnedField((*SCHEDULE, "maxQueueDelayMicroseconds"), "5000 (MindIE default)", "[DOC] [500, 1000000] us"),
)
