"""Failures turned into one safe line of operator text (`causes`, `redaction`), the one
back-off policy of every retry loop (`backoff`: exponential, full jitter), and the loop of
the background checks that run on an interval (`rounds`). Imports no other part of the
package."""
