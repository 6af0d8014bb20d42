# Entry points for people and CI. `make help` lists them.

GO ?= go
# Ryuk's image cannot be pulled here; the harness removes what it creates.
export TESTCONTAINERS_RYUK_DISABLED = true

.DEFAULT_GOAL := help
.PHONY: help images test beds vet fmt

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

images: ## Build every image the beds use (ours, the drivers, the sample modules, RabbitMQ, PostgreSQL, the netem helper) if missing or stale.
	$(GO) run ./cmd/build-images

test: ## Run every test: unit, integration, and the beds (skipped without Docker): the README's test command.
	$(GO) test ./...

beds: ## Run every bed against real containers (bedrun all).
	$(GO) run ./cmd/bedrun all

vet: ## Run go vet on every package.
	$(GO) vet ./...

fmt: ## Format every Go file in place with gofmt.
	gofmt -l -w .
