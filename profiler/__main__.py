"""`python -m profiler`: see `profiler.cli`."""

import sys

from profiler.cli import main

sys.exit(main())
