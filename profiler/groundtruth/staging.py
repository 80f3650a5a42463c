"""A run's output files land together or not at all.

`validate` and `serve-bench` write five to seven files into `data/validation/` after
minutes of measuring. Written one by one, a failure between them (a refused scenario, a
full disk, Ctrl-C) left a set that mixed the new run with the committed one: requests and
profile new, predictions and summary old. `staged` collects the files in a hidden folder
beside them and moves them into place only once every file is written.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def staged(out_dir: Path, name: str, log: Callable[[str], None] = print) -> Iterator[Path]:
    """A folder `out_dir/.{name}_new` to write the run's files into.

    On a clean exit each file replaces the one of the same name in `out_dir` (a rename on
    the same file system). On an exception nothing in `out_dir` changes; files already
    written stay in the folder, the log names it, and the exception propagates.
    """
    stage = out_dir / f".{name}_new"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    try:
        yield stage
    except BaseException:
        kept = sorted(p.name for p in stage.iterdir())
        if kept:
            log(
                f"stopped before every file was written: {out_dir}'s files are unchanged; "
                f"what was written ({', '.join(kept)}) is in {stage}"
            )
        else:
            stage.rmdir()
        raise
    for path in sorted(stage.iterdir()):
        os.replace(path, out_dir / path.name)
    stage.rmdir()
