"""SpecPlan's analytic model of speculative decoding: pure numpy and pandas.

Folders: `model/` (the physics, the named stages and the step-time seam), `inputs/`
(catalogs, scenario tables, profiles, /metrics), `kernels/` (engines' measured kernel
tables), `serving/` (the request-level simulation and its tails), `planning/` (sizing,
launch commands, pre-flight, reports), `validation/` (against published and measured
runs), `search/` (the deployment search), `cli/` (`python -m simulator`, one module per
subcommand). `errors` is imported by all. Lower folders never import higher ones:
inputs/model/kernels < serving, planning, validation < search < cli
(`tests/test_layout.py` checks it).

The package's `predict` is the function of `simulator.model.predict`, loaded on first use.
"""

from simulator.errors import InputError

__all__ = ["OUTPUT_COLUMNS", "InputError", "predict"]


def __getattr__(name: str):
    # `predict` (and numpy with it) loads on first use, so `python -m simulator --help`
    # and the modules that need only the catalogs start at once.
    if name in ("predict", "OUTPUT_COLUMNS"):
        from simulator.model import predict as module

        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")
