#!/usr/bin/env python3
"""``warren history``, kept as a script for callers that run it by path."""

import sys

from warren_cron.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["history", *sys.argv[1:]]))
