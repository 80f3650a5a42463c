"""A plain-stderr progress bar with an ETA (no dependency).

On a terminal the bar redraws in place; in a log (not a TTY) it prints one line at most every
`LOG_INTERVAL_S` seconds, plus the last one.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from profiler.runner import Progress

BAR_WIDTH = 24
LOG_INTERVAL_S = 5.0


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Bar(Progress):
    """Counts grid points and draft-in-loop rows apart, as the run's summary does."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start(0)
        self.last_print = 0.0
        self.printed = self.counts()

    def start(self, total: int, loop_rows: int = 0) -> None:
        self.total = total
        self.done = 0
        self.loop_total = loop_rows
        self.loop_done = 0
        self.t0 = time.monotonic()

    def counts(self) -> str:
        """'16/16 points', and '+ 6/6 in-loop rows' when the run times the draft in the loop."""
        text = f"{self.done}/{self.total} points"
        if self.loop_total:
            text += f" + {self.loop_done}/{self.loop_total} in-loop rows"
        return text

    @property
    def finished(self) -> bool:
        return self.done >= self.total and self.loop_done >= self.loop_total

    def line(self, label: str = "") -> str:
        units, total = self.done + self.loop_done, self.total + self.loop_total
        frac = min(units / total, 1.0) if total else 1.0
        filled = int(BAR_WIDTH * frac)
        elapsed = time.monotonic() - self.t0
        eta = elapsed / units * max(total - units, 0) if units else 0.0
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return f"[{bar}] {self.counts()}  {_clock(elapsed)} elapsed, ETA {_clock(eta)}  {label}"

    def advance(self, label: str) -> None:
        self.done += 1
        self._show(label)

    def advance_loop(self, label: str, rows: int) -> None:
        self.loop_done += rows
        self._show(label)

    def _show(self, label: str) -> None:
        if not self.enabled:
            return
        last = self.finished
        if self.tty:
            self._write("\r\033[K" + self.line(label) + ("\n" if last else ""))
        elif last or time.monotonic() - self.last_print >= LOG_INTERVAL_S:
            self._write(self.line(label) + "\n")
            self.last_print = time.monotonic()

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
        self.printed = self.counts()

    def finish(self) -> None:
        """End the bar; in a log, print the counts reached if the last line did not."""
        if not self.enabled or self.finished:
            return
        if self.tty:
            self._write("\n")
        elif self.printed != self.counts():
            self._write(self.line() + "\n")
