"""`python -m memwrite_local.cli`: the `memwrite` command (what the tests run in a subprocess)."""

import sys

from memwrite_local.cli import main

sys.exit(main())
