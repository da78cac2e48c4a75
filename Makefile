# The C core: build/libtn.a (position independent, linked into the Python extension) and the
# C unit tests, which run under AddressSanitizer and UBSan.
#
#   make            build/libtn.a
#   make test-c     build and run tests/c under ASan + UBSan
#   make check-headers   every public header compiles alone as C11 -pedantic -Werror
#   make check-kernel-loops   no GEMM micro-kernel's FMA loop goes through the stack, and no
#                             element function of the row kernels is left out of line
#
# ISA-specific flags go on individual kernel files (ISA_FLAGS_* below), never globally (no
# -march=native): the library runs on any x86-64 machine and picks its variant at run time.

MAKEFLAGS += --no-builtin-rules
.SUFFIXES:

CC ?= cc
CFLAGS_COMMON := -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -Ibuild/gen -Wall -Wextra -Wpedantic \
                 -Wshadow -Wstrict-prototypes -Werror -fPIC -pthread
CFLAGS_REL := $(CFLAGS_COMMON) -O3 -g
CFLAGS_SAN := $(CFLAGS_COMMON) -O1 -g -fno-omit-frame-pointer \
              -fsanitize=address,undefined -fno-sanitize-recover=undefined

# src/kernels/rows.c, reduce_rows.c, random_rows.c, gemm_ukernel.c, attention.c and
# attention_backward.c are built once per ISA with that ISA's flags (and only there).
ISA_FLAGS_ref :=
ISA_FLAGS_avx2 := -mavx2 -mfma -mf16c
ISA_FLAGS_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c
ISAS := ref avx2 avx512

PER_ISA := rows reduce_rows random_rows gemm_ukernel attention attention_backward channel_norm_rows
# Built once, for CPUs with AVX512-BF16 (installed only when CPUID reports it).
ISA_FLAGS_avx512bf16 := $(ISA_FLAGS_avx512) -mavx512bf16
BF16_ONLY := gemm_bf16
# Built once, for CPUs with AMX (installed only when CPUID reports it and Linux grants it).
ISA_FLAGS_amx := $(ISA_FLAGS_avx512bf16) -mamx-tile -mamx-bf16
AMX_ONLY := gemm_amx
# The row kernels' math is written as selects; these let the compiler if-convert and inline
# it (x86 floating point does not trap; errno is never read). Not -ffast-math: results keep
# IEEE semantics, NaN and infinities included.
# -Wvector-operation-performance (an error with -Werror) catches a vector type wider than the
# ISA, which GCC splits through the stack: tn_v16 on AVX2 once did, at a seventh of the speed.
ROW_FLAGS := -fno-trapping-math -fno-math-errno -Wvector-operation-performance
# The runtime's and the graph compiler's launch sites build task arguments on the stack:
# zeroing automatic variables zeroes their padding too, so that a recording (capture.c) can
# read every aligned word of them as a possible address without stale bytes faking one. A
# compiler without the option builds without it, and recordings are then not relocated.
ZERO_INIT := $(shell $(CC) -ftrivial-auto-var-init=zero -Werror -x c -c /dev/null -o /dev/null 2>/dev/null \
               && echo -ftrivial-auto-var-init=zero -DTN_TASKS_ZEROED=1)
build/rel/src/runtime/%.o build/san/src/runtime/%.o build/rel/src/graph/%.o build/san/src/graph/%.o: \
  TASK_FLAGS := $(ZERO_INIT)
