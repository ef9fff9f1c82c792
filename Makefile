# The two entry points of the README. Both install what is missing and build first.
#   make run    # set up, build, and run the built-in default job (agentr1 train --overwrite)
#   make test   # set up, build, and run the default test suite (all but label 'slow')
#   make test-slow   # the slow tests as well
BUILD_DIR ?= build
JOBS ?= 2

.PHONY: setup run test test-slow bench clean
setup:
	BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) bash scripts/setup.sh

# --overwrite: each `make run` starts the default job over in runs/default.
run: setup
	./$(BUILD_DIR)/agentr1 train --overwrite

test: setup
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -LE slow

test-slow: setup
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD_DIR)
