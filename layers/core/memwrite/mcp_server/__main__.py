"""`python -m memwrite.mcp_server`: `memwrite mcp` where only `memwrite[mcp]` is installed."""

import sys

from memwrite.mcp_server.server import main

sys.exit(main())
