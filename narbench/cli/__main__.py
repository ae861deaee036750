"""`python -m narbench.cli ...`: the `narbench` command (the torchrun docs launch it this way)."""

import sys

from narbench.cli import main

sys.exit(main())
