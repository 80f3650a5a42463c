"""What the model reads, parsed and checked: the GPU and model catalogs (`catalog`,
`specs`), the scenario table and its columns (`scenarios`), grids of scenarios and the
range flags (`sweep`), CSV and Parquet files (`io`), measured profiles (`profile`) and
vLLM `/metrics` scrapes (`metrics`). Bad input raises `simulator.errors.InputError`
naming the file, row and field.

May import `simulator.errors`, `simulator.kernels.tables` (the engine versions a
scenario may name) and, for the units its tables are stated in,
`simulator.model.acceptance` and `simulator.model.steady`; nothing of serving/,
planning/, validation/, search/ or cli/.
"""
