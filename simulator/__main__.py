"""`python -m simulator`: the command line lives in `simulator.cli`."""

import sys

from simulator.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
