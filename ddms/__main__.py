"""``python -m ddms``: the ``ddms`` command without the console script (same arguments)."""

import sys

from ddms.cli import main

sys.exit(main())
