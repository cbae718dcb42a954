# eos — every target a fresh clone needs. `make demo` and `make test` run `setup` themselves.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
EOS_CACHE ?= $(CURDIR)/.cache
KAFKA_PORT ?= 9092
export EOS_CACHE KAFKA_PORT
# Maven in batch mode without colours; MVN_SHOW keeps one line per jar it downloads (none when ~/.m2
# has them already) and its errors, instead of -q's silence or hundreds of INFO lines.
MVN := mvn -B -Dstyle.color=never -s docker/maven/settings.xml $(MVN_ARGS)
MVN_SHOW := sed -un -e '/^\[ERROR\]/p' \
  -e 's|^\[INFO\] Downloaded from [^:]*: .*/\([^/]*\.jar\) (\([^ ]* [kMG]*B\).*|  downloaded \1 (\2)|p'
# pip without -q: a line per package and a progress bar for the big downloads. (Not --no-compile: where
# PYTHONDONTWRITEBYTECODE is set, as in CI, every test process would then compile what it imports.)
PIP_INSTALL := $(BIN)/pip install --progress-bar on --disable-pip-version-check
PYTEST_ARGS ?=
# Every run prints its 20 slowest tests: the durations table in every CI log.
PYTEST := $(BIN)/pytest --durations=20

PY_STAMP := $(VENV)/.installed
BROKER_STAMP := $(EOS_CACHE)/kafka/.fetched
# Spark's Kafka connector, fetched for the PySpark the venv has (one folder per Spark version).
PYSPARK_VERSION := $(shell test -x $(BIN)/python && $(BIN)/python -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)
SPARK_STAMP := $(EOS_CACHE)/spark-jars/.fetched-$(PYSPARK_VERSION)
# The tests' Schema Registry: Apicurio Registry, built from Maven Central (docker/maven/registry-pom.xml)
# once per version of that pom into ~/.cache/eos (it never changes; clones share it). EOS_TEST_REGISTRY_HOME
# moves it; tests/support/apicurio.py finds it the same way. The folder is named by the pom's hash, so its
# stamp has no prerequisites: a fresh clone's newer pom file must not rebuild it (~17 s, and the rm -rf
# would pull it from under another clone's running tests).
EOS_TEST_REGISTRY_HOME ?= $(HOME)/.cache/eos/registry-$(shell sha1sum docker/maven/registry-pom.xml | cut -c1-12)
export EOS_TEST_REGISTRY_HOME
REGISTRY_STAMP := $(EOS_TEST_REGISTRY_HOME)/.built
# eos's task placement on a cluster (eos/_spark/jvm): compiled against the installed PySpark's jars for
# Java 8 and up; the wheel ships it (a JDK's javac builds it; Spark runs it on a JRE).
PLACEMENT_JAR := eos/_spark/jvm/eos-placement.jar
JVM_SOURCES := $(wildcard eos/_spark/jvm/*.java)
# `pyspark-client` of the installed PySpark's version (4.0 and later; PyPI has it as a source archive), a
# wheel in the cache: the test of a Connect-only client installs it into a venv of its own, offline.
CLIENT_STAMP := $(EOS_CACHE)/wheels/.pyspark-client-$(PYSPARK_VERSION)
# Delta Lake's jars for the installed Spark, fetched by `make long-test` only (tests/integration/test_delta.py).
DELTA_STAMP := $(EOS_CACHE)/delta-jars/.fetched-$(PYSPARK_VERSION)
# The tests' Spark JVMs start from a class-data-sharing archive (tests/support/jvm.py), one per PySpark.
JVM_ARCHIVE := $(EOS_CACHE)/jvm/spark-$(PYSPARK_VERSION).jsa

.PHONY: setup broker-up broker-down unit-test integration-test test test-quick long-test lint demo chaos soak jvm-archive \
  matrix dist clean docs screenshots

setup: $(PY_STAMP) $(BROKER_STAMP) $(SPARK_STAMP) $(REGISTRY_STAMP) $(PLACEMENT_JAR) $(CLIENT_STAMP)

# Exact versions from constraints.txt (pyproject.toml declares the ranges users get).
$(PY_STAMP): pyproject.toml constraints.txt
	@echo "== Python: eos, PySpark, pyarrow, pandas, grpc, ... into $(VENV) (~0.5 GB download, ~1 GB on disk)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e '.[pyspark,test,connect,docs]' -c constraints.txt
	touch $@

$(CLIENT_STAMP): $(PY_STAMP)
	@version=$$($(BIN)/python -c 'import pyspark; print(pyspark.__version__)') && \
	  if [ "$${version%%.*}" -ge 4 ]; then \
	    echo "== pyspark-client $$version (a Spark Connect client only) as a wheel into $(EOS_CACHE)/wheels" && \
	    $(BIN)/pip wheel -q --disable-pip-version-check --no-deps -w $(EOS_CACHE)/wheels "pyspark-client==$$version" && \
	    touch $(EOS_CACHE)/wheels/.pyspark-client-$$version; fi

# Official Kafka broker jars (KRaft) with their runtime dependencies and a log4j2 binding.
$(BROKER_STAMP): docker/maven/broker-pom.xml docker/maven/settings.xml
	@echo "== Kafka broker jars (~90 jars, ~55 MB) via Maven (~/.m2) into $(EOS_CACHE)/kafka/libs"
	rm -rf $(EOS_CACHE)/kafka/libs
	@set -o pipefail; $(MVN) -f docker/maven/broker-pom.xml dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=$(EOS_CACHE)/kafka/libs | $(MVN_SHOW)
	touch $@

# Jars Maven fetches for the installed PySpark: $(1) a command printing the Maven properties, the last
# -DoutputDirectory=<folder>/<Spark version>; $(2) the pom; $(3) what they are. The stamp beside the
# folder, `.fetched-<Spark version>`, is what the targets below name.
define fetch_jars
@args="$$($(1))" && dir="$${args##*-DoutputDirectory=}" && \
  echo "== $(3) for the installed PySpark via Maven (~/.m2) into $$dir" && \
  rm -rf "$$dir" && set -o pipefail && \
  $(MVN) -f $(2) dependency:copy-dependencies -DincludeScope=runtime $$args | $(MVN_SHOW) && \
  touch "$$(dirname "$$dir")/.fetched-$$(basename "$$dir")"
endef

# Spark's Kafka connector and the runtime jars the PySpark wheel lacks.
$(SPARK_STAMP): $(PY_STAMP) docker/maven/spark-pom.xml docker/maven/settings.xml
	$(call fetch_jars,$(BIN)/python -c 'from eos._spark._cache import maven_args; print(maven_args())',docker/maven/spark-pom.xml,Spark's Kafka connector jars (~20 MB))

$(PLACEMENT_JAR): $(JVM_SOURCES) eos/_spark/jvm/stub/scala/Serializable.java docker/build_jar.py $(PY_STAMP) $(SPARK_STAMP)
	@echo "== eos's JVM classes (placement, the pass-through writer, format(\"eos\"); javac) into $@"
	@# the installed PySpark's version, asked here: on a fresh clone the .venv did not exist when make
	@# read this file, so $(PYSPARK_VERSION) is empty (the writer needs the connector's Kafka client)
	$(BIN)/python docker/build_jar.py $@ \
	  --classpath "$(EOS_CACHE)/spark-jars/$$($(BIN)/python -c 'import pyspark; print(pyspark.__version__)')/*"

# Apicurio publishes its application module, not a runnable jar: Quarkus's build makes one (~130 MB).
$(REGISTRY_STAMP):
	@echo "== Apicurio Registry (the tests' Schema Registry) via Maven (~/.m2, ~230 MB the first time) into $(EOS_TEST_REGISTRY_HOME)"
	rm -rf $(EOS_TEST_REGISTRY_HOME) && mkdir -p $(EOS_TEST_REGISTRY_HOME)
	cp docker/maven/registry-pom.xml $(EOS_TEST_REGISTRY_HOME)/pom.xml
	@set -o pipefail; mvn -B -Dstyle.color=never -s docker/maven/registry-settings.xml $(MVN_ARGS) \
	  -f $(EOS_TEST_REGISTRY_HOME)/pom.xml package '-D%prod.quarkus.package.type=fast-jar' \
	  -Dquarkus.class-loading.removed-artifacts=io.apicurio:apicurio-registry-app | $(MVN_SHOW)
	test -f $(EOS_TEST_REGISTRY_HOME)/target/quarkus-app/quarkus-run.jar
	touch $@

$(DELTA_STAMP): $(PY_STAMP) docker/maven/delta-pom.xml docker/maven/settings.xml
	$(call fetch_jars,$(BIN)/python -m tests.support.delta maven-args,docker/maven/delta-pom.xml,Delta Lake's jars (~8 MB))

broker-up: setup
	$(BIN)/python -m tests.support.localbroker up

broker-down:
	@if [ -x $(BIN)/python ]; then $(BIN)/python -m tests.support.localbroker down; else echo "no venv: nothing was started"; fi

$(JVM_ARCHIVE): $(SPARK_STAMP)
	@echo "== a class-data-sharing archive for the tests' Spark JVMs (~40 s, once per PySpark)"
	$(BIN)/python -m tests.support.jvm --dump

# The unit tests on every core (pytest-xdist); the integration tests one at a time (they share a broker
# and time their faults).
unit-test: setup
	$(PYTEST) -n auto tests/unit $(PYTEST_ARGS)

# `long` tests run in `make chaos` (README, "Development"), not here.
# Two workers, each with its own broker and Spark session (session fixtures are per worker), a file's tests
# on one worker (--dist loadfile: module fixtures and a page's order kept): 17.5 min serial, 11 in two.
integration-test: setup $(JVM_ARCHIVE)
	$(PYTEST) tests/integration -m "not long" -n 2 --dist loadfile $(PYTEST_ARGS)

# The archive is written while the unit tests run: it keeps about one core busy for ~40 s, and the unit
# tests, ~35 s alone on two, took 46-48 s beside it (one after the other: ~35 s + ~40 s).
test: setup
	$(MAKE) --no-print-directory -j2 --output-sync=target unit-test jvm-archive
	$(MAKE) --no-print-directory integration-test docs

jvm-archive: $(JVM_ARCHIVE)

# The inner loop: unit tests and the integration tests not marked `slow` (~20 s or more each).
test-quick: setup $(JVM_ARCHIVE)
	$(PYTEST) tests/unit tests/integration -m "not slow and not long" $(PYTEST_ARGS)

# The integration tests too long for `make test`: more variants of its kill and state tests.
long-test: setup $(JVM_ARCHIVE) $(DELTA_STAMP)
	$(PYTEST) tests/integration -m long $(PYTEST_ARGS)

# The documentation site (mkdocs.yml) in site/: docs/gen_reference.py rewrites the generated reference pages
# (docs/reference/configuration.md, cli.md, errors.md) from the code, then MkDocs builds every page with
# --strict (a warning, a broken link or anchor, a missing snippet fails it). Preview: $(BIN)/mkdocs serve
docs: $(PY_STAMP)
	$(BIN)/python docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site

# The built site's first pages at 1280 px, shot by headless Chromium into docs/assets/screenshots/
# (needs `chromium` on PATH; Debian: apt-get install -y chromium).
screenshots: docs
	$(BIN)/python docs/screenshots.py

# ruff, then the import rules between eos's layers (pyproject.toml's [tool.importlinter]).
lint: setup
	$(BIN)/ruff check eos tests examples bench docker
	$(BIN)/ruff format --check eos tests examples bench docker
	$(BIN)/lint-imports

# The fault list F1-F10 done for real on a Spark standalone cluster with its own broker; the knobs:
# `python -m tests.chaos.harness --help` (CHAOS_ARGS="--records 200000 --seed 3"); CHAOS_ARGS="--brokers 3"
# runs it on a replicated 3-broker cluster. Writes reports/chaos.json. Ctrl-C or a SIGTERM stops the broker,
# the Spark daemons and the driver it started (as it does for `make bench`).
# `make chaos` also runs the integration tests marked `long` (make long-test) after the harness, and
# the coordinator restarted inside its session on a 3-broker cluster with an eos task as its client
# (tests/chaos/coordinator_eos.py, ~4 minutes): eos must stop with CommitLostError where the broker
# commits a transaction on some partitions and aborts it on others.
# The stateful pipeline runs again on a cluster with transactions v1 finalized (transaction.version=1;
# Kafka 4 finalizes 2, which the runs above have): librdkafka speaks the v1 protocol to both.
CHAOS_ARGS ?=
chaos: setup $(JVM_ARCHIVE)
	$(BIN)/python -m tests.chaos.harness $(CHAOS_ARGS)
	$(BIN)/python -m tests.chaos.harness --transaction-version 1 --pipelines stateful \
	  --guarantees exactly_once --report reports/chaos-tv1.json $(CHAOS_ARGS)
	$(BIN)/python -m tests.chaos.coordinator_eos --tries 3 --seed 2
	$(MAKE) soak
	$(MAKE) long-test

# Small batches for a long time (35 minutes by default), exactly_once, stateless and stateful, with broker
# restarts and Python-worker kills: the processes' memory, threads and open files, the broker's
# transactional and producer ids, the state, ledger and checkpoint sizes sampled every minute, and each
# series' growth judged (tests/chaos/soak.py; SOAK_ARGS="--minutes 60"). Writes reports/soak.json.
SOAK_ARGS ?=
soak: setup
	$(BIN)/python -m tests.chaos.soak $(SOAK_ARGS)

# The other supported versions, each in a venv of its own (tests/matrix.py): Spark 3.5 with the lowest
# of every range on Python 3.10 and Kafka 3.9, the newest Spark 4.x on Python 3.12 and Kafka 4.3.
# Writes reports/matrix.json. MATRIX_ARGS="--only oldest" runs one.
MATRIX_ARGS ?=
matrix: setup
	$(BIN)/python -m tests.matrix $(MATRIX_ARGS)

demo: broker-up
	$(BIN)/python examples/demo.py --bootstrap 127.0.0.1:$(KAFKA_PORT)

# What exactly-once costs, side by side in one run on a broker of its own (free ports): reports/bench.json,
# reports/bench.png and a printed table. Knobs: BENCH_RECORDS (2000000), BENCH_RUNS (3), BENCH_BATCH
# (200000 records per trigger), BENCH_RESTORE_KEYS (1000000), BENCH_RESTORE_ORDER (sequential|random),
# BENCH_LATENCY_SECONDS (30),
# BENCH_LATENCY_RATE (2000/s), BENCH_ROWS, BENCH_SKIP (split,latency,restore), BENCH_OUT (reports),
# BENCH_SPLIT_BATCHES (20000,200000,2000000: records per trigger of the cost split).
# Quick: make bench BENCH_RECORDS=200000 BENCH_RUNS=1
# The cost split alone: make bench BENCH_ROWS=, BENCH_SKIP=latency,restore BENCH_PROFILE=none
.PHONY: bench
BENCH_VARS := BENCH_RECORDS BENCH_RUNS BENCH_BATCH BENCH_RESTORE_KEYS BENCH_RESTORE_ORDER BENCH_LATENCY_SECONDS \
  BENCH_LATENCY_RATE BENCH_ROWS BENCH_SKIP BENCH_OUT BENCH_PROFILE BENCH_SPLIT_BATCHES
export $(BENCH_VARS)
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(PY_STAMP) pyproject.toml
	@echo "== bench extras: matplotlib, py-spy, quixstreams into $(VENV)"
	$(PIP_INSTALL) -e '.[pyspark,test,connect,bench]' -c constraints.txt
	touch $@

bench: setup $(BENCH_STAMP)
	$(BIN)/python -m bench.run_bench

# sdist and wheel of the distribution `eos-spark` (import name `eos`) in dist/. Needs Python, pip and a JDK
# (javac) only, not `make setup`'s test rig: a venv of its own with constraints.txt's PySpark (the jar
# compiles against its jars) and `build`, and the Kafka client jar from Maven Central.
DIST_VENV := $(EOS_CACHE)/dist-venv
DIST_STAMP := $(DIST_VENV)/.installed
KAFKA_CLIENTS_VERSION := 3.9.0

$(DIST_STAMP): constraints.txt
	@echo "== a venv for the build (PySpark, build) in $(DIST_VENV)"
	test -x $(DIST_VENV)/bin/python || $(PYTHON) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/pip install --progress-bar on --disable-pip-version-check pyspark build -c constraints.txt
	touch $@

dist: $(DIST_STAMP)
	@echo "== eos's JVM classes (javac) into $(PLACEMENT_JAR)"
	$(DIST_VENV)/bin/python docker/build_jar.py $(PLACEMENT_JAR) \
	  --kafka-clients $(KAFKA_CLIENTS_VERSION) --cache $(EOS_CACHE)/jars
	rm -rf dist
	$(DIST_VENV)/bin/python -m build --outdir dist

clean:
	rm -rf $(VENV) $(EOS_CACHE) build dist *.egg-info reports $(PLACEMENT_JAR)
