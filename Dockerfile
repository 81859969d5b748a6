# The skyhop worker image used by docker-compose.yml (scale-out deployment).
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends rsync openssh-client \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . /app
# A worker provisions on every cloud: all the extras (cloud SDKs), not the base install.
RUN pip install --no-cache-dir '.[all]'
ENV SKYHOP_HOME=/var/lib/skyhop
CMD ["skyhop", "worker"]
