import sys

from extender.cli.main import main

# Guarded: the metrics fetch process (metrics.child_process, started with `spawn`) imports
# the main module again, and must not start a second service.
if __name__ == "__main__":
    sys.exit(main())
