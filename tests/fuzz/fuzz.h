/*
 * fuzz.h - what every fuzz target shares: libFuzzer's entry point, and
 * CHECK(), which aborts with the failed condition (libFuzzer and
 * tests/fuzz/replay.c both report an abort as a finding).
 */
#ifndef RMEM_FUZZ_H
#define RMEM_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,       \
				__LINE__, #cond);                                    \
			abort();                                                     \
		}                                                                    \
	} while (0)

#endif /* RMEM_FUZZ_H */
