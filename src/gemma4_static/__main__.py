"""``python -m gemma4_static verify``: the command line of :mod:`gemma4_static.commands.cli`."""

import sys

from .commands.cli import main

sys.exit(main())
