# SwiftQueues — build, test, install, benchmark.
#
#   make demo        set up and run the examples (C and Swift)
#   make test        set up and run every test (C tests, again at SQ_WORKERS=8, a short
#                    chaos pass, C install check, swift test in both executor modes,
#                    documentation snippets)
#   make test-chaos  the pool's width matrix and the guarantee checker in a chaos
#                    build (-DSQ_CHAOS: random yields and sleeps inside the protocols)
#   make test-tsan   the C suite under ThreadSanitizer (and swift test)
#   make test-asan   the same under AddressSanitizer (+ UndefinedBehaviorSanitizer for C;
#                    swiftc has no UBSan)
#   make test-soak   the guarantee checker for SOAK_SECONDS (default 600), every width
#   make test-guarantees-dispatch  the guarantee checker on the toolchain's libdispatch
#   make bench       head-to-head benchmarks against the toolchain's libdispatch,
#                    and oneTBB / libuv on fan-out, fork-join and ping-pong
#   make trace-demo  records a trace of Examples/c/pipeline.c into build/ (open it in
#                    Perfetto UI; docs/OBSERVABILITY.md)
#   make trace-cost  instructions the trace points add, from callgrind (needs valgrind)
#   make bench-trace-cost  the C benchmarks against a build without trace points
#   make install     PREFIX=/usr/local DESTDIR=
#
# Every target that needs libevent / liburcu depends on `deps`, which installs
# them with apt-get when pkg-config cannot find them, and <sys/sdt.h> (the
# USDT probes; without it the library builds without probes).

PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DESTDIR    ?=

CC      ?= cc
BUILD   ?= build
VERSION := 0.1.0
SOMAJOR := 0

PKGS := libevent_pthreads liburcu-cds
# Recursive (=) so they are read after `deps` has installed the packages.
DEPS_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEPS_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

OPT      ?= -O2
SANITIZE ?=
CHAOS    ?=
WARNINGS := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Wformat=2 -Wno-unused-parameter
SAN_FLAGS = $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer,)
CFLAGS_ALL = -std=gnu11 $(OPT) -g -pthread $(WARNINGS) $(SAN_FLAGS) \
             $(if $(CHAOS),-DSQ_CHAOS,) -Iinclude $(DEPS_CFLAGS) $(CFLAGS)
LDFLAGS_ALL = -pthread $(SAN_FLAGS) $(LDFLAGS)

