"""`python -m lowering.cli`: the `dprintf` command."""

import sys

from .main import main

sys.exit(main())
