"""The policy language: the models, loading with the environment's overrides, live
reload, the generated reference, check-config's checks and scheduler-config."""
