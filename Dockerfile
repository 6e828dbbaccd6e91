# The gateway as a container image, for the Terraform deployments
# (terraform/aws runs it on ECS Fargate, terraform/gcp on Compute Engine):
#
#   docker build -t REGISTRY/gateway:TAG .
#
# One static binary (pure Go: SQLite and PostgreSQL drivers included) on an
# empty image with the CA bundle, run as an unprivileged user. Configuration
# comes from GATEWAY_* environment variables (README, Configuration).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/gateway ./cmd/gateway && \
	mkdir -p /out/tmp /out/data

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build --chmod=1777 /out/tmp /tmp
COPY --from=build --chown=65532:65532 /out/data /var/lib/gateway
COPY --from=build /out/gateway /usr/local/bin/gateway
USER 65532:65532
ENV GATEWAY_DATA_DIR=/var/lib/gateway GATEWAY_LISTEN=:8443
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve"]
