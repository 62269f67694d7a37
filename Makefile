# The two commands: `make run` and `make test`. Both set everything up first
# (scripts/setup.sh is idempotent and quick once done).
BUILD ?= build
JOBS  ?= $(shell nproc)
# Tests at a time in `make test` and `make asan`: one. TEST_JOBS=2 takes ~40 % off the test time, but
# beside another test four tests failed in four CI runs (the memory bounds of java_leak_test, grpc_test and
# blender_failures; a failed request in cli_test's bench http): docs/testing.md. With TEST_JOBS=2 the ones
# that hold a bound on wall time still run alone (RUN_SERIAL in tests/CMakeLists.txt).
TEST_JOBS ?= 1
GPU   ?= 0
# Where `make run` listens, e.g. `make run HOST=0.0.0.0 PORT=8080 GRPC_PORT=8081`:
# PORT is the HTTP port, GRPC_PORT the gRPC port (0 turns gRPC off), both on HOST.
HOST  ?= 127.0.0.1
PORT  ?= 8000
GRPC_PORT ?= 8001

.PHONY: setup build test run demo bench wheel java-bench clean asan tsan fuzz fuzz-smoke soak soak-smoke gpu-bundle windows windows-test windows-dist windows-dist-test

setup:
	GPU=$(GPU) bash scripts/setup.sh

$(BUILD)/CMakeCache.txt: CMakeLists.txt tests/CMakeLists.txt tests/c/CMakeLists.txt python/CMakeLists.txt java/CMakeLists.txt | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS)

# The Python package's wheel for Linux x86_64, for every CPython 3 (py3-none-linux_x86_64: ctypes over
# libebb.so.1, ONNX Runtime's library inside; no CUDA provider unless WHEEL_CUDA=1):
# $(BUILD)/python/dist/ebb-<version>-py3-none-linux_x86_64.whl (python/build_wheel.py; docs/python.md).
WHEEL_CUDA ?= 0
wheel: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target ebb_wheel
	if [ "$(WHEEL_CUDA)" = 1 ]; then /usr/bin/python3 python/build_wheel.py --platform linux_x86_64 --cuda \
	  --out $(BUILD)/python/dist-cuda --c-api-lib-dir $(BUILD)/python/stage/lib; fi

# The main job: the inference server on the bundled model folder.
run: build
	$(BUILD)/ebb serve --repository models --host $(HOST) --port $(PORT) --grpc-port $(GRPC_PORT)

demo: build
	$(BUILD)/ebb demo

bench: build
	$(BUILD)/ebb bench overhead --json
	$(BUILD)/ebb bench floor --json
	$(BUILD)/ebb bench release --json
	$(BUILD)/ebb bench release --json --models $(BUILD)/generated_models --model conv_100mb --size 64
	$(BUILD)/ebb bench footprint --json
	$(BUILD)/ebb bench modelmesh --json
	$(BUILD)/ebb bench concurrency --json
	$(BUILD)/ebb bench stream --json
	EBB_BUILD_DIR=$(BUILD) PYTHONPATH=$(BUILD)/python /usr/bin/python3 python/bench/bench_python.py --json

# The Java binding's cost over the C++ run boundary (goal <= 1.05) and the 50-session arena figures,
# as JSON with its goals (java/src/bench/java/dev/ebb/bench/JavaBench.java).
java-bench: build
	sh $(BUILD)/java/java-bench.sh

# Sanitizers: the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan, -O1)
# and under ThreadSanitizer (build-tsan). Suppressions and ignore_noninstrumented_modules cover only the
# prebuilt libraries (ONNX Runtime, gRPC): each reason in tests/sanitizers/*.supp.
SAN := $(CURDIR)/tests/sanitizers
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
	LSAN_OPTIONS=suppressions=$(SAN)/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$(SAN)/ubsan.supp
TSAN_ENV := TSAN_OPTIONS=suppressions=$(SAN)/tsan.supp:halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1
SAN_CMAKE := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DEBB_BUILD_BENCHMARKS=OFF \
	-DEBB_BUILD_PYTHON=OFF

