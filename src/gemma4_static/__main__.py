"""``python -m gemma4_static verify``: the command line of :mod:`gemma4_static.cli`."""

import sys

from .cli import main

sys.exit(main())
