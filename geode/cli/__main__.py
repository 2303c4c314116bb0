"""``python -m geode.cli``: the command line's commands (the whole program: ``python -m geode``)."""

import sys

from geode.cli.main import main

sys.exit(main())
