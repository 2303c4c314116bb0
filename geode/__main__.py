"""``python -m geode``."""

import sys

from geode.cli.main import main

sys.exit(main())
