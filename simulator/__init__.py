"""SpecPlan's analytic model of speculative decoding: pure numpy and pandas."""

import sys
import types

from simulator.errors import InputError

__all__ = ["OUTPUT_COLUMNS", "InputError", "predict"]


def __getattr__(name: str):
    # `predict` (and numpy with it) loads on first use, so `python -m simulator --help`
    # and the modules that need only the catalogs start at once.
    if name in ("predict", "OUTPUT_COLUMNS"):
        import simulator.predict  # noqa: F401  (binds the function; see _Package)

        return globals()[name] if name in globals() else getattr(sys.modules[__name__], name)
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")


class _Package(types.ModuleType):
    """`simulator.predict` is the function, as it always was, even once the import
    system binds the submodule of that name to the package."""

    def __setattr__(self, name, value):
        if name == "predict" and isinstance(value, types.ModuleType):
            super().__setattr__("OUTPUT_COLUMNS", value.OUTPUT_COLUMNS)
            value = value.predict
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