SRCS := $(filter-out $(PER_ISA:%=src/kernels/%.c) $(BF16_ONLY:%=src/kernels/%.c) $(AMX_ONLY:%=src/kernels/%.c),\
          $(wildcard src/runtime/*.c src/kernels/*.c src/graph/*.c src/ccl/*.c))
ISA_OBJS = $(foreach f,$(PER_ISA),$(ISAS:%=$(1)/src/kernels/$(f)_%.o)) \
           $(BF16_ONLY:%=$(1)/src/kernels/%_avx512bf16.o) $(AMX_ONLY:%=$(1)/src/kernels/%_amx.o)
TEST_SRCS := $(wildcard tests/c/*.c)
HEADERS := $(wildcard include/tn/*.h)

OBJS := $(SRCS:%.c=build/rel/%.o) $(call ISA_OBJS,build/rel)
SAN_OBJS := $(SRCS:%.c=build/san/%.o) $(call ISA_OBJS,build/san)
TEST_BIN := build/san/tn_tests

.PHONY: all test-c check-headers check-kernel-loops clean
all: build/libtn.a

# Rebuilt from scratch: `ar r` never drops members whose source file was removed.
build/libtn.a: $(OBJS)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

build/rel/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_REL) $(TASK_FLAGS) -MMD -MP -c $< -o $@

# One object per (file, ISA): build/<mode>/src/kernels/<file>_<isa>.o from src/kernels/<file>.c
define per_isa_rule
build/rel/src/kernels/$(1)_$(2).o: src/kernels/$(1).c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_REL) $$(ROW_FLAGS) $$(ISA_FLAGS_$(2)) -DTN_ROWS_ISA=$(2) -MMD -MP -c $$< -o $$@
build/san/src/kernels/$(1)_$(2).o: src/kernels/$(1).c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_SAN) $$(ROW_FLAGS) $$(ISA_FLAGS_$(2)) -DTN_ROWS_ISA=$(2) -MMD -MP -c $$< -o $$@
endef
$(foreach f,$(PER_ISA),$(foreach i,$(ISAS),$(eval $(call per_isa_rule,$(f),$(i)))))
$(foreach f,$(BF16_ONLY),$(eval $(call per_isa_rule,$(f),avx512bf16)))
$(foreach f,$(AMX_ONLY),$(eval $(call per_isa_rule,$(f),amx)))

# The graph compiler's generated kernels carry the kernels' own float math and bf16/f16
# conversions (so a fused region rounds and vectorizes as the eager rows do): their text,
# as a C string, minus the local includes.
GEN_MATH := build/gen/kernel_math.inc
$(GEN_MATH): src/kernels/half.h src/kernels/math_f32.h
	@mkdir -p $(dir $@)
	sed -e '/^#include "/d' -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n",/' $^ > $@
build/rel/src/graph/codegen.o build/san/src/graph/codegen.o: $(GEN_MATH)

build/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_SAN) $(TASK_FLAGS) -Isrc -MMD -MP -c $< -o $@

$(TEST_BIN): $(SAN_OBJS) $(TEST_SRCS:%.c=build/san/%.o)
	$(CC) $(CFLAGS_SAN) $^ -o $@ -lm -Wl,--build-id=sha1

test-c: $(TEST_BIN) check-headers check-kernel-loops
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $(TEST_BIN)

check-headers:
	@for h in $(HEADERS); do \
	  echo "#include \"$${h#include/}\"" | \
	    $(CC) -std=c11 -pedantic -Werror -Wall -Wextra -Iinclude -x c -fsyntax-only - \
	    || { echo "header $$h does not compile alone as C11"; exit 1; }; \
	done; echo "headers: $(words $(HEADERS)) compile alone as C11 -pedantic -Werror"

# The release build's micro-kernels: their FMA loops keep every value in registers (GCC can
# spill accumulators without a warning; see docs/kernels.md).
UKERNEL_OBJS := $(ISAS:%=build/rel/src/kernels/gemm_ukernel_%.o) $(BF16_ONLY:%=build/rel/src/kernels/%_avx512bf16.o)
ROW_OBJS := $(foreach f,rows random_rows reduce_rows attention attention_backward,$(ISAS:%=build/rel/src/kernels/$(f)_%.o))
check-kernel-loops: $(UKERNEL_OBJS) $(ROW_OBJS)
	python3 scripts/check_kernel_loops.py $(UKERNEL_OBJS)
	python3 scripts/check_inlined_rows.py src/kernels/math_f32.h src/kernels/rows_f32.h -- $(ROW_OBJS)

clean:
	rm -rf build/rel build/san build/gen build/libtn.a

-include $(OBJS:.o=.d) $(SAN_OBJS:.o=.d) $(TEST_SRCS:%.c=build/san/%.d)
