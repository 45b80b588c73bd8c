# One image for every process: `warren worker`, `warren scheduler`, `warren monitor` and the ops
# commands (`warren failed`, ...). The folders topology/, worker/ and scheduler/ install as the
# one package warren_cron (pyproject.toml, [tool.setuptools.package-dir]).
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY topology topology
COPY worker worker
COPY scheduler scheduler
# Optional extras, e.g. `docker build --build-arg EXTRAS='[otel]'` for tracing (docs/tracing.md).
ARG EXTRAS=""
RUN pip install --no-cache-dir --prefix=/install ".${EXTRAS}"

FROM python:3.12-slim
RUN useradd --create-home --uid 10001 warren
COPY --from=build /install /usr/local
WORKDIR /app
COPY scripts scripts
COPY examples examples
USER warren
ENV PYTHONUNBUFFERED=1
CMD ["warren", "worker"]
