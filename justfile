# Contributor shortcuts. Everything here wraps plain cargo; the README's commands need no `just`.

default:
    @just --list

# Build every crate (debug).
build:
    cargo build --workspace

# Formatting, lints and the full test suite, as CI runs them.
ci:
    bash .ci/run

# The API docs (target/doc), with rustdoc's warnings denied as CI denies them.
doc:
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

# The whole test suite (the README's test command).
test:
    cargo test --workspace

# End-to-end tests against plimsoll-sim (or a real cluster with PLIMSOLL_E2E_KUBECONFIG set).
e2e:
    cargo test -p plimsoll-e2e -- --test-threads 1

# plimsoll-sim against clients no one here wrote: the official Python client (installed into a
# virtualenv under target/ on first use) and kubectl, plus the kube-rs conformance suite.
conformance:
    cargo test -p plimsoll-sim --test sim -- python_client:: kubectl:: conformance:: --nocapture

# The fault suite against plimsoll-sim, ignored scenarios included: prints each test's result
# and the rows of the table in docs/reliability.md.
faults:
    cargo test -p plimsoll-e2e --test e2e faults:: -- --nocapture --include-ignored 2>&1 | grep -E '^(\| |test )'

# One OCI image per service (ghcr.io/plimsoll-dev/<service>:<version>) with buildah, from the
# dist build; `scripts/images --help` for one service, another profile or other storage.
images *ARGS:
    scripts/images {{ARGS}}

# A release into dist/VERSION/: images (OCI archives) and SBOMs for amd64 and arm64, the chart
# package, plugin tarballs and krew manifest, with sha256 sums; docs/release.md. Same as
# `scripts/release VERSION` (`scripts/release --help` for the options).
release VERSION *ARGS:
    scripts/release {{ARGS}} {{VERSION}}

# The kubectl plugin (`kubectl plimsoll explain|convert|status`), optimised; copy
# target/dist/kubectl-plimsoll onto the PATH (docs/kubectl-plimsoll.md).
plugin:
    cargo build --profile dist -p kubectl-plimsoll

# Regenerate deploy/crds/ and the chart's templates/crds/ from the Rust types.
crds:
    cargo run -q -p xtask -- crds

# Regenerate charts/plimsoll/README.md (its values table) from values.schema.json and values.yaml.
chart-readme:
    cargo run -q -p xtask -- chart-readme

# The simulated cluster with every service and a demo workload.
demo:
    cargo run --release -p plimsoll-sim -- demo

# Every benchmark; numbers go to docs/benchmarks.md.
bench: bench-sim bench-pod-cut bench-hpa-plus bench-cron-hpa bench-vpa-recommender bench-vpa-recommender-api bench-vpa-updater bench-vpa-admission

bench-sim:
    cargo test --profile dist -p plimsoll-sim --test sim bench:: -- --ignored --nocapture

# What the per-pod cut and budget check cost per watch event beside its decode.
bench-pod-cut:
    cargo test --profile dist -p plimsoll-core --lib pod_fields::tests::bench_pod_cut -- --ignored --nocapture

bench-hpa-plus:
    cargo run --profile dist -p plimsoll-e2e --bin bench-hpa-plus

# hpa-plus sharded (issue 20): 4 processes over 100,000 objects, one killed mid-run; checks
# evaluation gaps and double writes, exits non-zero when one fails. About 15 min, not in `bench`.
bench-hpa-plus-shards:
    BENCH_HPA_PLUS_OBJECTS=100000 BENCH_HPA_PLUS_PERIOD=15 BENCH_HPA_PLUS_PROCESSES=4 \
        cargo run --profile dist -p plimsoll-e2e --bin bench-hpa-plus

# The same with the first process's heap profiled by heaptrack (Debian's `heaptrack`); the
# profile lands in /tmp/heaptrack.<pid>.gz. The checks' timings do not hold under the profiler.
bench-hpa-plus-heap:
    cargo build --profile dist -p plimsoll-e2e --features system-allocator --bin bench-hpa-plus
    BENCH_HPA_PLUS_PROFILE=scripts/heaptrack-child.sh BENCH_HPA_PLUS_OBJECTS=100000 \
        BENCH_HPA_PLUS_PERIOD=15 BENCH_HPA_PLUS_PROCESSES=4 target/dist/bench-hpa-plus

bench-cron-hpa:
    cargo run --profile dist -p plimsoll-e2e --bin bench-cron-hpa

bench-vpa-recommender:
    cargo run --profile dist -p plimsoll-e2e --bin bench-vpa-recommender

# The recommender through the sim's API at 5,000 VPAs, rate-limited (BENCH_QPS/BENCH_BURST) and not.
bench-vpa-recommender-api:
    cargo run --profile dist -p plimsoll-e2e --bin bench-vpa-recommender-api

bench-vpa-updater:
    cargo run --profile dist -p plimsoll-e2e --bin bench-vpa-updater

# The load comes from wrk and hey (Debian packages, installed here if missing); without them the
# benchmark falls back to its builtin client.
bench-vpa-admission:
    command -v wrk >/dev/null && command -v hey >/dev/null || apt-get install -y wrk hey || true
    cargo run --profile dist -p plimsoll-e2e --bin bench-vpa-admission

# Off against Scale on every real trace (scenarios/trace-*-off.yaml and -scale.yaml) and what
# minReplicasTuning would have done: the tables of docs/hpa-plus.md, "Predictive scaling".
# Further directories of *-off.yaml / *-scale.yaml pairs may follow.
predictive-report *DIRS:
    cargo run --release -q -p xtask -- predictive-report {{DIRS}}
