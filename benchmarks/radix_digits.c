/* radix_digits.c: a measuring aid, not part of the package.
 *
 * Times the package's radix sort kernel (csrc/coverage_kernels.h, mr_radix_sort_digits) on
 * (key, index) records with 8-bit digits (eight passes at most) against 11-bit digits (six),
 * the choice mr_radix_sort makes at MR_RADIX_WIDE_MIN records. Three kinds of keys, as the
 * package's sorts see them: random 64-bit words (fragment hashes: tbl_first_duplicate), eight
 * lowercase hex characters as a big-endian word (the head of a "sha256:..." id: strkey_sort),
 * and 20-bit integers (positions, ranks). Each size prints the best of seven runs of each width
 * (alternating, on the same input) and their ratio; both orders must agree record for record.
 *
 *     gcc -O2 -fwrapv -I csrc -o /tmp/radix_digits benchmarks/radix_digits.c
 *     /tmp/radix_digits [records ...]        # default: 256 2048 16384 140000 562000 1000000
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coverage_kernels.h"

static uint64_t rng_state = 88172645463325252ull;

static uint64_t
next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint64_t
key_of_kind(int kind)
{
    uint64_t k = next_random();
    if (kind == 1) { /* eight lowercase hex characters, the first the most significant byte */
        uint64_t word = 0;
        for (int j = 0; j < 8; j++) {
            unsigned v = (unsigned)(k >> (4 * j)) & 15u;
            word = (word << 8) | (v < 10 ? '0' + v : 'a' + v - 10);
        }
        return word;
    }
    return kind == 2 ? k & 0xFFFFF : k;
}

static double
now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int
measure(size_t n, int kind)
{
    mr_kv *input = malloc(n * sizeof(mr_kv)), *work = malloc(n * sizeof(mr_kv)), *narrow = malloc(n * sizeof(mr_kv));
    if (input == NULL || work == NULL || narrow == NULL) return -1;
    for (size_t i = 0; i < n; i++) {
        input[i].key = key_of_kind(kind);
        input[i].idx = i;
    }
    double best[2] = {1e30, 1e30};
    for (int round = 0; round < 7; round++) {
        for (int wide = 0; wide < 2; wide++) {
            memcpy(work, input, n * sizeof(mr_kv));
            double started = now();
            int rc = wide ? mr_radix_sort_digits(work, n, 11, 6) : mr_radix_sort_digits(work, n, 8, 8);
            double elapsed = now() - started;
            if (rc != 0) return -1;
            if (elapsed < best[wide]) best[wide] = elapsed;
            if (!wide) memcpy(narrow, work, n * sizeof(mr_kv));
            else if (memcmp(narrow, work, n * sizeof(mr_kv)) != 0) {
                fprintf(stderr, "the two widths disagree at %zu records\n", n);
                return -1;
            }
        }
    }
    static const char *const kinds[3] = {"random 64-bit", "8 hex chars", "20-bit ints"};
    printf("%9zu records  %-13s  8-bit %9.3f ms  11-bit %9.3f ms  11/8 %.3f\n", n, kinds[kind], best[0] * 1e3,
           best[1] * 1e3, best[1] / best[0]);
    free(input);
    free(work);
    free(narrow);
    return 0;
}

int
main(int argc, char **argv)
{
    static const size_t sizes[] = {256, 2048, 16384, 140000, 562000, 1000000};
    size_t count = argc > 1 ? (size_t)(argc - 1) : sizeof sizes / sizeof sizes[0];
    for (size_t s = 0; s < count; s++) {
        size_t n = argc > 1 ? strtoul(argv[s + 1], NULL, 10) : sizes[s];
        if (n < 2) continue;
        for (int kind = 0; kind < 3; kind++)
            if (measure(n, kind) < 0) return 1;
    }
    return 0;
}
