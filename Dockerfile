# Builds the hook server and the reporter sidecar into one small image.
# The binaries embed their version (internal/buildinfo/VERSION); `make image`
# passes REVISION (the commit), which is linked into them since the build
# context has no .git, and VERSION, which labels the image (its default is
# written by `make sync-version`).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY hooks ./hooks
COPY internal ./internal
ARG REVISION=
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags="-s -w -X github.com/formspec/formspec-hooks/internal/buildinfo.revision=${REVISION}" \
    -o /out/ ./cmd/formspec-hooks ./cmd/formspec-reporter

# distroless static: no shell, no package manager, runs as 65532.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=0.1.0
ARG REVISION=
LABEL org.opencontainers.image.title="formspec-hooks" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.description="Metacontroller hooks and Cluster Control reporter of the FormSpec platform" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/formspec/formspec-hooks"
COPY --from=build /out/formspec-hooks /out/formspec-reporter /usr/local/bin/
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/formspec-hooks"]
CMD ["serve"]