LIB_SRCS := $(wildcard Sources/CRuntime/*.c)
LIB_OBJS := $(patsubst Sources/CRuntime/%.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
HEADERS  := include/swiftqueues.h $(wildcard include/swiftqueues/*.h) \
            $(wildcard Sources/CRuntime/*.h)
STATIC   := $(BUILD)/libswiftqueues.a
SHARED   := $(BUILD)/libswiftqueues.so.$(VERSION)

TEST_SRCS := $(wildcard Tests/CRuntimeTests/test_*.c)
TEST_BINS := $(patsubst Tests/CRuntimeTests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))

SWIFT ?= swift
SWIFT_TEST_FLAGS ?=

# The block forms (sq_once, sq_benchmark, ...) need clang -fblocks and the
# Blocks runtime: both ship with the Swift toolchain found through `swift`.
SWIFT_BIN_DIR := $(shell dirname "$$(readlink -f "$$(command -v $(SWIFT))")" 2>/dev/null)
BLOCKS_CC     ?= $(SWIFT_BIN_DIR)/clang
BLOCKS_LIBDIR := $(SWIFT_BIN_DIR)/../lib/swift/linux
# (clang's sanitizer runtimes intercept libdispatch, hence -ldispatch there.)
BLOCKS_TESTS  := $(patsubst Tests/CRuntimeTests/blocks/%.c,$(BUILD)/tests/%,\
                   $(wildcard Tests/CRuntimeTests/blocks/test_*.c))

.PHONY: all deps lib pc test test-c test-c-wide test-chaos test-chaos-short \
        test-install test-swift test-swift-executor test-snippets test-tsan test-asan \
        release-checks test-soak test-guarantees-dispatch \
        bench bench-deps bench-trace-cost trace-cost trace-demo notrace-lib demo install \
        uninstall clean

all: lib

deps:
	@if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists $(PKGS); then :; else \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	  echo "SwiftQueues needs libevent and liburcu (pkg-config: $(PKGS)); running:"; \
	  echo "  $$sudo apt-get update && $$sudo apt-get install -y pkg-config libevent-dev liburcu-dev"; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq pkg-config libevent-dev liburcu-dev; \
	fi
	@if echo '#include <sys/sdt.h>' | $(CC) -E -x c - >/dev/null 2>&1; then :; else \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	  echo "SwiftQueues' USDT probes need <sys/sdt.h>; running:"; \
	  echo "  $$sudo apt-get install -y systemtap-sdt-dev"; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq systemtap-sdt-dev; \
	fi

lib: deps $(STATIC) $(BUILD)/libswiftqueues.so

$(BUILD)/obj/%.o: Sources/CRuntime/%.c $(HEADERS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fPIC -fvisibility=hidden -c $< -o $@

$(STATIC): $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

$(SHARED): $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,libswiftqueues.so.$(SOMAJOR) -Wl,--no-undefined \
	  -o $@ $^ $(LDFLAGS_ALL) $(DEPS_LIBS)

$(BUILD)/libswiftqueues.so: $(SHARED)
	ln -sf libswiftqueues.so.$(VERSION) $(BUILD)/libswiftqueues.so.$(SOMAJOR)
	ln -sf libswiftqueues.so.$(VERSION) $@

pc: $(BUILD)/swiftqueues.pc
$(BUILD)/swiftqueues.pc: swiftqueues.pc.in Makefile
	@mkdir -p $(BUILD)
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
	  $< > $@

install: lib
	@rm -f $(BUILD)/swiftqueues.pc
	$(MAKE) --no-print-directory pc PREFIX=$(PREFIX) LIBDIR=$(LIBDIR) INCLUDEDIR=$(INCLUDEDIR)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/swiftqueues
	install -m 644 include/swiftqueues.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 include/swiftqueues/*.h $(DESTDIR)$(INCLUDEDIR)/swiftqueues/
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libswiftqueues.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libswiftqueues.so.$(SOMAJOR)
	ln -sf libswiftqueues.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libswiftqueues.so
	install -m 644 $(BUILD)/swiftqueues.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	@rm -f $(BUILD)/swiftqueues.pc

uninstall:
	rm -rf $(DESTDIR)$(INCLUDEDIR)/swiftqueues $(DESTDIR)$(INCLUDEDIR)/swiftqueues.h
	rm -f $(DESTDIR)$(LIBDIR)/libswiftqueues.* $(DESTDIR)$(LIBDIR)/pkgconfig/swiftqueues.pc

# ---- tests -----------------------------------------------------------------

TEST_HEADERS := $(wildcard Tests/CRuntimeTests/*.h)

$(BUILD)/tests/%: Tests/CRuntimeTests/%.c $(TEST_HEADERS) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -ITests/CRuntimeTests -o $@ $< $(STATIC) $(LDFLAGS_ALL) $(DEPS_LIBS)

$(BUILD)/tests/%: Tests/CRuntimeTests/blocks/%.c $(TEST_HEADERS) $(STATIC)
	@mkdir -p $(dir $@)
	$(BLOCKS_CC) -fblocks $(filter-out -Wformat=2,$(CFLAGS_ALL)) -ITests/CRuntimeTests -o $@ $< \
	  $(STATIC) $(LDFLAGS_ALL) $(DEPS_LIBS) -L$(BLOCKS_LIBDIR) -lBlocksRuntime \
	  $(if $(SANITIZE),-ldispatch) \
	  -Wl,-rpath,$(BLOCKS_LIBDIR)

test: test-c test-c-wide test-chaos-short test-install test-swift test-swift-executor \
      test-snippets

test-c: lib $(TEST_BINS) $(BLOCKS_TESTS)
	@sh Tests/CRuntimeTests/run.sh $(TEST_BINS) $(BLOCKS_TESTS)

# The C suite again with a pool of 8 workers, standing in for a bigger
# machine (the width matrix, the guarantee checker and the liveness
# scenarios run every width themselves).
test-c-wide: lib $(TEST_BINS) $(BLOCKS_TESTS)
	@echo "C suite with SQ_WORKERS=8:"
	@SQ_WORKERS=8 sh Tests/CRuntimeTests/run.sh \
	  $(filter-out %/test_pool_matrix %/test_guarantees %/test_liveness %/test_priority,$(TEST_BINS)) \
	  $(BLOCKS_TESTS)

# The pool's width matrix and the guarantee checker in a chaos build;
# test-chaos-short is CI's pass.
CHAOS_TESTS := test_pool_matrix test_queue_wakeups test_queue_stress test_guarantees \
               test_liveness test_priority
test-chaos: deps
	$(MAKE) --no-print-directory BUILD=build-chaos CHAOS=1 \
	  $(addprefix build-chaos/tests/,$(CHAOS_TESTS))
	@sh Tests/CRuntimeTests/run.sh $(addprefix build-chaos/tests/,$(CHAOS_TESTS))

test-chaos-short: deps
	@SQT_MATRIX_SCALE=20 SQT_SECONDS=2 SQT_LIVENESS_SCALE=0.3 $(MAKE) --no-print-directory test-chaos

# The guarantee checker's long form: SOAK_SECONDS of random programs,
# every width in turn, fresh seeds each round (a chaos soak:
# make test-soak BUILD=build-chaos CHAOS=1).
SOAK_SECONDS ?= 600
test-soak: lib $(BUILD)/tests/test_guarantees
	SOAK_SECONDS=$(SOAK_SECONDS) $(BUILD)/tests/test_guarantees

# The C story end to end: install into a temporary prefix, build a program
# with that prefix's pkg-config file, run it.
test-install: lib
	@rm -rf $(BUILD)/install-check
	@$(MAKE) --no-print-directory install PREFIX=$(CURDIR)/$(BUILD)/install-check >/dev/null
	PKG_CONFIG_PATH=$(CURDIR)/$(BUILD)/install-check/lib/pkgconfig sh -c \
	  '$(CC) -o $(BUILD)/install-check/quickstart Examples/c/quickstart.c \
	     $$(pkg-config --cflags --libs swiftqueues) \
	     -Wl,-rpath,$(CURDIR)/$(BUILD)/install-check/lib'
	$(BUILD)/install-check/quickstart

# The misuse messages must survive -O: one release build of the
# Tests/MisuseChecks program, run by MisuseMessageTests in both swift test
# runs below (SWIFTQUEUES_RELEASE_CHECKS names its folder).
release-checks: deps
	$(SWIFT) build -c release --product MisuseChecks
RELEASE_CHECKS_ENV = SWIFTQUEUES_RELEASE_CHECKS="$$($(SWIFT) build -c release --show-bin-path)"

test-swift: deps release-checks
	$(RELEASE_CHECKS_ENV) $(SWIFT) test $(SWIFT_TEST_FLAGS)

# The whole Swift suite again with SwiftQueues as Swift concurrency's
# global executor (installed from the environment before main). Swift
# Testing runs every test at once and each synchronous test blocks a
# worker while it waits: the default cap (SQ_MAX_THREADS 255) keeps the
# blocked ones from holding every thread the queue work they wait for
# needs (docs/ARCHITECTURE.md, "Blocking tasks share the queues' cap").
test-swift-executor: deps release-checks
	$(RELEASE_CHECKS_ENV) SWIFTQUEUES_GLOBAL_EXECUTOR=1 $(SWIFT) test $(SWIFT_TEST_FLAGS)

# Every Swift / C snippet of README.md and docs/*.md, built in one scratch
# package under $(BUILD)/snippets that depends on this one by path.
test-snippets: deps
	SWIFT="$(SWIFT)" CC="$(CC)" BLOCKS_CC="$(BLOCKS_CC)" sh scripts/check-snippets.sh $(BUILD)

# The guarantee checker on the toolchain's libdispatch, the reference: the
# same programs and checks through a thin layer mapping sq_* onto
# dispatch_* (Tests/CRuntimeTests/guarantees_dispatch.h).
DISPATCH_INC ?= $(SWIFT_BIN_DIR)/../lib/swift
test-guarantees-dispatch:
	@mkdir -p $(BUILD)/tests
	$(BLOCKS_CC) -fblocks -DGQ_DISPATCH -std=gnu11 -O2 -g -pthread \
	  $(filter-out -Wformat=2,$(WARNINGS)) -I$(DISPATCH_INC) -ITests/CRuntimeTests \
	  -o $(BUILD)/tests/test_guarantees_dispatch Tests/CRuntimeTests/test_guarantees.c \
	  -L$(BLOCKS_LIBDIR) -ldispatch -lBlocksRuntime -Wl,-rpath,$(BLOCKS_LIBDIR)
	$(BUILD)/tests/test_guarantees_dispatch

test-tsan: deps
	$(MAKE) --no-print-directory test-c BUILD=build-tsan SANITIZE=thread OPT=-O1
	TSAN_OPTIONS="halt_on_error=1" $(SWIFT) test --sanitize=thread --scratch-path .build-tsan

test-asan: deps
	$(MAKE) --no-print-directory test-c BUILD=build-asan SANITIZE=address,undefined OPT=-O1 \
	  CFLAGS="-fno-sanitize-recover=undefined"
	ASAN_OPTIONS="detect_leaks=1" LSAN_OPTIONS="suppressions=$(CURDIR)/Tests/lsan.supp" \
	  $(SWIFT) test --sanitize=address --scratch-path .build-asan

# ---- benchmarks and demo -----------------------------------------------------

# The peer rows (Benchmarks/bench_peers.c) need oneTBB and libuv: installed
# with apt-get like `deps` when pkg-config cannot find them; where that
# fails, the benchmarks run without those rows.
BENCH_PKGS := tbb libuv

bench-deps:
	@if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists $(BENCH_PKGS); then :; else \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	  echo "The peer benchmarks need oneTBB and libuv (pkg-config: $(BENCH_PKGS)); running:"; \
	  echo "  $$sudo apt-get update && $$sudo apt-get install -y libtbb-dev libuv1-dev"; \
	  { $$sudo apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq libtbb-dev libuv1-dev; } || \
	    echo "Not installed: the benchmarks run without the oneTBB and libuv rows."; \
	fi

bench: lib bench-deps
	$(MAKE) --no-print-directory -C Benchmarks ROOT=$(CURDIR) run
	$(SWIFT) run -c release --package-path Benchmarks/SwiftBench \
	  --scratch-path $(CURDIR)/.build-bench-swift SwiftBench
	$(SWIFT) run -c release --package-path Benchmarks/OperationQueueBench \
	  --scratch-path $(CURDIR)/.build-bench-ops OperationQueueBench
	$(SWIFT) run -c release --package-path Benchmarks/ExecutorBench \
	  --scratch-path $(CURDIR)/.build-bench-executor ExecutorBench

# The library without trace points (-DSQ_NO_TRACE), to measure what they
# cost while nothing observes them.
NOTRACE := build-notrace
notrace-lib: deps
	@$(MAKE) --no-print-directory lib BUILD=$(NOTRACE) CFLAGS="$(CFLAGS) -DSQ_NO_TRACE"

trace-cost: lib notrace-lib
	sh scripts/trace-cost.sh $(BUILD)

# The whole C table twice, against this build and against one without
# trace points, and each row's ratio (the figures of a quiet machine only).
bench-trace-cost: lib notrace-lib
	$(MAKE) --no-print-directory -C Benchmarks ROOT=$(CURDIR) run
	$(MAKE) --no-print-directory -C Benchmarks ROOT=$(CURDIR) \
	  OUT=$(CURDIR)/$(NOTRACE)/bench LIBSQ=$(CURDIR)/$(NOTRACE)/libswiftqueues.a run
	python3 scripts/compare-bench.py $(BUILD)/bench/results.json \
	  $(NOTRACE)/bench/results.json

# A trace of the pipeline example (I/O, a concurrent queue, a group, a
# timer source, an after, the main queue), checked, in $(BUILD)/.
trace-demo: lib
	@mkdir -p $(BUILD)/examples
	$(CC) $(CFLAGS_ALL) -o $(BUILD)/examples/pipeline Examples/c/pipeline.c \
	  $(STATIC) $(LDFLAGS_ALL) $(DEPS_LIBS)
	SQ_TRACE=$(BUILD)/trace-demo.json $(BUILD)/examples/pipeline
	python3 scripts/check-trace.py $(BUILD)/trace-demo.json \
	  --expect-thread "main thread" --expect-thread sq.worker \
	  --expect-thread sq.manager --expect-thread sq.io
	@echo "Open $(BUILD)/trace-demo.json in Perfetto UI (ui.perfetto.dev: Open trace file)"
	@echo "or chrome://tracing (Load); docs/OBSERVABILITY.md tells how to read it."

demo: lib
	@mkdir -p $(BUILD)/examples
	@for src in Examples/c/*.c; do \
	  bin=$(BUILD)/examples/$$(basename $$src .c); \
	  $(CC) $(CFLAGS_ALL) -o $$bin $$src $(STATIC) $(LDFLAGS_ALL) $(DEPS_LIBS) || exit 1; \
	  echo "== $$bin"; $$bin || exit 1; \
	done
	$(SWIFT) run -c release SwiftQueuesDemo

clean:
	rm -rf build build-tsan build-asan build-chaos build-notrace
	$(MAKE) --no-print-directory -C Benchmarks ROOT=$(CURDIR) clean 2>/dev/null || true
