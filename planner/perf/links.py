"""Effective rates of the collectives a layout runs: the TP all-reduce, the MoE dispatch/combine (all-to-all
or all-gather) and the pipeline hand-off, each over the node's own link, the network between nodes, or a mix.

Datasheet link bandwidths (hwprofiles `interconnect`) times the card's allreduce_bandwidth_fraction, so
`kvplan calibrate` scales every collective alike. Where a profile does not know its inter-node link, the
node's own link stands in (and planner/layout.py's notes say the layout spans nodes).
"""

from __future__ import annotations

import numpy as np

from planner import layout
from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.perf.terms import Term
from planner.records import record
from planner.schema import PerfCoefficients
from planner.units import gb_per_s_to_bytes_per_s, us_to_s

COLLECTIVE_RESOURCES = frozenset({"link", "a2a", "stage"})


@record
class LinkRates:
    """(bytes/s, seconds per collective) of each collective resource on one rank."""

    tp: tuple[float, float]  # ring all-reduce inside a tensor-parallel group
    a2a: tuple[float, float]  # MoE dispatch + combine
    stage: tuple[float, float]  # pipeline hand-off
    # collective resources whose every peer sits in one node: they pay allreduce_latency_us, the term a
    # --from-bench fit adjusts (planner/fit/features.py); the others pay the datasheet's inter-node latency
    node_resources: frozenset[str] = COLLECTIVE_RESOURCES


def mixed_bytes_per_s(intra: float, inter: float, *, off_node_fraction: float) -> float:
    """Rate of traffic split between two links used at once: the slower share sets the time.

    Formula: 1 / max((1 - f) / intra, f / inter)   f = off-node share of the bytes
    """
    return 1.0 / max((1.0 - off_node_fraction) / intra, off_node_fraction / inter)


def _links(dep: Deployment, coeff: PerfCoefficients) -> tuple[float, float, float, float]:
    """(intra bytes/s, inter bytes/s, intra latency s, inter latency s), bandwidths times the fraction."""
    link = dep.hardware.interconnect
    fraction = coeff.allreduce_bandwidth_fraction
    intra = gb_per_s_to_bytes_per_s(link.bandwidth_gb_per_s) * fraction
    inter_gb = link.inter_node_bandwidth_gb_per_s or link.bandwidth_gb_per_s
    inter_latency_us = link.inter_node_latency_us
    inter_latency = coeff.allreduce_latency_us if inter_latency_us is None else inter_latency_us
    return (
        intra,
        gb_per_s_to_bytes_per_s(inter_gb) * fraction,
        us_to_s(coeff.allreduce_latency_us),
        us_to_s(inter_latency),
    )


def dispatch_off_node_fraction(dep: Deployment) -> float:
    """Off-node share of the MoE dispatch: EP ranks pack nodes; all-gather peers sit tp ranks apart."""
    per_node = layout.devices_per_node(dep)
    if dep.ep > 1:
        return layout.off_node_fraction(dep.ep, per_node=per_node)
    return layout.off_node_fraction(dep.dp, per_node=max(1, per_node // dep.tp))


def link_rates(dep: Deployment, coeff: PerfCoefficients) -> LinkRates:
    """Each collective's rate and latency: inter-node where its group spans nodes, a mix for the dispatch.

    Formula: TP group over tp > devices per node: inter-node link; dispatch: mixed_bytes_per_s with
    dispatch_off_node_fraction (latency of the slower link when any share leaves the node); pipeline:
    inter-node when the instance spans nodes.
    """
    intra, inter, intra_latency, inter_latency = _links(dep, coeff)
    per_node = layout.devices_per_node(dep)
    tp = (inter, inter_latency) if dep.tp > per_node else (intra, intra_latency)
    off_node = dispatch_off_node_fraction(dep)
    a2a = (
        mixed_bytes_per_s(intra, inter, off_node_fraction=off_node),
        inter_latency if off_node > 0 else intra_latency,
    )
    spans_nodes = layout.node_count(dep) > 1
    stage = (inter, inter_latency) if spans_nodes else (intra, intra_latency)
    off = {"link": dep.tp > per_node, "a2a": off_node > 0, "stage": spans_nodes}
    inter_known = dep.hardware.interconnect.inter_node_latency_us is not None  # else the node's own stands in
    node = frozenset(resource for resource, leaves in off.items() if not (leaves and inter_known))
    return LinkRates(tp=tp, a2a=a2a, stage=stage, node_resources=node)


def collective_seconds(links: LinkRates, term: Term, *, tp: int) -> tuple[FloatArray, float]:
    """(transfer seconds, latency per collective) of a collective term.

    Formula: tp all-reduce: 2 (tp - 1) / tp * bytes / rate (ring: reduce-scatter + all-gather);
    dispatch and pipeline hand-off: bytes / rate.
    """
    if term.resource == "link":
        bytes_per_s, latency_s = links.tp
        return np.asarray(2.0 * (tp - 1) / tp * term.bytes / bytes_per_s), latency_s
    bytes_per_s, latency_s = links.a2a if term.resource == "a2a" else links.stage
    return np.asarray(term.bytes / bytes_per_s), latency_s
