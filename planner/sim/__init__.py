"""Request-level serving simulation on the planner's own step model (issue 11).

workload.py   arrivals (Poisson, closed loop, trace file) and length distributions, seeded
steptable.py  decode-step and prefill-pass seconds precomputed on grids from planner/perf/roofline.py
config.py     the scheduler knobs of each engine and the KV block budget of the plan
engine.py     the step-driven loop: decode spans between events, blocks, preemption (recompute)
schedulers.py vLLM continuous batching (token budget, chunked prefill) and MindIE prefill-priority
metrics.py    per-request records -> percentiles, throughput, goodput, mean in system
run.py        the entry point `simulate`; pd.py prefill/decode disaggregation; search.py rate searches
"""
