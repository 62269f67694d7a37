# The two commands: `make run` and `make test`. Both set everything up first
# (scripts/setup.sh is idempotent and quick once done).
BUILD ?= build
JOBS  ?= $(shell nproc)
GPU   ?= 0
# Where `make run` listens, e.g. `make run HOST=0.0.0.0 PORT=8080`.
HOST  ?= 127.0.0.1
PORT  ?= 8000

.PHONY: setup build test run demo bench clean

setup:
	GPU=$(GPU) bash scripts/setup.sh

$(BUILD)/CMakeCache.txt: CMakeLists.txt tests/CMakeLists.txt | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j 1

# The main job: the inference server on the bundled model folder.
run: build
	$(BUILD)/ebb serve --repository models --host $(HOST) --port $(PORT)

demo: build
	$(BUILD)/ebb demo

bench: build
	$(BUILD)/ebb bench overhead --json
	$(BUILD)/ebb bench floor --json
	$(BUILD)/ebb bench release --json

clean:
	rm -rf $(BUILD)