asan: setup
	cmake -S . -B build-asan $(SAN_CMAKE) -DEBB_SANITIZE=address
	cmake --build build-asan -j $(JOBS)
	cd build-asan && $(ASAN_ENV) ctest --output-on-failure -j $(TEST_JOBS)

tsan: setup
	cmake -S . -B build-tsan $(SAN_CMAKE) -DEBB_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && $(TSAN_ENV) ctest --output-on-failure -j 1

# libFuzzer targets (fuzz/, clang-14) in build-fuzz, each run FUZZ_SECONDS on its corpus.
FUZZ_SECONDS ?= 300

fuzz: setup
	cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-fuzz -j $(JOBS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh build-fuzz

# The soak: `ebb serve` under mixed good and bad requests with loads and unloads (tests/soak/).
SOAK_SECONDS ?= 600
soak: build
	/usr/bin/python3 tests/soak/soak.py --ebb $(BUILD)/ebb --seconds $(SOAK_SECONDS)

# The GPU bundle (docs/gpu-check.md): ebb, ebb_cuda_check, ONNX Runtime with its CUDA provider
# (fetched by `make setup GPU=1`) and the Debian libraries they load, split into parts of at most
# 56 MiB in $(BUILD)/gpu-bundle/carry-*, one per device call; scripts/gpu/run.sh runs them there.
gpu-bundle:
	$(MAKE) setup GPU=1
	$(MAKE) $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target ebb ebb_cuda_check
	bash scripts/gpu/bundle.sh --build-dir $(BUILD) --out $(BUILD)/gpu-bundle

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz

# Windows x64, cross-built here with MinGW-w64 into build-windows/ and tested under Wine (docs/windows.md):
# the runtime library, ebb.dll (the C API, with its import library libebb.dll.a), ebb.exe (without gRPC:
# `ebb serve` serves HTTP only) and the library's tests. scripts/setup-windows.sh installs the toolchain and Wine and builds what Debian has no MinGW
# build of from Debian's source packages (idempotent).
WINDOWS_BUILD := build-windows
WINDOWS_CMAKE := -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/mingw-w64-x86_64.cmake \
	-DEBB_MINGW_DEPS=$(CURDIR)/.deps/mingw/prefix -DCMAKE_BUILD_TYPE=Release \
	-DEBB_BUILD_GRPC=OFF -DEBB_BUILD_PYTHON=OFF -DEBB_BUILD_JAVA=OFF

windows: setup
	JOBS=$(JOBS) bash scripts/setup-windows.sh
	cmake -S . -B $(WINDOWS_BUILD) $(WINDOWS_CMAKE)
	cmake --build $(WINDOWS_BUILD) -j $(JOBS)

# The Windows build's tests under Wine: a private WINEPREFIX in build-windows/wine, WINEDEBUG=-all.
windows-test: windows
	cd $(WINDOWS_BUILD) && ctest --output-on-failure -j 1

# The Windows release archive: build-windows/ebb-<version>-windows-x64.zip and the Python wheel
# build-windows/ebb-<version>-py3-none-win_amd64.whl (scripts/windows-dist.sh), and their tests: the archive
# from an empty folder under Wine against the Linux build (tests/windows/dist_test.sh), the wheel's contents
# and the library name its Python files load (tests/windows/wheel_test.py).
EBB_VERSION := $(shell grep -m1 -o 'ebb VERSION [0-9.]*' CMakeLists.txt | cut -d' ' -f3)
windows-dist: windows
	bash scripts/windows-dist.sh $(WINDOWS_BUILD) $(EBB_VERSION)

windows-dist-test: windows-dist build
	bash tests/windows/dist_test.sh $(WINDOWS_BUILD)/ebb-$(EBB_VERSION)-windows-x64.zip $(BUILD)/ebb $(CURDIR)
	/usr/bin/python3 tests/windows/wheel_test.py $(WINDOWS_BUILD)/ebb-$(EBB_VERSION)-py3-none-win_amd64.whl $(WINDOWS_BUILD)
