import sys

from extender.cli.main import main

# Guarded: the metrics fetch process (metrics.fetch_subprocess, started with `spawn`) imports
# the main module again, and must not start a second service.
if __name__ == "__main__":
    sys.exit(main())
