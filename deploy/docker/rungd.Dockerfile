# Build: docker build -f deploy/docker/rungd.Dockerfile --build-arg RUNG_VERSION=$(git describe --always --dirty --tags) -t rungd .
# (RUNG_VERSION: what `rungd --version`, /healthz and /metrics report; the image has no git, without it: "unknown")
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends build-essential libpq-dev libevent-dev \
    libjansson-dev libcurl4-openssl-dev libyaml-dev postgresql-common && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG RUNG_VERSION=
RUN make RUNG_VERSION="$RUNG_VERSION" bin/rungd bin/rungctl

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends libpq5 libevent-2.1-7 libjansson4 libcurl4 \
    libyaml-0-2 ca-certificates && rm -rf /var/lib/apt/lists/* && useradd -r rung
COPY --from=build /src/bin/rungd /src/bin/rungctl /usr/local/bin/
USER rung
EXPOSE 8080
ENV RUNG_LISTEN=0.0.0.0:8080
ENTRYPOINT ["/usr/local/bin/rungd"]
