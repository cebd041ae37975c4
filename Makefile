# SwiftQueues — build, test, install, benchmark.
#
#   make demo        set up and run the examples (C and Swift)
#   make test        set up and run every test (C tests, again at SQ_WORKERS=8, a short
#                    chaos pass, C install check (pkg-config, CMake, man pages),
#                    unmodified libdispatch programs, swift test in both executor
#                    modes, documentation snippets, man pages)
#   make docs        the reference docs in build/docs: the C API's HTML (c-html) and
#                    man pages (man/man3) by Doxygen from the headers' comments, the
#                    Swift module's by DocC (swift)
#   make test-man    regenerates the C docs (failing on an undocumented public name),
#                    every public sq_ function has a generated man page, every page
#                    renders without warnings, `man` finds them in an installed prefix
#   make test-compat libdispatch's test programs and GCD examples, unchanged, built
#                    against the compatibility headers (compat/dispatch) and run;
#                    every public libdispatch name mapped and in docs/FEATURES.md
#   make test-chaos  the pool's width matrix and the guarantee checker in a chaos
#                    build (-DSQ_CHAOS: random yields and sleeps inside the protocols)
#   make test-tsan   the C suite under ThreadSanitizer (and swift test)
#   make test-asan   the same under AddressSanitizer (+ UndefinedBehaviorSanitizer for C;
#                    swiftc has no UBSan)
#   make test-soak   the guarantee checker for SOAK_SECONDS (default 600), every width
#   make test-guarantees-dispatch  the guarantee checker on the toolchain's libdispatch
#   make bench       head-to-head benchmarks against the toolchain's libdispatch,
#                    and oneTBB / libuv on loops, fan-out, fork-join and ping-pong
#   make trace-demo  records traces of Examples/c/pipeline.c and Examples/c/stall.c into
#                    build/ (open them in Perfetto UI) and runs sq-trace-report on the
#                    stall's (docs/OBSERVABILITY.md)
#   make trace-cost  instructions the trace points add, from callgrind (needs valgrind)
#   make bench-trace-cost  the C benchmarks against a build without trace points
#   make install     PREFIX=/usr/local DESTDIR=  (library, headers, pkg-config files,
#                    CMake package, compatibility headers, man pages in
#                    $(MANDIR)/man3, bin/sq-trace-report)
#
# Every target that needs libevent / liburcu depends on `deps`, which installs
# them with apt-get when pkg-config cannot find them, and <sys/sdt.h> (the
# USDT probes; without it the library builds without probes).

PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
BINDIR     ?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
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
        test-install test-compat test-swift test-swift-executor test-snippets test-man \
        man-deps docs docs-c docs-swift test-tsan test-asan \
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

# The pkg-config files and the CMake package, for PREFIX / LIBDIR / INCLUDEDIR.
CONFIGURED := $(BUILD)/swiftqueues.pc $(BUILD)/swiftqueues-dispatch.pc \
              $(BUILD)/SwiftQueuesConfig.cmake $(BUILD)/SwiftQueuesConfigVersion.cmake
SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g; s|@LIBDIR@|$(LIBDIR)|g; s|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
            -e 's|@VERSION@|$(VERSION)|g; s|@SOMAJOR@|$(SOMAJOR)|g'
pc: $(CONFIGURED)
$(BUILD)/%.pc: %.pc.in Makefile
	@mkdir -p $(BUILD)
	$(SUBST) $< > $@
$(BUILD)/%.cmake: cmake/%.cmake.in Makefile
	@mkdir -p $(BUILD)
	$(SUBST) $< > $@

