"""`python -m eos.cli`: the same program as the `eos` command."""

import sys

from eos.cli import main

sys.exit(main())
