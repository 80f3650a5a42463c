"""`python -m profiler`: see `profiler.cli`."""

import sys

# ---- train-pair / validate (issue 5; owned by profiler/train_pair.py, profiler/validate.py) --
# Dispatched before `profiler.cli` so that its parser stays as it is; each module has its own
# argparse (`python -m profiler train-pair --help`, `python -m profiler validate --help`).
if len(sys.argv) > 1 and sys.argv[1] in ("train-pair", "validate"):
    if sys.argv[1] == "train-pair":
        from profiler.train_pair import main as _pair_main
    else:
        from profiler.validate import main as _pair_main
    sys.exit(_pair_main(sys.argv[2:]))
# ---- end of train-pair / validate ------------------------------------------------------------

from profiler.cli import main

sys.exit(main())
