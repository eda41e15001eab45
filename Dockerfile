# syntax=docker/dockerfile:1
# aep-kimi: relay + hook adapter (+ kimi web bridge) in one container.
# Build:  docker build -t aep-kimi .
# Run:    docker run --rm -p 8787:8787 -p 8398:8398 -e AEP_PUBLIC=1 -e AEP_TOKEN=... aep-kimi

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static binaries: no libc in the runtime image.
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/aep-kimi ./cmd/kimi-hook ./cmd/aep-setup

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
# State (tokens, logs, spool) lives here; mount a volume to keep it.
ENV AEP_HOME=/home/nonroot/.aep
USER nonroot:nonroot
EXPOSE 8787 8398 4323
# Loopback only unless told otherwise: AEP_PUBLIC=1 listens on all interfaces
# and then insists on a token you chose (AEP_TOKEN or AEP_TOKEN_FILE).
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/aep-kimi", "healthz"]
ENTRYPOINT ["/usr/local/bin/aep-kimi"]
CMD ["up"]
