# The two commands of a fresh machine:
#   make run    start inboxd all-in-one (embedded NATS, local Postgres)
#   make test   run the whole test suite
# Both prepare Postgres themselves (deploy/dev/postgres.sh).

export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
export GOFLAGS ?= -buildvcs=false

DATA ?= ./data
TEST_TIMEOUT ?= 14m

.PHONY: run test postgres build vet proto bench clean fuzz chaos chaos-cluster sdk web web-bundle web-screenshots deploy-check

# No load balancer watches `make run`'s /readyz: Ctrl-C stops it at once
# (--drain-delay 0s) instead of after the production default.
run: postgres
	go run ./cmd/inboxd --data $(DATA) --drain-delay 0s

# An execution count, not a duration: with a duration Go 1.26's fuzz
# coordinator can fail a target that found nothing ("context deadline
# exceeded" at the deadline, no input written; golang/go#75804, fixed in
# 1.27). A count has no deadline to race. 100,000 executions take about 3 s
# per target on this 2-core machine (26,000–37,000 execs/s).
FUZZTIME ?= 100000x

test: postgres sdk web
	go vet ./...
	go test -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)
	INBOXD_CHAOS=short go test -count=1 -timeout 10m -v -run '^TestChaos$$' ./internal/chaos/
	INBOXD_CHAOS_CLUSTER=short go test -count=1 -timeout 10m -v -run '^TestChaosCluster$$' ./internal/chaos/

# The long fault-injection run (100,000 messages, 100+ faults); its figures
# go to docs/reliability.md. Restarts the local Postgres: run it alone.
chaos: postgres
	INBOXD_CHAOS=long INBOXD_CHAOS_REPORT=$(CURDIR)/chaos-report.txt go test -count=1 -timeout 60m -v -run '^TestChaos$$' ./internal/chaos/

# The long cluster run (three NATS nodes, R3 streams, two gateways, two
# fanouts; 100,000 messages, 100+ faults of which 30+ NATS node kills, and
# Postgres restarts); its figures go to docs/reliability.md ("Cluster").
# Restarts the local Postgres: run it alone.
chaos-cluster: postgres
	INBOXD_CHAOS_CLUSTER=long INBOXD_CHAOS_REPORT=$(CURDIR)/chaos-cluster-report.txt go test -count=1 -timeout 120m -v -run '^TestChaosCluster$$' ./internal/chaos/

# Fuzz the frame decoders and the token parser (seed corpora in testdata/fuzz).
# `make test` runs each for 100,000 executions; `make fuzz FUZZTIME=1000000x`
# for a long run (a duration such as 10m works too, with the race above).
fuzz:
	go test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./wire/
	go test -run '^$$' -fuzz '^FuzzReadTCPFrame$$' -fuzztime $(FUZZTIME) ./wire/
	go test -run '^$$' -fuzz '^FuzzJSONFrame$$' -fuzztime $(FUZZTIME) ./wire/
	go test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./internal/auth/

postgres:
	deploy/dev/postgres.sh

# The TypeScript SDK's packages (sdk/js/package-lock.json): internal/e2e/sdkjs's
# TestSDKJS builds the SDK and runs its tests against a real inboxd with them.
sdk:
	cd sdk/js && npm ci --no-audit --no-fund

# The web client (web/): installs Debian's chromium and the browser test's
# packages (web/test, npm ci), and checks that the committed SDK bundle
# web/app/inboxd-sdk.js is a fresh build of sdk/js. The browser test itself
# is TestBrowser in ./web/, run by `go test ./...`; it fails, never skips,
# without what this target installs.
web: sdk
	deploy/dev/chromium.sh
	cd web/test && npm ci --no-audit --no-fund
	mkdir -p build/web
	cd sdk/js && node scripts/build.mjs --bundle $(CURDIR)/build/web/inboxd-sdk.js
	@cmp -s build/web/inboxd-sdk.js web/app/inboxd-sdk.js || { echo "web/app/inboxd-sdk.js is not a fresh build of sdk/js: run make web-bundle and commit it" >&2; exit 1; }

# Rebuild the committed SDK bundle after a change in sdk/js.
web-bundle: sdk
	cd sdk/js && node scripts/build.mjs --bundle $(CURDIR)/web/app/inboxd-sdk.js

# Run the browser test and write its README screenshots to docs/.
web-screenshots: web postgres
	INBOXD_DOCS_SCREENSHOTS=1 go test -count=1 -run '^TestBrowser$$' ./web/

# The deploy files against the code: nats-server -t and a real 3-node
# cluster from deploy/nats/cluster, systemd-analyze verify, the env
# templates, compose.yaml, the Grafana dashboard's metric names.
deploy-check: postgres
	go test -count=1 ./deploy/

build:
	go build -o bin/ ./cmd/...

vet:
	go vet ./...

bench: postgres
	go test -run '^$$' -bench . -benchmem ./...

# Regenerate wire/pb from wire/pb/inboxd.proto (installs protoc and protoc-gen-go).
proto:
	command -v protoc >/dev/null || (apt-get update -q && apt-get install -y -q protobuf-compiler)
	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	go generate ./wire/pb

clean:
	rm -rf bin $(DATA) build
