# The fleetwarden image (deploy/kubernetes, deploy/argocd): `docker build -t fleetwarden .`
# Two stages: wheels are built with the compilers, the runtime has none; it runs as the
# unprivileged 65532 with a read-only root filesystem (state lives on the mounted volume).
# BASE: any image with Python 3.11 and pip (tests/e2e/test_helm_chart.py builds one from
# Debian's own archive when no registry is reachable: scripts/debian-base-ensure)
ARG BASE=python:3.11-slim
FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels fleetwarden \
    && rm -rf /wheels
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["fleetwarden"]
CMD ["--help"]
