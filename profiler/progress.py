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
    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = 0
        self.done = 0
        self.t0 = time.monotonic()
        self.last_print = 0.0

    def start(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.t0 = time.monotonic()

    def line(self, label: str = "") -> str:
        frac = self.done / self.total if self.total else 1.0
        filled = int(BAR_WIDTH * frac)
        elapsed = time.monotonic() - self.t0
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return (
            f"[{bar}] {self.done}/{self.total} points  {_clock(elapsed)} elapsed, "
            f"ETA {_clock(eta)}  {label}"
        )

    def advance(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        last = self.done >= self.total
        if self.tty:
            self.stream.write("\r\033[K" + self.line(label) + ("\n" if last else ""))
        elif last or now - self.last_print >= LOG_INTERVAL_S:
            self.stream.write(self.line(label) + "\n")
            self.last_print = now
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self.tty and self.done < self.total:
            self.stream.write("\n")
            self.stream.flush()
