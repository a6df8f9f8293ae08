# The fleetwarden image (deploy/kubernetes, deploy/argocd): `docker build -t fleetwarden .`
# Two stages: wheels are built with the compilers, the runtime has none; it runs as the
# unprivileged 65532 with a read-only root filesystem (state lives on the mounted volume).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels fleetwarden \
    && rm -rf /wheels
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["fleetwarden"]
CMD ["--help"]
