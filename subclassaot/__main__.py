"""`python -m subclassaot`: see subclassaot.cli."""

import sys

from subclassaot.cli import main

sys.exit(main())
