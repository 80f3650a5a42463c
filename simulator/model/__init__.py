"""The model: pure numpy functions over arrays of scenario rows, and the one prediction
path that composes them.

`predict` (a table in, outputs added) runs the named stages of `stages` (acceptance,
memory, the batch that runs, step times, serving, economics, status) over pieces of
rows. Step times come from one seam, a `step_times.StepTimes` source per row: the
datasheet roofline (`latency`), a profile (`calibration`), or an engine's kernel tables
(`kernel_steps`, over `simulator.kernels`). Physics in `acceptance`, `drafts`,
`memory`, `steady`, `economics`; every default in `defaults`.

May import `simulator.errors`, `simulator.inputs` (catalogs and the scenario table it
validates) and `simulator.kernels`; nothing of serving/, planning/, validation/,
search/ or cli/.
"""
