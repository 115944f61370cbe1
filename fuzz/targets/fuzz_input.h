/* Byte reader shared by the libFuzzer targets: every read succeeds (zeros once the input is
 * exhausted), so each input decodes to exactly one test case. */
#ifndef MR_FUZZ_INPUT_H
#define MR_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *data;
    size_t size;
    size_t pos;
} fz_in;

static uint8_t
fz_u8(fz_in *in)
{
    return in->pos < in->size ? in->data[in->pos++] : 0;
}

static uint64_t
fz_u64(fz_in *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | fz_u8(in);
    return v;
}

/* A value in [0, n) (n >= 1). */
static uint64_t
fz_below(fz_in *in, uint64_t n)
{
    return n <= 256 ? fz_u8(in) % n : fz_u64(in) % n;
}

/* A signed coordinate in [lo, hi]: mostly small, sometimes near the edges of the range. */
static int64_t
fz_coord(fz_in *in, int64_t lo, int64_t hi)
{
    uint8_t mode = fz_u8(in);
    uint64_t span = (uint64_t)hi - (uint64_t)lo;
    uint64_t pick;
    if (mode < 200) pick = fz_u8(in) % 16;                 /* small */
    else if (mode < 230) pick = span - (fz_u8(in) % 16);    /* near the top */
    else pick = fz_u64(in);                                 /* anywhere */
    if (span != UINT64_MAX) pick %= span + 1;
    return (int64_t)((uint64_t)lo + pick);
}

#define FZ_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FUZZ CHECK FAILED %s:%d: %s\n  ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
