# The fleetwarden image (deploy/kubernetes, deploy/argocd): `docker build -t fleetwarden .`
# Two stages: wheels are built with the compilers, the runtime has none; it runs as the
# unprivileged 65532 with a read-only root filesystem (state lives on the mounted volume).
# BASE: any image with Python 3.11 and pip (tests/e2e/test_helm_chart.py builds one from
# Debian's own archive when no registry is reachable: scripts/debian-base-ensure)
ARG BASE=python:3.11-slim
FROM ${BASE} AS build
WORKDIR /src
# The native node reader (src/fleetwarden/formats/_nodescan.c) needs a C compiler and Python's
# headers in this stage only. Best effort: where Debian's archive cannot be reached the wheel
# is built without it (an optional extension) and `scan` reads every dump with msgspec.
RUN command -v gcc >/dev/null 2>&1 || { \
      apt-get update -q && apt-get install -y -q --no-install-recommends gcc libc6-dev \
      && { python3 -c "import sysconfig, os, sys; sys.exit(not os.path.exists(sysconfig.get_paths()['include'] + '/Python.h'))" \
           || apt-get install -y -q --no-install-recommends python3-dev; }; \
    } >/tmp/compiler.log 2>&1 || echo "no C compiler: the wheel is built without the native node reader"
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
