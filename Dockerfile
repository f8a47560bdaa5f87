# Elicitation Gateway: a small image, built in stages, running as a non-root user.

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml constraints.txt README.md LICENSE ./
COPY elicitation_gateway ./elicitation_gateway
# Dependencies come from the project's own metadata, pinned by constraints.txt.
RUN python -m venv /opt/gateway \
    && /opt/gateway/bin/pip install --no-cache-dir -c constraints.txt ".[redis]"

FROM python:3.11-slim
ENV PATH=/opt/gateway/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=4096 \
    GATEWAY_DIRECTORY=/workspace
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /workspace gateway
COPY --from=build /opt/gateway /opt/gateway
USER 10001:10001
WORKDIR /workspace
EXPOSE 4096
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('GATEWAY_PORT', '4096'), timeout=2)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["elicitation-gateway"]
