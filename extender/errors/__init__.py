"""Failures turned into one safe line of operator text (`causes`, `redaction`), and the
back-off of the background loops that check on an interval (`rounds`). Imports no room."""