# The libdispatch compatibility headers go to their own folder
# (INCLUDEDIR/swiftqueues-dispatch/dispatch), on the include path only of
# programs that ask for them (pkg-config swiftqueues-dispatch,
# SwiftQueues::dispatch): never over the system's <dispatch/dispatch.h>.
install: lib docs-c
	@rm -f $(CONFIGURED)
	$(MAKE) --no-print-directory pc PREFIX=$(PREFIX) LIBDIR=$(LIBDIR) INCLUDEDIR=$(INCLUDEDIR)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/swiftqueues \
	  $(DESTDIR)$(INCLUDEDIR)/swiftqueues-dispatch/dispatch \
	  $(DESTDIR)$(LIBDIR)/cmake/SwiftQueues $(DESTDIR)$(BINDIR)
	install -m 755 scripts/sq-trace-report $(DESTDIR)$(BINDIR)/
	install -m 644 include/swiftqueues.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 include/swiftqueues/*.h $(DESTDIR)$(INCLUDEDIR)/swiftqueues/
	install -m 644 compat/dispatch/*.h $(DESTDIR)$(INCLUDEDIR)/swiftqueues-dispatch/dispatch/
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libswiftqueues.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libswiftqueues.so.$(SOMAJOR)
	ln -sf libswiftqueues.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libswiftqueues.so
	install -m 644 $(BUILD)/swiftqueues.pc $(BUILD)/swiftqueues-dispatch.pc \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 644 $(BUILD)/SwiftQueuesConfig.cmake $(BUILD)/SwiftQueuesConfigVersion.cmake \
	  $(DESTDIR)$(LIBDIR)/cmake/SwiftQueues/
	@rm -f $(CONFIGURED)
	@# The generated pages: one per family, a link page for every name.
	DOCS=$(BUILD)/docs sh scripts/check-man.sh --install $(DESTDIR)$(MANDIR)

uninstall: docs-c
	rm -rf $(DESTDIR)$(INCLUDEDIR)/swiftqueues $(DESTDIR)$(INCLUDEDIR)/swiftqueues.h \
	  $(DESTDIR)$(INCLUDEDIR)/swiftqueues-dispatch $(DESTDIR)$(LIBDIR)/cmake/SwiftQueues
	rm -f $(DESTDIR)$(LIBDIR)/libswiftqueues.* $(DESTDIR)$(LIBDIR)/pkgconfig/swiftqueues.pc \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/swiftqueues-dispatch.pc
	DOCS=$(BUILD)/docs sh scripts/check-man.sh --uninstall $(DESTDIR)$(MANDIR)
	rm -f $(DESTDIR)$(BINDIR)/sq-trace-report

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

test: test-c test-c-wide test-chaos-short test-install test-compat test-swift \
      test-swift-executor test-snippets test-man

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
               test_liveness test_priority test_take_width
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
test-install: lib man-deps
	@rm -rf $(BUILD)/install-check
	@$(MAKE) --no-print-directory install PREFIX=$(CURDIR)/$(BUILD)/install-check >/dev/null
	PKG_CONFIG_PATH=$(CURDIR)/$(BUILD)/install-check/lib/pkgconfig sh -c \
	  '$(CC) -o $(BUILD)/install-check/quickstart Examples/c/quickstart.c \
	     $$(pkg-config --cflags --libs swiftqueues) \
	     -Wl,-rpath,$(CURDIR)/$(BUILD)/install-check/lib'
	$(BUILD)/install-check/quickstart
	SQ_TRACE=$(BUILD)/install-check/quickstart.json $(BUILD)/install-check/quickstart
	$(BUILD)/install-check/bin/sq-trace-report $(BUILD)/install-check/quickstart.json \
	  | grep '^Per queue and function' >/dev/null
	PKG_CONFIG_PATH=$(CURDIR)/$(BUILD)/install-check/lib/pkgconfig sh -c \
	  '$(CC) -o $(BUILD)/install-check/pipeline_f Tests/DispatchCompat/examples/pipeline_f.c \
	     $$(pkg-config --cflags --libs swiftqueues-dispatch) \
	     -Wl,-rpath,$(CURDIR)/$(BUILD)/install-check/lib'
	$(BUILD)/install-check/pipeline_f
	@if command -v cmake >/dev/null 2>&1; then \
	  echo "CMake package: find_package(SwiftQueues)"; \
	  cmake -S Tests/CMakeConsumer -B $(BUILD)/install-check/cmake \
	    -DCMAKE_PREFIX_PATH=$(CURDIR)/$(BUILD)/install-check -DSQ_SOURCE_DIR=$(CURDIR) \
	    -DCMAKE_C_COMPILER=$(CC) >/dev/null && \
	  cmake --build $(BUILD)/install-check/cmake >/dev/null && \
	  $(BUILD)/install-check/cmake/quickstart && \
	  $(BUILD)/install-check/cmake/pipeline_f; \
	else echo "cmake not found: the CMake package is not checked"; fi
	@# man finds an installed page by any name it documents (a link page).
	MANPATH=$(CURDIR)/$(BUILD)/install-check/share/man MANWIDTH=80 man -P cat sq_async \
	  | grep -q 'sq_async_f' && echo "man sq_async: the swiftqueues_queue(3) page"
	@$(MAKE) --no-print-directory uninstall PREFIX=$(CURDIR)/$(BUILD)/install-check >/dev/null
	@left=$$(find $(BUILD)/install-check/share/man -type f | wc -l); \
	  if [ "$$left" -ne 0 ]; then echo "uninstall left $$left man pages"; exit 1; fi

# Unmodified libdispatch programs against the compatibility headers
# (compat/dispatch/*.h): libdispatch's own test programs when
# DISPATCH_TESTS names a checkout of their folder (their harness's
# interface implemented in Tests/DispatchCompat/harness) and GCD examples in their dispatch_
# spelling (Tests/DispatchCompat/examples), each built with only the
# compatibility include folder and -lswiftqueues (and the Blocks runtime),
# then run. collision.c also loads the toolchain's libdispatch.
COMPAT_DIR     := Tests/DispatchCompat
COMPAT_CFLAGS  := -std=gnu11 -O2 -g -pthread -Wall -Wno-unused-parameter -Icompat -Iinclude
BLOCKS_INC     := $(SWIFT_BIN_DIR)/../lib/swift/Block
COMPAT_LIBS     = -L$(BUILD) -lswiftqueues -Wl,-rpath,$(CURDIR)/$(BUILD) \
                  -L$(BLOCKS_LIBDIR) -lBlocksRuntime -Wl,-rpath,$(BLOCKS_LIBDIR) -lm
COMPAT_SYSTEM_DISPATCH := -Wl,--no-as-needed -ldispatch -ldl
# libdispatch's own test programs, unchanged, from a checkout of
# swift-corelibs-libdispatch's tests/ folder named by DISPATCH_TESTS (they
# are not part of this repository): the ones the harness supports.
DISPATCH_TESTS  ?=
COMPAT_UPSTREAM_NAMES := dispatch_after dispatch_api dispatch_apply dispatch_c99 \
                         dispatch_cascade dispatch_data dispatch_debug dispatch_drift \
                         dispatch_group dispatch_io_muxed dispatch_io_net dispatch_io_pipe \
                         dispatch_io_pipe_close dispatch_overcommit dispatch_pingpong \
                         dispatch_plusplus dispatch_priority dispatch_queue_finalizer \
                         dispatch_read dispatch_readsync dispatch_sema dispatch_starfish \
                         dispatch_suspend_timer dispatch_timer dispatch_timer_bit31 \
                         dispatch_timer_bit63 dispatch_timer_set_time dispatch_timer_short \
                         dispatch_timer_timeout dispatch_workqueue
COMPAT_UPSTREAM := $(if $(DISPATCH_TESTS),$(addprefix $(BUILD)/compat/,$(COMPAT_UPSTREAM_NAMES)))
COMPAT_EXAMPLES := $(patsubst $(COMPAT_DIR)/examples/%.c,$(BUILD)/compat/%,\
                     $(wildcard $(COMPAT_DIR)/examples/*.c))
COMPAT_HEADERS  := $(wildcard compat/dispatch/*.h) $(wildcard $(COMPAT_DIR)/harness/*)

# As libdispatch's own test build compiles them: _GNU_SOURCE (its config
# header), LENIENT_DEADLINES (its Swift CI setting), -lm for a few.
COMPAT_UPSTREAM_FLAGS := -D_GNU_SOURCE -DLENIENT_DEADLINES=1 -Wno-deprecated-declarations \
                         -I$(COMPAT_DIR)/harness -I$(BLOCKS_INC)
$(BUILD)/compat/dispatch_%: $(DISPATCH_TESTS)/dispatch_%.c $(COMPAT_HEADERS) \
                            $(HEADERS) $(BUILD)/libswiftqueues.so
	@mkdir -p $(dir $@)
	$(BLOCKS_CC) -fblocks $(COMPAT_CFLAGS) $(if $(filter dispatch_c99,$(notdir $@)),-std=gnu99) \
	  $(COMPAT_UPSTREAM_FLAGS) -o $@ $< $(COMPAT_DIR)/harness/harness.c $(COMPAT_LIBS)

# dispatch_plusplus.cpp: the headers from C++ (clang++ -fblocks).
$(BUILD)/compat/dispatch_%: $(DISPATCH_TESTS)/dispatch_%.cpp $(COMPAT_HEADERS) \
                            $(HEADERS) $(BUILD)/libswiftqueues.so
	@mkdir -p $(dir $@)
	$(BLOCKS_CC)++ -fblocks -O2 -g -pthread -Wall -Icompat -Iinclude $(COMPAT_UPSTREAM_FLAGS) \
	  -o $@ $< -x c $(COMPAT_DIR)/harness/harness.c $(COMPAT_LIBS)

$(BUILD)/compat/%: $(COMPAT_DIR)/examples/%.c $(COMPAT_HEADERS) $(HEADERS) \
                   $(BUILD)/libswiftqueues.so
	@mkdir -p $(dir $@)
	$(if $(filter %_f,$*),$(CC),$(BLOCKS_CC) -fblocks -I$(BLOCKS_INC)) $(COMPAT_CFLAGS) \
	  -Werror -o $@ $< $(COMPAT_LIBS) \
	  $(if $(filter collision,$*),$(COMPAT_SYSTEM_DISPATCH))

test-compat: lib $(COMPAT_UPSTREAM) $(COMPAT_EXAMPLES)
	@SWIFT="$(SWIFT)" BLOCKS_CC="$(BLOCKS_CC)" sh scripts/check-dispatch-names.sh
	@$(if $(DISPATCH_TESTS),,echo "test-compat: DISPATCH_TESTS unset: libdispatch's own tests skipped")
	@sh Tests/CRuntimeTests/run.sh $(COMPAT_UPSTREAM) $(COMPAT_EXAMPLES)

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

# The man pages: Doxygen writes them (doxygen), groff renders them
# (groff-base), man reads the installed ones (man-db); each is installed
# when missing.
man-deps:
	@for tool in doxygen:doxygen groff:groff-base man:man-db; do \
	  command -v $${tool%%:*} >/dev/null 2>&1 && continue; \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	  echo "the man pages need $${tool%%:*}; running:"; \
	  echo "  $$sudo apt-get install -y $${tool#*:}"; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $${tool#*:}; \
	done

test-man: man-deps
	@CC="$(CC)" DOCS=$(BUILD)/docs sh scripts/check-man.sh

# The reference docs. The C API's by Doxygen (Doxyfile): HTML in
# $(BUILD)/docs/c-html, man pages in $(BUILD)/docs/man/man3; it fails on a
# public name without a comment. The Swift module's by DocC
# (scripts/swift-docs.sh): `swift build`, then the toolchain's
# swift-symbolgraph-extract writes the module's symbol graph and
# `docc convert` turns it into a static site in $(BUILD)/docs/swift
# (index.html); no plugin, no Package.swift change.
docs: docs-c docs-swift

docs-c: man-deps
	@rm -rf $(BUILD)/docs/man $(BUILD)/docs/c-html
	@mkdir -p $(BUILD)/docs
	DOCS_DIR=$(CURDIR)/$(BUILD)/docs doxygen Doxyfile

DOCC ?= $(SWIFT_BIN_DIR)/docc
docs-swift: deps
	sh scripts/swift-docs.sh "$(SWIFT)" "$(DOCC)" $(BUILD)/docs/swift

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
# timer source, an after, the main queue), checked, in $(BUILD)/; and one
# of the stall example (a timer handler holding a serial queue that
# requests sq_sync onto), checked and summed up by sq-trace-report.
trace-demo: lib
	@mkdir -p $(BUILD)/examples
	$(CC) $(CFLAGS_ALL) -o $(BUILD)/examples/pipeline Examples/c/pipeline.c \
	  $(STATIC) $(LDFLAGS_ALL) $(DEPS_LIBS)
	SQ_TRACE=$(BUILD)/trace-demo.json $(BUILD)/examples/pipeline
	python3 scripts/check-trace.py $(BUILD)/trace-demo.json \
	  --expect-thread "main thread" --expect-thread sq.worker \
	  --expect-thread sq.manager --expect-thread sq.io
	$(CC) $(CFLAGS_ALL) -o $(BUILD)/examples/stall Examples/c/stall.c \
	  $(STATIC) $(LDFLAGS_ALL) $(DEPS_LIBS)
	SQ_TRACE=$(BUILD)/trace-stall.json $(BUILD)/examples/stall
	python3 scripts/check-trace.py $(BUILD)/trace-stall.json \
	  --expect-thread "main thread" --expect-thread sq.worker
	python3 scripts/sq-trace-report --top 3 $(BUILD)/trace-stall.json
	@echo "Open $(BUILD)/trace-demo.json or $(BUILD)/trace-stall.json in Perfetto UI"
	@echo "(ui.perfetto.dev: Open trace file) or chrome://tracing (Load);"
	@echo "docs/OBSERVABILITY.md tells how to read them."

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
