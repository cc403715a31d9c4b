# syntax=docker/dockerfile:1
# decice-extender: the kube-scheduler extender, one process, one worker.
#   docker build -t ghcr.io/decice/decice-extender:0.1.0 .
# Runs as a numeric non-root user with a read-only root filesystem: nothing is
# written at run time (bytecode is compiled here, PYTHONDONTWRITEBYTECODE=1).

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml README.md ./
COPY extender ./extender
RUN /opt/venv/bin/pip install --no-compile . \
 && /opt/venv/bin/pip uninstall --yes pip setuptools \
 && /opt/venv/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/venv/lib

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="decice-extender" \
      org.opencontainers.image.description="Metrics-aware kube-scheduler extender" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/decice/decice-extender"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONFAULTHANDLER=1
COPY --from=build /opt/venv /opt/venv
USER 65532:65532
# 8888: the verbs (127.0.0.1 by default), 8889: /metrics, /healthz, /readyz (server.metricsPort)
EXPOSE 8888 8889
ENTRYPOINT ["decice-extender", "serve"]
CMD ["--config", "/etc/decice/extender.yaml"]
