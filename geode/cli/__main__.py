"""``python -m geode.cli``."""

import sys

from geode.cli.main import main

sys.exit(main())
