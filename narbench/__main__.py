"""`python -m narbench ...`: the `narbench` command without its console script."""

import sys

from narbench.cli import main

sys.exit(main())
