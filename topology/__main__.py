"""``python -m warren_cron``: the ``warren`` command."""

import sys

from warren_cron.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
