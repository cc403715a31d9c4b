"""`python -m extender.cli.kubeworker`: the Kubernetes-side process of `serve` when binds
and Events go through one (extender.cluster.kubeside starts it; extender.cluster.kubeworker
is what it runs), on uvloop like the verbs' process."""

from __future__ import annotations

import logging
import sys

import uvloop

from extender.cluster.kubeworker import parse, run


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="kubeworker: %(message)s")
    uvloop.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
