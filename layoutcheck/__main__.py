"""``python -m layoutcheck``: the same command line as the ``layoutcheck`` script."""

import sys

from layoutcheck.cli import main

sys.exit(main())
