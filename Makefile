# Growler developer entry points.  Everything a fresh Debian machine needs is installed here:
# the virtualenv (python3-venv via apt if ensurepip is missing), Python packages, PostgreSQL.
#
#   make run            serve on $GROWLER_BIND (127.0.0.1:8181) with embedded PostgreSQL + S3
#   make test           run the test suite: two pytest sessions side by side (scripts/suite.py;
#                       PYTEST_ARGS="-k foo -x" to pass options to both)
#   make lint           ruff
#   make models         regenerate app/rules/contract/ from openapi/*.yaml (scripts/models.py); commit the diff
#   make spark-jars     fetch the Iceberg Spark runtimes (3.5, 4.1) + AWS bundle (mvn) into .cache/spark-jars
#   make keycloak       fetch Keycloak (mvn) into .cache/keycloak-<version>: the IdP of the OIDC tests
#   make kafka          fetch Apache Kafka's broker jars (mvn) into .cache/kafka-<version>: the Kafka sink's test
#   make rck            fetch Iceberg's REST Compatibility Kit (mvn) into .cache/rck-<version>: its JUnit suites' test
#   make example        the Spark pipeline example (examples/pipeline.py) against a running make run
#                       (SPARK_LINE=4.1: on Spark 4.1 instead of 3.5)
#   make image          the OCI image (deploy/Containerfile) with buildah; IMAGE_BASE=<a Debian 12
#                       image> (default: a local base from Debian's packages, made with debootstrap)
#   make helm           build helm (Go module proxy) into .cache/ for the chart's tests
#   make bench          catalog benchmarks vs. a peer and the reference commit; docs/benchmarks.md
#                       (BENCH_QUICK=1: smoke run; BENCH_BASELINE=0: without the reference A/B)
#   make bench-java     Growler beside Iceberg's own REST server (Java, JDBC on SQLite), no auth
#   make bench-ab OLD=<rev>  server CPU per request of <rev> against this checkout, A/B pairs
#   make bench-gatling  Apache Polaris's Gatling benchmarks against Growler (bench/gatling/)
#   make bench-maintenance  compaction of a 10,000-small-file table on a Spark standalone cluster
#                       (issue 49; about an hour on 2 busy cores); docs/maintenance.md's Measured section
#   make clean          remove local data (.growler) and caches; keeps .venv
#   make distclean      clean + remove .venv and .venv-spark4

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
PIP := $(VPY) -m pip install --disable-pip-version-check --no-input
PYTEST_ARGS ?=

# Spark (tests/integration/spark_sql/, examples/pipeline.py) on two lines: Spark 3.5 (PySpark
# from requirements-test.txt, in .venv) and Spark 4.1 (PySpark 4.1 in its own .venv-spark4: the two
# PySpark releases cannot share one environment), plus jars of one Iceberg release from Maven
# Central; the only place the versions are named. The tests (in .venv) drive each line's Spark in a
# driver process started with that line's interpreter (tests/integration/spark_support.py).
ICEBERG_VERSION := 1.12.0
PYSPARK4_VERSION := 4.1.4
SPARK4_VENV := .venv-spark4
SPARK4_STAMP := $(SPARK4_VENV)/.installed-pyspark-$(PYSPARK4_VERSION)
SPARK_JARS_DIR := .cache/spark-jars
SPARK_JARS := $(SPARK_JARS_DIR)/iceberg-spark-runtime-3.5_2.12-$(ICEBERG_VERSION).jar \
              $(SPARK_JARS_DIR)/iceberg-spark-runtime-4.1_2.13-$(ICEBERG_VERSION).jar \
              $(SPARK_JARS_DIR)/iceberg-aws-bundle-$(ICEBERG_VERSION).jar
