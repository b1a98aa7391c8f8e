"""`python -m subclassaot`: see subclassaot.tools.cli."""

import sys

from subclassaot.tools.cli import main

sys.exit(main())
