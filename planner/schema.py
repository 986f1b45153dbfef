"""Validated, frozen data models for model cards and hardware profiles: the one import point for them.

Model-card fields reuse Hugging Face config.json names verbatim. Hardware-profile fields keep datasheet
units in their names (`_gib`, `_gb_per_s`, `_tflop_per_s`, `_us`); properties convert them to SI once.

The models live in three modules, re-exported here:
    schema_base.py      Frozen, DataModel (the strict bases), BUILT_ON_FIRST_USE, Source, HfSource
    schema_card.py      ModelCard, ATTENTION_KINDS and the card's bounds
    schema_hardware.py  HardwareProfile, PerfCoefficients and its measured tables, MeasuredBlock, the
                        coefficients' physical ranges
A module deep in planner/'s import graph (params.py, deployment.py, results.py, engines/vllm/versions.py)
imports from the defining module instead: this file adds one link to an import chain, and the longest
chain is bounded (tests/test_layering.py).
"""

from planner.schema_base import BUILT_ON_FIRST_USE, Confidence, DataModel, Frozen, HfSource, Source
from planner.schema_card import (
    ATTENTION_KINDS,
    MAX_CARD_INT,
    MAX_LAYERS,
    SSM_DTYPES,
    AttentionKind,
    AttentionTraits,
    LayerType,
    ModelCard,
)
from planner.schema_hardware import (
    MAX_GB_PER_S,
    MAX_OVERHEAD_US,
    MAX_TABLE_INT,
    MIN_FRACTION,
    MIN_GB_PER_S,
    MIN_US,
    AttentionRate,
    CardVariant,
    GemmEfficiency,
    HardwareProfile,
    Interconnect,
    KernelCost,
    MeasuredBlock,
    PerfCoefficients,
    PrefillAttentionRate,
    PrefillLayerCost,
)

__all__ = [
    "ATTENTION_KINDS",
    "BUILT_ON_FIRST_USE",
    "MAX_CARD_INT",
    "MAX_GB_PER_S",
    "MAX_LAYERS",
    "MAX_OVERHEAD_US",
    "MAX_TABLE_INT",
    "MIN_FRACTION",
    "MIN_GB_PER_S",
    "MIN_US",
    "SSM_DTYPES",
    "AttentionKind",
    "AttentionRate",
    "AttentionTraits",
    "CardVariant",
    "Confidence",
    "DataModel",
    "Frozen",
    "GemmEfficiency",
    "HardwareProfile",
    "HfSource",
    "Interconnect",
    "KernelCost",
    "LayerType",
    "MeasuredBlock",
    "ModelCard",
    "PerfCoefficients",
    "PrefillAttentionRate",
    "PrefillLayerCost",
    "Source",
]
