"""Locating points on the surfaces' grids without a binary search.

The surfaces are read millions of times a sweep, and `np.searchsorted` over an unsorted
array of points was the largest single cost of pricing a row from the kernel tables. The
grids are powers of two (batch, KV length) or integer token counts, so each point's
interval is one exponent (`np.frexp`) or one lookup in a table indexed by the integer
part; any other grid keeps the search.
"""

from __future__ import annotations

import numpy as np


class Axis:
    """One grid's points and the interval of the grid each x falls in.

    `index(x)` is the i with grid[i] < x <= grid[i+1] (the first interval below the grid,
    the last above it: `np.searchsorted`'s left side, so a point on the grid is the upper
    end of the interval below it). `where(x)` adds the weight of the upper end, linear in
    x (above 1 past the last point: linear continuation; 0 below the first). NaN points
    land on interval 0 with a NaN weight.
    """

    def __init__(self, grid: np.ndarray, measure: np.ndarray | None = None) -> None:
        """`grid` ascending; `measure` the same points on the scale the weights are
        linear in (e.g. log2 of the grid), the grid itself by default."""
        self.grid = np.asarray(grid, dtype=float)
        self.measure = self.grid if measure is None else np.asarray(measure, dtype=float)
        self.last = len(self.grid) - 2
        self._step = np.diff(self.measure)
        g = self.grid
        exps = np.log2(g)
        self._pow2 = bool(np.all(exps == np.arange(len(g)) + exps[0]))
        self._lut = None
        if not self._pow2 and np.all(g == np.round(g)) and g[0] >= 0 and g[-1] <= 2**22:
            ints = np.arange(int(g[-1]) + 1)
            self._lut = np.clip(np.searchsorted(g, ints) - 1, 0, self.last)

    def index(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        g = self.grid
        if self._pow2:  # x in (2^e, 2^(e+1)]: frexp's exponent e+1, or e+2 on 2^(e+1)
            mantissa, exp = np.frexp(np.fmin(np.fmax(x, g[0]), g[-1]))
            i = exp - (mantissa == 0.5) - int(np.log2(g[0])) - 1
            return np.clip(i, 0, self.last)
        if self._lut is not None:  # x in (g[i], g[i+1]] holds its ceiling there
            return self._lut[np.ceil(np.fmin(np.fmax(x, 0.0), g[-1])).astype(np.intp)]
        return np.clip(np.searchsorted(g, x) - 1, 0, self.last)

    def where(self, x, at=None) -> tuple[np.ndarray, np.ndarray]:
        """(interval, weight of its upper end) of each x; `at` the same points on the
        measure's scale where that differs from the grid's."""
        i = self.index(x)
        at = np.asarray(x, dtype=float) if at is None else at
        return i, np.maximum((at - self.measure[i]) / self._step[i], 0.0)
