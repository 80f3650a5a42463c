"""SpecPlan's analytic model of speculative decoding: pure numpy and pandas."""

from simulator.errors import InputError
from simulator.predict import OUTPUT_COLUMNS, predict

__all__ = ["OUTPUT_COLUMNS", "InputError", "predict"]
