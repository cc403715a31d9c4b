"""The `decice-extender` console script (extender.cli.main), one module per command."""
