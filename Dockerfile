# cann-exporter image: the exporter on python:3.11-slim, running as an unprivileged user.
#   docker build -t cann-exporter:0.1.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 -t cann-exporter:0.1.0 .   # both (make image)
#   docker run --rm -p 9435:9435 cann-exporter:0.1.0 serve --simulate healthy   # a demo on the simulator
# On an NPU host (deploy/docker-compose, profile "npu"), pass the device nodes and mount the
# driver's npu-smi; see docs/install.md.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY exporter ./exporter
RUN pip install --no-cache-dir --no-compile --prefix=/install .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="cann-exporter" \
      org.opencontainers.image.description="Prometheus exporter for Huawei Ascend NPU nodes (CANN stack)" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /install /usr/local
# uid/gid 10001: not a host user. On NPU hosts add the HwHiAiUser group of the host
# (docker run --group-add <gid>, Kubernetes supplementalGroups) to open the device nodes.
RUN groupadd --system --gid 10001 cann-exporter \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin cann-exporter \
 && install -d -o 10001 -g 10001 /var/lib/cann-exporter/generated
# /var/lib/cann-exporter/generated: where the compose stack's `rules` service writes the
# generated rules (a new volume mounted there takes this owner).
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
EXPOSE 9435
# /healthz answers as soon as the server is up (no curl in the slim image: Python's urllib).
# With TLS (--web.config.file) this plain-HTTP check fails: override it or use --no-healthcheck.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9435/healthz', timeout=4)"]
ENTRYPOINT ["cann-exporter"]
# The real npu-smi only: without it the exporter reports the failure, never simulated chips.
CMD ["serve"]
