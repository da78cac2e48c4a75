# The C core: build/libtn.a (position independent, linked into the Python extension) and the
# C unit tests, which run under AddressSanitizer and UBSan.
#
#   make            build/libtn.a
#   make test-c     build and run tests/c under ASan + UBSan
#   make check-headers   every public header compiles alone as C11 -pedantic -Werror
#
# ISA-specific flags, when kernels need them, go on individual kernel files, never globally
# (no -march=native): the library must run on any x86-64 machine.

CC ?= cc
CFLAGS_COMMON := -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -Wall -Wextra -Wpedantic \
                 -Wshadow -Wstrict-prototypes -fPIC -pthread
CFLAGS_REL := $(CFLAGS_COMMON) -O2 -g
CFLAGS_SAN := $(CFLAGS_COMMON) -O1 -g -fno-omit-frame-pointer \
              -fsanitize=address,undefined -fno-sanitize-recover=undefined

SRCS := $(wildcard src/runtime/*.c src/kernels/*.c)
TEST_SRCS := $(wildcard tests/c/*.c)
HEADERS := $(wildcard include/tn/*.h)

OBJS := $(SRCS:%.c=build/rel/%.o)
SAN_OBJS := $(SRCS:%.c=build/san/%.o)
TEST_BIN := build/san/tn_tests

.PHONY: all test-c check-headers clean
all: build/libtn.a

build/libtn.a: $(OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

build/rel/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_REL) -MMD -MP -c $< -o $@

build/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_SAN) -Isrc -MMD -MP -c $< -o $@

$(TEST_BIN): $(SAN_OBJS) $(TEST_SRCS:%.c=build/san/%.o)
	$(CC) $(CFLAGS_SAN) $^ -o $@ -lm

test-c: $(TEST_BIN) check-headers
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $(TEST_BIN)

check-headers:
	@for h in $(HEADERS); do \
	  echo "#include \"$${h#include/}\"" | \
	    $(CC) -std=c11 -pedantic -Werror -Wall -Wextra -Iinclude -x c -fsyntax-only - \
	    || { echo "header $$h does not compile alone as C11"; exit 1; }; \
	done; echo "headers: $(words $(HEADERS)) compile alone as C11 -pedantic -Werror"

clean:
	rm -rf build/rel build/san build/libtn.a

-include $(OBJS:.o=.d) $(SAN_OBJS:.o=.d)
