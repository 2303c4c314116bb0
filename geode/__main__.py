"""``python -m geode``."""

import sys

from geode.program.main import main

sys.exit(main())
