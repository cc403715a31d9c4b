"""The HTTP service: routes, OpenAPI, telemetry, logs, the modes, and the composition
root (`build_service`)."""
