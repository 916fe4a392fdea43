"""`results.json` rewritten while a run goes on, at a bounded rate.

The runner records every stage start and end; rewriting the whole file each
time (atomic, fsynced) costs O(N²) bytes over a run: 20 MB x ~5,200 writes at
400 scenarios. `ResultsWriter` writes at once when nothing was written for a
while, and otherwise defers: the pending state is written by `flush_due` (the
runner's one-second tick) once `interval()` has passed since the last write.
The interval grows with the file (`max(MIN_INTERVAL_S, size / RATE)`), so a run
rewrites at most about `RATE` bytes a second however large it grows, and a
crash loses at most one interval's updates of the file (every stage's own
folder is written as it goes). The run's end, an interrupt, and whatever a
caller marks `now` are written at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ci_evals.results.model import RunResult, dump_results, write_results

MIN_INTERVAL_S = 2.0
RATE = 1 << 20  # bytes a second the rewriting may average


class ResultsWriter:
    def __init__(self, run_dir: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.run_dir = run_dir
        self._clock = clock
        self._last = float("-inf")
        self._size = 0
        self.pending = False
        self.writes = 0  # how many times the file was written
        self.bytes = 0  # and how many bytes in all

    def interval(self) -> float:
        return max(MIN_INTERVAL_S, self._size / RATE)

    def write(self, result: RunResult, *, now: bool = False) -> None:
        """Write `result` now if `now` or the interval has passed; else mark it pending."""
        if now or self._clock() - self._last >= self.interval():
            self._write(result)
        else:
            self.pending = True

    def flush_due(self, result: RunResult) -> None:
        """Write what is pending once its interval has passed."""
        if self.pending and self._clock() - self._last >= self.interval():
            self._write(result)

    def _write(self, result: RunResult) -> None:
        data = dump_results(result)
        write_results(self.run_dir, result, data)
        self._last, self._size, self.pending = self._clock(), len(data), False
        self.writes += 1
        self.bytes += len(data)
