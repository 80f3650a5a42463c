"""Step times from measured kernel tables (aiconfigurator-core), per engine.

`tables` finds and reads the installed package's parquet tables, `surface` builds an
interpolated surface per kernel once, `engines` holds each engine's host costs, and
`source` prices a step from them. The model reaches them through its step-time hook
(`simulator.model.kernel_steps`).

May import `simulator.errors` and `simulator.inputs` (model shapes); nothing of model/
above its hook, nor serving/, planning/, validation/, search/ or cli/.
"""
