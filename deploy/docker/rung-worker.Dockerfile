# Build: docker build -f deploy/docker/rung-worker.Dockerfile --build-arg RUNG_VERSION=$(git describe --always --dirty --tags) -t rung-worker .
# (RUNG_VERSION: what the worker registers with and `rung-worker --version` prints; without it: "unknown")
# The worker runs AI Toolkit as its trainer: base this image on the one you train with, or mount AI Toolkit at
# /opt/ai-toolkit. nvidia-smi comes from the NVIDIA container runtime.
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends build-essential libpq-dev libevent-dev \
    libjansson-dev libcurl4-openssl-dev libyaml-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG RUNG_VERSION=
RUN make RUNG_VERSION="$RUNG_VERSION" bin/rung-worker

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends libpq5 libevent-2.1-7 libjansson4 libcurl4 \
    libyaml-0-2 ca-certificates python3 python3-venv && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/bin/rung-worker /usr/local/bin/
ENV RUNG_WORK_DIR=/var/lib/rung-worker RUNG_TRAINER_DIR=/opt/ai-toolkit
VOLUME /var/lib/rung-worker
ENTRYPOINT ["/usr/local/bin/rung-worker"]
