"""Reliability and security tests (issue 4): faults, hostile input, load, shutdown, TLS."""
