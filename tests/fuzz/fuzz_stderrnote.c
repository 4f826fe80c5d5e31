/* libFuzzer harness: what of a kernel's stderr tail is quoted (supervisor/stderrnote.c).
 *
 * Input: byte 0 = the output size (1..256) and byte 1 = the line or note count (0..15), the
 * rest = the tail (an exact-size copy, not NUL-terminated).
 *
 * Invariants, for both: the length returned is below the size given and is the output's
 * strlen, and the output is valid UTF-8 (jansson takes it: it goes into JSON).
 *  - ipb_stderr_relevant(): whole lines, each ending in '\n', at most the count of them, each as
 *    long as a line of the tail, and found in it as it is when no byte was replaced;
 *  - ipb_stderr_start_notes(): no control character; nothing without the mark in the tail or
 *    with a count of 0; with a count of 1 and no byte replaced, the note is the tail's own text.
 *
 * FUZZ_SOURCES: supervisor/stderrnote.c supervisor/jsonfast.c common/strbuf.c
 * FUZZ_PKGS: jansson
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "stderrnote.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_stderrnote: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    size_t osize = (size_t)data[0] + 1;
    int count = data[1] & 15;
    size_t len = size - 2;
    char *tail = malloc(len ? len : 1);
    char *out = malloc(osize);
    if (!tail || !out) {
        free(tail);
        free(out);
        return 0;
    }
    memcpy(tail, data + 2, len);

    size_t n = ipb_stderr_relevant(tail, len, count, out, osize);
    CHECK(n < osize && n == strlen(out));
    json_t *j = json_stringn(out, n);
    CHECK(j != NULL);
    json_decref(j);
    int lines = 0;
    for (size_t at = 0; at < n;) {
        const char *nl = memchr(out + at, '\n', n - at);
        CHECK(nl);
        size_t ll = (size_t)(nl - (out + at));
        CHECK(ll > 0);
        if (!memchr(out + at, '?', ll))
            CHECK(memmem(tail, len, out + at, ll) != NULL);
        lines++;
        at += ll + 1;
    }
    CHECK(lines <= count);

    n = ipb_stderr_start_notes(tail, len, count, out, osize);
    CHECK(n < osize && n == strlen(out));
    j = json_stringn(out, n);
    CHECK(j != NULL);
    json_decref(j);
    for (size_t i = 0; i < n; i++)
        CHECK((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
    if (n) {
        CHECK(count > 0);
        CHECK(memmem(tail, len, IPB_START_NOTE_MARK, strlen(IPB_START_NOTE_MARK)) != NULL);
        /* A single note with no replaced byte is the tail's own text. */
        if (count == 1 && !memchr(out, '?', n))
            CHECK(memmem(tail, len, out, n) != NULL);
    }
    free(tail);
    free(out);
    return 0;
}
