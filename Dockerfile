# syntax=docker/dockerfile:1
# decice-extender: the kube-scheduler extender, one process, one worker.
#   docker build -t ghcr.io/decice/decice-extender:0.1.0 .   (scripts/image: docker, podman or buildah)
# Runs as a numeric non-root user with a read-only root filesystem: nothing is
# written at run time (bytecode is compiled here, PYTHONDONTWRITEBYTECODE=1).

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/venv
# The locked dependencies first (scripts/lock writes them from pyproject.toml): every
# file checked against its sha256, nothing resolved at build time, and a layer that
# source changes leave cached.
COPY requirements/build.txt requirements/runtime.txt ./requirements/
RUN /opt/venv/bin/pip install --require-hashes --no-deps --no-compile \
      -r requirements/build.txt -r requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY extender ./extender
# The project itself, built with the locked setuptools (no isolated build environment
# fetched from the index); pip check: the lock satisfies pyproject.toml. Then pip and
# setuptools go: nothing installs at run time. Bytecode for every module but the
# Kubernetes client's asyncio twin (kubernetes.aio, 26 MB compiled), which the service
# never imports (tests/deploy/test_dockerfile.py checks).
RUN /opt/venv/bin/pip install --no-deps --no-build-isolation --no-compile . \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/pip uninstall --yes pip setuptools \
 && /opt/venv/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash -x "/kubernetes/aio/" /opt/venv/lib

FROM ${PYTHON_IMAGE} AS runtime
# The commit built (the release workflow and scripts/image pass it): decice_build_info's
# git_commit label and the OCI revision; empty when unknown.
ARG GIT_COMMIT=""
LABEL org.opencontainers.image.title="decice-extender" \
      org.opencontainers.image.description="Metrics-aware kube-scheduler extender" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/decice/decice-extender" \
      org.opencontainers.image.revision="${GIT_COMMIT}"
ENV PATH=/opt/venv/bin:$PATH \
    DECICE_GIT_COMMIT=${GIT_COMMIT} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONFAULTHANDLER=1
COPY --from=build /opt/venv /opt/venv
USER 65532:65532
# 8888: the verbs (127.0.0.1 by default), 8889: /metrics, /healthz, /readyz (server.metricsPort)
EXPOSE 8888 8889
ENTRYPOINT ["decice-extender", "serve"]
CMD ["--config", "/etc/decice/extender.yaml"]
