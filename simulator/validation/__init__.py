"""The model scored against measurements: published speed-ups (`published`), measured
serving runs (`serving_runs`), and how far a profile's decode step is from what
engines reach on its GPU (`step_gap`).

May import `simulator.errors`, `simulator.inputs`, `simulator.model` and
`simulator.kernels`; nothing of serving/, planning/, search/ or cli/.
"""
