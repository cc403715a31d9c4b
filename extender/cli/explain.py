"""`decice-extender explain`: why a pod went where it went (or is still Pending), from a
running extender's /explain."""

from __future__ import annotations

import argparse

from extender.cli.common import fetch_json


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    e = sub.add_parser("explain", help="why a pod went where it went (or is still pending)")
    e.add_argument("pod", help="NAMESPACE/NAME (or a UID with --uid)")
    e.add_argument("--uid", action="store_true", help="POD is a pod UID")
    e.add_argument("--url", default="http://127.0.0.1:8888", help="the extender's address")
    e.add_argument("--json", action="store_true", help="print the raw /explain document")
    e.add_argument("--timeout", type=float, default=10.0)
    e.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """GET /explain from a running extender and print it for a person (or as JSON)."""
    import json
    import urllib.parse

    from extender.cli.report import explain_text

    key = "uid" if args.uid else "pod"
    query = urllib.parse.urlencode({key: args.pod})
    doc = fetch_json(f"{args.url.rstrip('/')}/explain?{query}", args.timeout, "explain")
    if doc is None:
        return 1
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(explain_text(doc))
    return 0