MVN_DEPENDENCY_PLUGIN := org.apache.maven.plugins:maven-dependency-plugin:3.8.1
# Keycloak, the real OIDC identity provider of tests/integration/test_oidc_keycloak.py (Java 17+).
KEYCLOAK_VERSION := 26.4.0
KEYCLOAK_HOME := .cache/keycloak-$(KEYCLOAK_VERSION)
# Apache Kafka (KRaft: broker and controller in one JVM, no ZooKeeper), the broker of
# tests/integration/test_event_kafka.py: kafka_2.13 and its runtime jars from Maven Central (Java 17+).
KAFKA_VERSION := 4.1.1
KAFKA_HOME := .cache/kafka-$(KAFKA_VERSION)
KAFKA_STAMP := $(KAFKA_HOME)/.fetched
# Iceberg's REST Compatibility Kit (tests/integration/test_java_rck.py): Iceberg's CatalogTests and
# ViewCatalogTests, with the Java client and JUnit's console launcher (tests/integration/rck/pom.xml).
# Its jars (iceberg-open-api's tests and test-fixtures, iceberg-core's and iceberg-api's tests) are
# not on Maven Central for ICEBERG_VERSION 1.12.0: the kit and its client are the newest release
# that has them.
RCK_ICEBERG_VERSION := 1.11.0
RCK_HOME := .cache/rck-$(RCK_ICEBERG_VERSION)
RCK_STAMP := $(RCK_HOME)/.fetched
# Spark 3.5 runs on Java 8/11/17, Spark 4.1 on 17/21: prefer an installed JDK 17 for both.
SPARK_JAVA_HOME ?= $(firstword $(wildcard /usr/lib/jvm/java-17-openjdk*))
# make example SPARK_LINE=4.1: the interpreter of the line's PySpark runs the example.
SPARK_LINE ?= 3.5
SPARK_PYTHON_3.5 := $(VPY)
SPARK_PYTHON_4.1 := $(SPARK4_VENV)/bin/python
SPARK_VENV_3.5 := venv-test
SPARK_VENV_4.1 := venv-spark4

# The OCI image (deploy/Containerfile, scripts/image.py): Debian's buildah; the base is any Debian 12
# image, by default one scripts/image.py makes from Debian's packages with debootstrap (no registry).
IMAGE ?= localhost/growler:latest
IMAGE_BASE ?= local
# helm, for the chart's tests (tests/integration/test_helm_chart.py): built from the Go module proxy.
HELM_VERSION := v3.22.0
# Built with the link flags of helm's own release build (its Kubernetes version, see $(HELM)); the
# directory's name says so, and a helm built before without them (in helm-v3.22.0/) is not reused.
HELM := .cache/helm-$(HELM_VERSION)-release/helm
# Go: from PATH, or where Go's own installer puts it (a CI shell may not have it on PATH).
GO ?= $(or $(shell command -v go 2>/dev/null),/usr/local/go/bin/go)

# A stamp named after the hash of the requirement files: unchanged files -> no pip at all.
DEV_REQS := requirements.txt requirements-dev.txt
TEST_REQS := $(DEV_REQS) requirements-test.txt
reqs_hash = $(shell cat $(1) | sha256sum | cut -c1-16)
DEV_STAMP := $(VENV)/.installed-dev-$(call reqs_hash,$(DEV_REQS))
TEST_STAMP := $(VENV)/.installed-test-$(call reqs_hash,$(TEST_REQS))

# $(call apt_install,<packages>): only as root with apt-get, non-interactive; refresh the
# package lists only if the first attempt fails (fresh machines have none).
define apt_install
if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
  echo "error: please install $(1) (e.g. sudo apt-get install $(1)); not root or no apt-get" >&2; exit 1; \
fi; \
export DEBIAN_FRONTEND=noninteractive; \
apt-get install -y -q --no-install-recommends $(1) \
  || { apt-get update -q && apt-get install -y -q --no-install-recommends $(1); }
endef

