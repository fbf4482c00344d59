# pg_ramp: the one entry point. Drives CMake for transport/ and engine/ (and the benchmark
# drivers), PGXS for extension/, and the test suites.
#
#   make            build everything (Release)
#   make check      build and run every test (unit, fuzz smoke, pg_regress, integration)
#   make demo       the main job: local cluster + PostgreSQL + workload + report
#   make install    install the extension into PostgreSQL and rampd/rampctl/ramp_check into $(BINDIR)
#   make regress    pg_regress suites + integration tests of the extension (real rampd servers)
#   make SANITIZE=1 check   C++ parts built with ASan+UBSan (build-asan/); the extension is
#                   always linked against the Release libraries (build/): PostgreSQL is not
#                   an ASan binary

BUILD_TYPE ?= Release
SANITIZE ?=
BUILD_DIR ?= build$(if $(SANITIZE),-asan,)
JOBS ?= $(shell nproc)
CTEST_ARGS ?=
BINDIR ?= /usr/local/bin

CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(if $(SANITIZE),-DRAMP_SANITIZE=ON,)

FUZZ_SECONDS ?= 15

PG_CONFIG ?= pg_config
# The extension links the Release libraries (a sanitizer build cannot load into PostgreSQL).
RELEASE_BUILD_DIR := build

DEMO_ARGS ?=

.PHONY: soak all deps cmake-configure cmake-build check unit-check fuzz-smoke demo clean install \
	release-libs extension extension-install regress

all: cmake-build extension

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS)

cmake-configure: $(BUILD_DIR)/CMakeCache.txt

cmake-build: cmake-configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

unit-check: cmake-build
	scripts/check-meta.py
	scripts/check-architecture.py --self-test
	scripts/check-architecture.py
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# libFuzzer targets (clang, ASan+UBSan): a short smoke run; scripts/fuzz.sh N runs longer.
fuzz-smoke: deps
	scripts/fuzz.sh $(FUZZ_SECONDS) build-fuzz

# The Release libraries the extension links (the same as cmake-build unless SANITIZE=1).
release-libs: $(if $(SANITIZE),,cmake-build)
ifneq ($(SANITIZE),)
	$(MAKE) --no-print-directory SANITIZE= BUILD_DIR=$(RELEASE_BUILD_DIR) cmake-build
endif

extension: release-libs
	$(MAKE) --no-print-directory -C extension PG_CONFIG=$(PG_CONFIG) \
		RAMP_BUILD_DIR=$(abspath $(RELEASE_BUILD_DIR)) -j $(JOBS)

extension-install: extension
	$(MAKE) --no-print-directory -C extension PG_CONFIG=$(PG_CONFIG) \
		RAMP_BUILD_DIR=$(abspath $(RELEASE_BUILD_DIR)) install

# pg_regress suites and the integration tests (each starts its own rampd cluster and
# PostgreSQL instances, as user postgres when run as root).
regress: extension-install release-libs
	PG_CONFIG=$(PG_CONFIG) RAMP_BUILD_DIR=$(abspath $(RELEASE_BUILD_DIR)) regress/run_regress.sh --no-install

check: unit-check fuzz-smoke regress
	@echo "make check: all suites passed"

# Update-heavy soak of durable servers (10 minutes; disk usage must stay bounded).
soak: cmake-build
	bench/soak/run

# The main job: scripts/demo.sh builds and installs what it needs itself.
demo: deps
	scripts/demo.sh $(DEMO_ARGS)

install: extension-install
	install -d $(BINDIR)
	install -m 755 $(RELEASE_BUILD_DIR)/engine/tools/rampd $(RELEASE_BUILD_DIR)/engine/tools/rampctl \
		$(RELEASE_BUILD_DIR)/engine/tools/ramp_check $(BINDIR)

clean:
	rm -rf build build-asan build-fuzz
	$(MAKE) --no-print-directory -C extension clean
