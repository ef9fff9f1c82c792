# The two entry points of the README. Both install what is missing and build first.
#   make run    # set up, build, and run the built-in default job (agentr1 train --overwrite)
#   make test   # set up, build, and run the default test suite (all but label 'slow')
#   make test-slow   # the slow tests as well
#   make test-sanitize   # the default suite built with ASan + UBSan, in build-sanitize/
#   make fuzz        # libFuzzer targets, FUZZ_SECONDS (default 60) each; fuzz-ci: CI's short pass
BUILD_DIR ?= build
JOBS ?= 2

.PHONY: setup run test test-slow test-sanitize fuzz fuzz-ci bench clean
setup:
	BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) bash scripts/setup.sh

# --overwrite: each `make run` starts the default job over in runs/default.
run: setup
	./$(BUILD_DIR)/agentr1 train --overwrite

test: setup
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -LE slow

test-slow: setup
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

# The sanitizers' settings: any report fails the test, leaks included (scripts/lsan.supp
# holds suppressions for leaks in libraries we do not build; none were needed so far).
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test-sanitize:
	BUILD_DIR=build-sanitize JOBS=$(JOBS) CMAKE_ARGS="-DAGENTR1_SANITIZE=ON -DAGENTR1_BUILD_BENCH=OFF" \
		bash scripts/setup.sh
	cd build-sanitize && $(SAN_ENV) ctest --output-on-failure -j$(JOBS) -LE slow

FUZZ_SECONDS ?= 60
fuzz:
	bash fuzz/run.sh $(FUZZ_SECONDS)

fuzz-ci:
	bash fuzz/run.sh --ci

clean:
	rm -rf $(BUILD_DIR)
