"""Failures as one safe line of operator text (`causes`, `redaction`), the one back-off
policy of every retry loop (`backoff`), and the loop of interval checks (`rounds`)."""
