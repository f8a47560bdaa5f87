# Elicitation Gateway: a small image, built in two stages, running as a non-root user.
#
#   docker build -t elicitation-gateway .
#   docker build -t elicitation-gateway --build-arg EXTRAS=redis,otel .    # with tracing (docs/deploying.md)
#
# The base image is pinned to an exact Python release. Pin its digest as well where a registry can be
# reached (`docker buildx imagetools inspect python:3.11.14-slim-bookworm` gives it): PYTHON_IMAGE
# accepts `python:3.11.14-slim-bookworm@sha256:…`. No registry could be asked for it when this was written.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# The version label: the package's version (elicitation_gateway/__init__.py). The build checks that the
# two agree, so a label can never name another release: after a version change, change it here too or
# pass it (`--build-arg VERSION="$(python -c 'import elicitation_gateway as g; print(g.__version__)')"`).
ARG VERSION=0.1.0

FROM ${PYTHON_IMAGE} AS build
ARG EXTRAS=redis
ARG VERSION
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# The venv gets no pip of its own: the base image's pip installs into it (`pip --python`).
RUN python -m venv --without-pip /opt/gateway
# 1. The dependencies alone, read from pyproject.toml and pinned by constraints.txt: this layer is built
#    again only when those two files change, not when the code does.
COPY pyproject.toml constraints.txt ./
RUN python -c 'import os, tomllib; project = tomllib.load(open("pyproject.toml", "rb"))["project"]; extras = [name for name in os.environ["EXTRAS"].split(",") if name]; print("\n".join(project["dependencies"] + [r for name in extras for r in project["optional-dependencies"][name]]))' > requirements.txt \
    && pip --python /opt/gateway/bin/python install --no-cache-dir -c constraints.txt -r requirements.txt
# 2. The package itself, without its dependencies (they are all there).
COPY README.md LICENSE ./
COPY elicitation_gateway ./elicitation_gateway
RUN pip --python /opt/gateway/bin/python install --no-cache-dir --no-deps . \
    && pip --python /opt/gateway/bin/python check \
    && installed="$(/opt/gateway/bin/python -c 'import elicitation_gateway; print(elicitation_gateway.__version__)')" \
    && if [ "$installed" != "$VERSION" ]; then echo "VERSION=$VERSION, but the package is $installed: the label would lie" >&2; exit 1; fi

FROM ${PYTHON_IMAGE}
ARG VERSION
ARG REVISION=""
ARG SOURCE=""
LABEL org.opencontainers.image.title="Elicitation Gateway" \
      org.opencontainers.image.description="Multi-question MCP elicitation over HTTP, answered through OpenCode-compatible questions over SSE." \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
ENV PATH=/opt/gateway/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=4096 \
    GATEWAY_DIRECTORY=/workspace \
    GATEWAY_STORE=sqlite:////data/gateway.db
# Nothing installs packages at run time: the base image's own pip and setuptools go too.
RUN python -m pip uninstall --yes --quiet pip setuptools wheel \
    && useradd --system --uid 10001 --user-group --create-home --home-dir /workspace gateway \
    && mkdir /data && chown 10001:10001 /data
COPY --from=build /opt/gateway /opt/gateway
USER 10001:10001
# Pending questions, results and the event history survive a restart here (the SQLite store).
VOLUME /data
WORKDIR /workspace
EXPOSE 4096
# Liveness: /livez answers while the process runs, whatever the store does; /healthz (ready to serve,
# the store reachable) is for load balancers and readiness probes.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/livez' % os.environ.get('GATEWAY_PORT', '4096'), timeout=2)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["elicitation-gateway"]