# $(call ensure_postgres,<env var naming an external database>): install the PostgreSQL server
# binaries unless that variable is set or they are already there (same search as scripts/postgres.py).
define ensure_postgres
if [ -n "$${$(1):-}" ]; then exit 0; fi; \
if [ -n "$${GROWLER_PG_BIN:-}" ] && [ -x "$$GROWLER_PG_BIN/initdb" ]; then exit 0; fi; \
if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1; then exit 0; fi; \
echo "PostgreSQL server binaries not found: installing postgresql"; \
$(call apt_install,postgresql)
endef

# $(call ensure_nginx): Debian's nginx, for the integration tests that put it in front of gunicorn
# (tests/integration/test_nginx.py runs deploy/nginx.conf); installed only when missing.
define ensure_nginx
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then exit 0; fi; \
echo "nginx not found: installing nginx"; \
$(call apt_install,nginx)
endef

# $(call ensure_buildah): Debian's buildah (builds and runs the OCI image) and debootstrap (its
# local base), for make image and tests/integration/test_image.py; installed only when missing.
define ensure_buildah
if command -v buildah >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1; then exit 0; fi; \
echo "buildah/debootstrap not found: installing buildah debootstrap"; \
$(call apt_install,buildah debootstrap)
endef

# $(call ensure_chromium): Debian's chromium and chromium-driver, for the console's browser test
# (tests/integration/test_console_browser.py, Selenium); installed only when missing.
define ensure_chromium
if { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then exit 0; fi; \
echo "chromium/chromedriver not found: installing chromium chromium-driver"; \
$(call apt_install,chromium chromium-driver)
endef

# $(call ensure_nats): Debian's nats-server, for the change feed's JetStream delivery tests
# (tests/integration/test_event_nats.py starts its own); installed only when missing.
define ensure_nats
if command -v nats-server >/dev/null 2>&1 || [ -x /usr/bin/nats-server ]; then exit 0; fi; \
echo "nats-server not found: installing nats-server"; \
$(call apt_install,nats-server)
endef

# $(call ensure_wrk): Debian's wrk (HTTP load generator with Lua scripts) for make bench.
define ensure_wrk
if command -v wrk >/dev/null 2>&1; then exit 0; fi; \
echo "wrk not found: installing wrk"; \
$(call apt_install,wrk)
endef

# $(call ensure_maven): Debian's maven (it brings a Java runtime), to fetch the Spark jars.
define ensure_maven
if command -v mvn >/dev/null 2>&1; then exit 0; fi; \
echo "mvn not found: installing maven"; \
$(call apt_install,maven)
endef

.PHONY: help venv venv-test run test lint models bench bench-java bench-ab bench-gatling bench-maintenance clean distclean image helm
.PHONY: spark-jars venv-spark4 example keycloak test-deps rck rest-reference

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

# --- virtualenv -------------------------------------------------------------------------------

# bin/pip (not bin/python) as the marker: a venv whose ensurepip failed has python but no pip.
$(VENV)/bin/pip:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (need Python 3.11+)" >&2; exit 1; }
	rm -rf $(VENV)
	if ! $(PYTHON) -m venv $(VENV); then \
	  rm -rf $(VENV); \
	  echo "python3 -m venv failed (Debian: ensurepip lives in python3-venv); installing python3-venv"; \
	  $(call apt_install,python3-venv); \
	  $(PYTHON) -m venv $(VENV); \
	fi

$(DEV_STAMP): | $(VENV)/bin/pip
	$(PIP) -r requirements.txt -r requirements-dev.txt
	rm -f $(VENV)/.installed-dev-*
	touch $@

$(TEST_STAMP): | $(VENV)/bin/pip
	$(PIP) -r requirements-test.txt
	rm -f $(VENV)/.installed-test-*
	touch $@

venv: $(DEV_STAMP)

venv-test: $(TEST_STAMP)

# PySpark 4.1 alone (the drivers need nothing else): its own venv, its own stamp.
$(SPARK4_STAMP): | $(VENV)/bin/pip
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (need Python 3.11+)" >&2; exit 1; }
	if [ ! -x $(SPARK4_VENV)/bin/pip ]; then \
	  rm -rf $(SPARK4_VENV); \
	  $(PYTHON) -m venv $(SPARK4_VENV) || { rm -rf $(SPARK4_VENV); $(call apt_install,python3-venv); $(PYTHON) -m venv $(SPARK4_VENV); }; \
	fi
	$(SPARK4_VENV)/bin/python -m pip install --disable-pip-version-check --no-input pyspark==$(PYSPARK4_VERSION)
	rm -f $(SPARK4_VENV)/.installed-pyspark-*
	touch $@

venv-spark4: $(SPARK4_STAMP)

# --- targets ----------------------------------------------------------------------------------

run: venv
	@$(call ensure_postgres,GROWLER_DATABASE_URL)
	exec $(VPY) -m scripts.run

test: test-deps
	@$(call ensure_postgres,GROWLER_TEST_DATABASE_URL)
	@$(call ensure_nginx)
	@$(call ensure_buildah)
	@$(call ensure_chromium)
	@$(call ensure_nats)
	$(VPY) -m scripts.suite $(PYTEST_ARGS)

# What the suite needs besides .venv: the Spark jars (fetched once, then found through
# GROWLER_SPARK_JARS), the Spark 4.1 interpreter (GROWLER_SPARK4_PYTHON), Keycloak, Kafka and
# Iceberg's REST Compatibility Kit. Fetched side
# by side on a fresh machine (two pip installs and the Maven downloads overlap; output grouped per
# target); the order-only prerequisites below keep apt-get and mvn one at a time.
test-deps:
	@$(MAKE) --no-print-directory -j4 -O venv-test spark-jars venv-spark4 keycloak kafka rck rest-reference helm
test: export GROWLER_KEYCLOAK_HOME = $(abspath $(KEYCLOAK_HOME))
test: export GROWLER_KEYCLOAK_JAVA_HOME = $(SPARK_JAVA_HOME)
test: export GROWLER_KAFKA_HOME = $(abspath $(KAFKA_HOME))
test: export GROWLER_KAFKA_JAVA_HOME = $(SPARK_JAVA_HOME)
test: export GROWLER_RCK_HOME = $(abspath $(RCK_HOME))
test: export GROWLER_RCK_JAVA_HOME = $(SPARK_JAVA_HOME)
# Iceberg's REST reference server (Jetty, sqlite-jdbc): the remote of tests/integration/test_federation.py
test: export GROWLER_REST_REFERENCE_LIBS = $(abspath $(BENCH_JAVA_HOME))/libs
test example: export GROWLER_SPARK_JARS = $(abspath $(SPARK_JARS_DIR))
test example: export GROWLER_SPARK_JAVA_HOME = $(SPARK_JAVA_HOME)
test example: export GROWLER_SPARK4_PYTHON = $(abspath $(SPARK_PYTHON_4.1))
# ensure_nginx ran: the nginx tests must run, not skip; the same for helm and buildah.
test: export GROWLER_TEST_NGINX_REQUIRED = 1
test: export GROWLER_HELM = $(abspath $(HELM))
test: export GROWLER_TEST_HELM_REQUIRED = 1
test: export GROWLER_TEST_IMAGE_REQUIRED = 1
# ensure_chromium ran: the console's browser test must run, not skip.
test: export GROWLER_TEST_BROWSER_REQUIRED = 1

spark-jars: $(SPARK_JARS)

# One apt-get (python3-venv, then maven) and one mvn (one local repository) at a time under make -j.
$(word 1,$(SPARK_JARS)): | $(VENV)/bin/pip
$(word 2,$(SPARK_JARS)): | $(word 1,$(SPARK_JARS))
$(word 3,$(SPARK_JARS)): | $(word 2,$(SPARK_JARS))
$(KEYCLOAK_HOME)/bin/kc.sh: | $(word 3,$(SPARK_JARS))
$(KAFKA_STAMP): | $(KEYCLOAK_HOME)/bin/kc.sh
$(RCK_STAMP): | $(KAFKA_STAMP)

# One jar per rule, idempotent (an existing jar is not fetched again). mvn copies into a temporary
# directory and the jar is moved in place only when complete; three attempts against flaky
# networks; other versions of the same artifact are removed (the tests expect exactly one).
$(SPARK_JARS_DIR)/%-$(ICEBERG_VERSION).jar:
	@$(call ensure_maven)
	rm -rf $(SPARK_JARS_DIR)/.tmp-$* && mkdir -p $(SPARK_JARS_DIR)/.tmp-$*
	for attempt in 1 2 3; do \
	  if mvn -q -B -Dstyle.color=never $(MVN_DEPENDENCY_PLUGIN):copy -Dartifact=org.apache.iceberg:$*:$(ICEBERG_VERSION) \
	      -DoutputDirectory=$(SPARK_JARS_DIR)/.tmp-$* -Dmaven.wagon.http.retryHandler.count=3; then break; fi; \
	  if [ $$attempt = 3 ]; then echo "error: could not fetch org.apache.iceberg:$*:$(ICEBERG_VERSION)" >&2; exit 1; fi; \
	  echo "mvn failed (attempt $$attempt); retrying"; sleep $$((attempt * 10)); \
	done
	rm -f $(SPARK_JARS_DIR)/$*-*.jar
	mv $(SPARK_JARS_DIR)/.tmp-$*/$*-$(ICEBERG_VERSION).jar $@
	rm -rf $(SPARK_JARS_DIR)/.tmp-$*

keycloak: $(KEYCLOAK_HOME)/bin/kc.sh

# Fetched once (idempotent: an unpacked distribution is not fetched again), like the jars above:
# mvn copies the tar.gz into a temporary directory, which is unpacked and moved in place whole.
$(KEYCLOAK_HOME)/bin/kc.sh:
	@$(call ensure_maven)
	rm -rf .cache/.tmp-keycloak && mkdir -p .cache/.tmp-keycloak
	for attempt in 1 2 3; do \
	  if mvn -q -B -Dstyle.color=never $(MVN_DEPENDENCY_PLUGIN):copy \
	      -Dartifact=org.keycloak:keycloak-quarkus-dist:$(KEYCLOAK_VERSION):tar.gz \
	      -DoutputDirectory=.cache/.tmp-keycloak -Dmaven.wagon.http.retryHandler.count=3; then break; fi; \
	  if [ $$attempt = 3 ]; then echo "error: could not fetch keycloak-quarkus-dist $(KEYCLOAK_VERSION)" >&2; exit 1; fi; \
	  echo "mvn failed (attempt $$attempt); retrying"; sleep $$((attempt * 10)); \
	done
	tar -xzf .cache/.tmp-keycloak/keycloak-quarkus-dist-$(KEYCLOAK_VERSION).tar.gz -C .cache/.tmp-keycloak
	rm -rf $(KEYCLOAK_HOME) && mv .cache/.tmp-keycloak/keycloak-$(KEYCLOAK_VERSION) $(KEYCLOAK_HOME)
	rm -rf .cache/.tmp-keycloak

.PHONY: kafka
kafka: $(KAFKA_STAMP)

# Fetched once (idempotent: the stamp is written last), like Keycloak: a two-line pom naming
# kafka_2.13 is resolved by mvn's copy-dependencies (the broker jar and its runtime scope) into a
# temporary directory, which is moved in place whole. tests/integration/kafka_support.py runs it
# with java -cp '<dir>/libs/*' (kafka.tools.StorageTool to format, kafka.Kafka to serve).
$(KAFKA_STAMP):
	@$(call ensure_maven)
	rm -rf .cache/.tmp-kafka && mkdir -p .cache/.tmp-kafka
	printf '%s\n' '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>' \
	  '<groupId>growler.test</groupId><artifactId>kafka-broker</artifactId><version>1</version><packaging>pom</packaging>' \
	  '<dependencies><dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>' \
	  '<version>$(KAFKA_VERSION)</version></dependency></dependencies></project>' > .cache/.tmp-kafka/pom.xml
	for attempt in 1 2 3; do \
	  if mvn -q -B -Dstyle.color=never -f .cache/.tmp-kafka/pom.xml $(MVN_DEPENDENCY_PLUGIN):copy-dependencies \
	      -DincludeScope=runtime -DoutputDirectory=libs -Dmaven.wagon.http.retryHandler.count=3; then break; fi; \
	  if [ $$attempt = 3 ]; then echo "error: could not fetch org.apache.kafka:kafka_2.13:$(KAFKA_VERSION)" >&2; exit 1; fi; \
	  echo "mvn failed (attempt $$attempt); retrying"; sleep $$((attempt * 10)); \
	done
	rm -rf $(KAFKA_HOME) && mkdir -p $(KAFKA_HOME) && mv .cache/.tmp-kafka/libs $(KAFKA_HOME)/libs
	rm -rf .cache/.tmp-kafka
	touch $@

rck: $(RCK_STAMP)

# Fetched once (idempotent: the stamp is written last; a changed pom fetches again), like Kafka: mvn's
# copy-dependencies resolves tests/integration/rck/pom.xml (the kit, the client, JUnit) into a
# temporary directory, which is moved in place whole. tests/integration/test_java_rck.py runs the
# suites with java -cp '<dir>/libs/*' org.junit.platform.console.ConsoleLauncher.
$(RCK_STAMP): tests/integration/rck/pom.xml
	@$(call ensure_maven)
	rm -rf .cache/.tmp-rck && mkdir -p .cache/.tmp-rck
	for attempt in 1 2 3; do \
	  if mvn -q -B -Dstyle.color=never -f tests/integration/rck/pom.xml $(MVN_DEPENDENCY_PLUGIN):copy-dependencies \
	      -Diceberg.version=$(RCK_ICEBERG_VERSION) -DincludeScope=runtime -DoutputDirectory=$(abspath .cache/.tmp-rck/libs) \
	      -Dmaven.wagon.http.retryHandler.count=3; then break; fi; \
	  if [ $$attempt = 3 ]; then echo "error: could not fetch Iceberg's REST Compatibility Kit $(RCK_ICEBERG_VERSION)" >&2; exit 1; fi; \
	  echo "mvn failed (attempt $$attempt); retrying"; sleep $$((attempt * 10)); \
	done
	rm -rf $(RCK_HOME) && mkdir -p $(RCK_HOME) && mv .cache/.tmp-rck/libs $(RCK_HOME)/libs
	rm -rf .cache/.tmp-rck
	touch $@

# Against a running `make run` (another server: EXAMPLE_ARGS="--uri http://host:8181 --warehouse w").
example: $(SPARK_VENV_$(SPARK_LINE)) spark-jars
	@[ -n "$(SPARK_PYTHON_$(SPARK_LINE))" ] || { echo "error: SPARK_LINE must be 3.5 or 4.1" >&2; exit 1; }
	$(SPARK_PYTHON_$(SPARK_LINE)) examples/pipeline.py --spark-line $(SPARK_LINE) $(EXAMPLE_ARGS)

helm: $(HELM)

# go install from the Go module proxy into .cache/helm-<version>-release/ (idempotent: built once),
# with the link flags helm's release build sets (its Makefile): the Kubernetes version helm assumes
# when no cluster is asked (helm template, helm lint) is the one of the client-go it was built with
# (v0.N -> 1.N). Without them a built helm assumes v1.20, and `helm template` refused the chart's
# kubeVersion (>=1.27) unless given --kube-version.
$(HELM):
	@[ -x "$(GO)" ] || { echo "error: go not found (needed to build helm $(HELM_VERSION))" >&2; exit 1; }
	gomod=$$(GOFLAGS=-mod=mod $(GO) mod download -json helm.sh/helm/v3@$(HELM_VERSION) | sed -n 's/^\s*"GoMod": "\(.*\)",$$/\1/p'); \
	minor=$$(sed -n 's/^\s*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$$gomod"); \
	[ -n "$$minor" ] || { echo "error: no k8s.io/client-go version in helm's go.mod ($$gomod)" >&2; exit 1; }; \
	flags="-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)"; \
	for pkg in pkg/chartutil pkg/lint/rules; do \
	  flags="$$flags -X helm.sh/helm/v3/$$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$$pkg.k8sVersionMinor=$$minor"; \
	done; \
	GOBIN=$(abspath $(dir $(HELM))) GOFLAGS=-mod=mod $(GO) install -ldflags "$$flags" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# IMAGE_BASE=local: a Debian 12 base from Debian's packages (debootstrap; cached in .cache/image).
image: venv
	@$(call ensure_buildah)
	base=$(IMAGE_BASE); if [ "$$base" = local ]; then base=$$($(VPY) -m scripts.image base); fi; \
	$(VPY) -m scripts.image build --base "$$base" --tag $(IMAGE)

# BENCH_QUICK=1: a smoke run (under a minute); other knobs in bench/run.py's docstring. The
# benchmark always starts its own PostgreSQL (no variable names an external one for it).
bench: venv-test
	@$(call ensure_postgres,GROWLER_BENCH_NO_EXTERNAL_DATABASE)
	@$(call ensure_wrk)
	$(VPY) -m bench.run

# Issue 49's measurement (bench/maintenance.py): Growler as make bench starts it (STS on), a Spark
# standalone cluster (scripts/spark_cluster.py), a table of 10,000 small files written by Spark, its
# compaction through the management API's runMaintenance, queries in Spark and DuckDB, the no-op
# second run, reads during compaction. Not in `make bench` (it takes long); MBENCH_* sizes in the
# module's docstring. Writes bench/results/latest-maintenance.json, then docs/maintenance.md's block.
bench-maintenance: venv-test spark-jars
	@$(call ensure_postgres,GROWLER_BENCH_NO_EXTERNAL_DATABASE)
	@$(call ensure_wrk)
	GROWLER_SPARK_JARS=$(abspath $(SPARK_JARS_DIR)) GROWLER_SPARK_JAVA_HOME=$(SPARK_JAVA_HOME) $(VPY) -m bench.maintenance
	$(VPY) -m bench.maintenance_report --docs

# Iceberg's REST reference server (RESTCatalogServer, iceberg-open-api's test-fixtures) and what it runs
# on (Jetty 12, sqlite-jdbc, S3FileIO): bench/java/pom.xml resolved into .cache/bench-java-<version>,
# once (the stamp is written last; a changed pom fetches again), like the RCK.
BENCH_JAVA_HOME := .cache/bench-java-$(RCK_ICEBERG_VERSION)
BENCH_JAVA_STAMP := $(BENCH_JAVA_HOME)/.fetched
$(BENCH_JAVA_STAMP): bench/java/pom.xml
	@$(call ensure_maven)
	rm -rf .cache/.tmp-bench-java && mkdir -p .cache/.tmp-bench-java
	for attempt in 1 2 3; do \
	  if mvn -q -B -Dstyle.color=never -f bench/java/pom.xml $(MVN_DEPENDENCY_PLUGIN):copy-dependencies \
	      -Diceberg.version=$(RCK_ICEBERG_VERSION) -DincludeScope=runtime -DoutputDirectory=$(abspath .cache/.tmp-bench-java/libs) \
	      -Dmaven.wagon.http.retryHandler.count=3; then break; fi; \
	  if [ $$attempt = 3 ]; then echo "error: could not fetch Iceberg's REST reference server $(RCK_ICEBERG_VERSION)" >&2; exit 1; fi; \
	  echo "mvn failed (attempt $$attempt); retrying"; sleep $$((attempt * 10)); \
	done
	rm -rf $(BENCH_JAVA_HOME) && mkdir -p $(BENCH_JAVA_HOME) && mv .cache/.tmp-bench-java/libs $(BENCH_JAVA_HOME)/libs
	rm -rf .cache/.tmp-bench-java
	touch $@

# The issue-47 side by side: W1 W2 W3 W5 W6, both without authentication, each alone in turn;
# bench/results/latest-java.json, and `python -m bench.report --docs` puts it in docs/benchmarks.md.
# The same jars serve the tests as a federated warehouse's remote (tests/integration/test_federation.py).
rest-reference: $(BENCH_JAVA_STAMP)
$(BENCH_JAVA_STAMP): | $(RCK_STAMP)

bench-java: venv-test $(BENCH_JAVA_STAMP)
	@$(call ensure_postgres,GROWLER_BENCH_NO_EXTERNAL_DATABASE)
	@$(call ensure_wrk)
	BENCH_PEER=java BENCH_AUTH=none BENCH_ONLY=$${BENCH_ONLY:-W1,W2,W3,W5,W6} BENCH_JAVA_HOME=$(SPARK_JAVA_HOME) $(VPY) -m bench.run

# Apache Polaris's Gatling benchmarks (bench/gatling/: vendored, setup adapted, bench/gatling/CHANGES.md),
# built with Maven from Maven Central (the upstream Gradle build's distribution is not reachable), run
# against Growler behind an nginx that maps Polaris's /api/catalog/ to / (bench/gatling_run.py).
GATLING_STAMP := bench/gatling/target/.built
$(GATLING_STAMP): bench/gatling/pom.xml $(shell find bench/gatling/src -type f 2>/dev/null)
	@$(call ensure_maven)
	rm -rf bench/gatling/target/libs bench/gatling/target/dependency-maven-plugin-markers  # the markers would skip the copy
	for attempt in 1 2 3; do \
	  if mvn -q -B -Dstyle.color=never -f bench/gatling/pom.xml compile $(MVN_DEPENDENCY_PLUGIN):copy-dependencies \
	      -DincludeScope=runtime -DoutputDirectory=$(abspath bench/gatling/target/libs) \
	      -Dmaven.wagon.http.retryHandler.count=3; then break; fi; \
	  if [ $$attempt = 3 ]; then echo "error: could not build the Gatling benchmarks" >&2; exit 1; fi; \
	  echo "mvn failed (attempt $$attempt); retrying"; sleep $$((attempt * 10)); \
	done
	touch $@

bench-gatling: venv-test $(GATLING_STAMP)
	@$(call ensure_postgres,GROWLER_BENCH_NO_EXTERNAL_DATABASE)
	@$(call ensure_nginx)
	BENCH_JAVA_HOME=$(SPARK_JAVA_HOME) $(VPY) -m bench.gatling_run

# Server CPU per request of OLD (any revision: exported with git archive into .cache/bench-ref-<commit>)
# against this checkout, both served at once, in interleaved pairs (bench/baseline.py, bench/ab.py).
OLD ?= e24938e
bench-ab: venv-test
	@$(call ensure_postgres,GROWLER_BENCH_NO_EXTERNAL_DATABASE)
	@$(call ensure_wrk)
	$(VPY) -m bench.baseline $(OLD)

lint: venv-test
	$(VENV)/bin/ruff check .

# The contract's models, generated (datamodel-code-generator, pinned in requirements-test.txt);
# tests/unit/test_contract_models.py fails when the committed ones differ from a regeneration.
models: venv-test
	$(VPY) -m scripts.models

clean:
	rm -rf .growler .pytest_cache .ruff_cache .hypothesis .cache
	find . \( -path ./$(VENV) -o -path ./$(SPARK4_VENV) \) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(SPARK4_VENV)
