"""The request-level simulation: requests through a continuous-batching engine that
follows vLLM V1's scheduler, with and without speculation (`engine`, its scheduler
object `_Scheduler`); steady-state P99s and the highest rate a replica serves within
P99 SLOs (`tails`); the default per-request acceptance spread by method (`spread`).

May import `simulator.errors`, `simulator.inputs` and `simulator.model` (its step
times are `predict`'s); nothing of planning/, validation/, search/ or cli/.
"""
