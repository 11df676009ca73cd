# slurmpod: the two commands a new user needs are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
VENV := .venv
SP := $(VENV)/bin/slurmpod
PYTEST := $(VENV)/bin/pytest
FLAVORS ?= 24.11 26.05

.PHONY: demo test test-faults test-netpol bench images clean lint unit image-tests cluster-tests bootstrap manifests k8s-up k8s-down k8s-tests

bootstrap:
	@scripts/bootstrap-host.sh

## demo: build images if needed, start a cluster of pods, run jobs through it
demo: bootstrap
	$(SP) demo --flavor 24.11

## test: lint, types, unit tests, both flavors' images, full cluster suite on 24.11, smoke on 26.05, then
## the chart on a real Kubernetes 1.20.2 (tests/k8s, 24.11) once the emulator's clusters are down: the two
## share the Docker engine and never run at once
test: bootstrap lint unit
	$(SP) images build --flavor 24.11
	$(SP) images build --flavor 26.05
	SLURMPOD_TEST_FLAVOR=24.11 $(PYTEST) -m "not faults" --durations=15 tests/image tests/cluster
	SLURMPOD_TEST_FLAVOR=26.05 $(PYTEST) tests/image
	SLURMPOD_TEST_FLAVOR=26.05 $(PYTEST) tests/cluster -m smoke --durations=10
	$(MAKE) k8s-tests

## k8s-tests: build the control plane when this machine has none (6-8 min, cached in /var/cache/slurmpod), then tests/k8s
k8s-tests: bootstrap
	$(SP) k8s build
	SLURMPOD_TEST_FLAVOR=24.11 $(PYTEST) -m k8s --durations=10 tests/k8s

## k8s-up: a local single-node Kubernetes 1.20.2 on this Docker engine to try the chart on (docs/kubernetes.md)
k8s-up: bootstrap
	$(SP) k8s up

k8s-down: bootstrap
	$(SP) k8s down

## test-faults: the twelve GPU faults end to end on both flavors (about 12 min each: each requeue waits out cred_expire, 30 s here)
test-faults: bootstrap
	$(SP) images build --flavor 24.11
	$(SP) images build --flavor 26.05
	SLURMPOD_TEST_FLAVOR=24.11 $(PYTEST) -m faults tests/cluster
	SLURMPOD_TEST_FLAVOR=26.05 $(PYTEST) -m faults tests/cluster

## test-netpol: the NetworkPolicies enforced in the emulator (iptables on its bridge; root, br_netfilter), on 24.11
test-netpol: bootstrap
	$(SP) images build --flavor 24.11
	SLURMPOD_TEST_FLAVOR=24.11 $(PYTEST) -m netpol tests/cluster

lint: bootstrap
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy build/__editable__*/slurmpod host/build/__editable__*/slurmpod_host

## unit: includes helm lint/template of deploy/helm/slurmpod and offline schema checks (tests/unit/deploy/test_helm_chart.py)
unit: bootstrap
	$(PYTEST) tests/unit

## manifests: re-render deploy/kubernetes/slurmpod.yaml from the chart's default values (commit the result)
manifests: bootstrap
	scripts/render-manifests.sh

images: bootstrap
	for f in $(FLAVORS); do $(SP) images build --flavor $$f || exit 1; done

## bench: build and start-up figures, each beside a baseline measured in the same run
bench: bootstrap
	$(VENV)/bin/python -P -m slurmpod_host.bench --out bench-results  # -P: import the installed package, not ./slurmpod

clean: bootstrap
	-$(SP) k8s down
	-$(SP) cluster down
	-$(SP) cluster down --name sptest
	@echo "cluster state dirs are removed by cluster down"
