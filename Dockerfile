# Multi-stage build: the release binary on Swift's Debian image, run on a slim Debian with libpq5.
#   docker build -t rbac .
#   docker run --rm -e DATABASE_URL=postgres://... rbac migrate
#   docker run --rm -p 8080:8080 -e DATABASE_URL=postgres://... -e RBAC_JWT_SECRET=... rbac
ARG SWIFT_IMAGE=swift:6.3-bookworm

FROM ${SWIFT_IMAGE} AS build
# The build packages of scripts/install-deps (not its server, nor jq for the README).
RUN apt-get update && apt-get install -y --no-install-recommends pkg-config libpq-dev libssl-dev libcurl4-openssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Every directory Package.swift names a target in, or the package does not load.
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
COPY Benchmarks ./Benchmarks
RUN swift build -c release --product rbac --static-swift-stdlib \
    && mkdir -p /out/bin /out/share/rbac \
    && cp "$(swift build -c release --show-bin-path)/rbac" /out/bin/ \
    && cp -R "$(swift build -c release --show-bin-path)/rbac_Server.resources" /out/bin/
COPY sql /out/share/rbac/sql
COPY policies /out/share/rbac/policies

FROM debian:bookworm-slim
# --static-swift-stdlib still links libpq, libssl, libcrypto and libcurl dynamically.
RUN apt-get update && apt-get install -y --no-install-recommends libpq5 libssl3 libcurl4 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home rbac
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/share/rbac /usr/local/share/rbac
USER rbac
ENV RBAC_HOST=0.0.0.0 RBAC_PORT=8080
EXPOSE 8080
ENTRYPOINT ["rbac"]
CMD ["serve"]
