# Builds the hook server and the reporter sidecar into one small image:
# the two binaries on the files of internal/imagefs (users, the CA bundle
# SSL_CERT_FILE names, the time zones, /tmp), on nothing else. `make
# release` builds the same image without a container builder
# (test/node/images.go reads this file to do it; TestHooksImageInStep-
# WithDockerfile and, where a builder runs, TestMakeImageMatchesRelease
# keep the two in step). The binaries embed their version
# (internal/buildinfo/VERSION); `make image` passes REVISION (the commit),
# which is linked into them since the build context has no .git, VERSION,
# which labels the image (its default is written by `make sync-version`),
# and SOURCE_DATE_EPOCH, the commit's time, which BuildKit makes the
# image's creation date.
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
RUN go run ./internal/imagefs/rootfs /rootfs

# No shell, no package manager; runs as nonroot (65532), whose home,
# created by WORKDIR after USER, is the one directory it may write
# besides /tmp.
FROM scratch
ARG VERSION=0.3.0-dev
ARG REVISION=
LABEL org.opencontainers.image.title="formspec-hooks" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.description="Metacontroller hooks and Cluster Control reporter of the FormSpec platform" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/formspec/formspec-hooks"
COPY --from=build /rootfs/ /
COPY --from=build /out/formspec-hooks /out/formspec-reporter /usr/local/bin/
ENV PATH=/usr/local/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /home/nonroot
# What the install listens on: hooks (TLS), metrics, the kubelet's probes.
EXPOSE 8443 9090 8081
ENTRYPOINT ["/usr/local/bin/formspec-hooks"]
CMD ["serve"]
