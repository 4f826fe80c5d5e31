/* libFuzzer harness: the egress notes (proxy/egress_notes.c), which hold names and reasons the
 * sandbox chose, shown to the model.
 *
 * The input is split at its first NUL into a host and a reason; both are noted (as a
 * connection and as a DNS lookup, then once per prefix of the host, so that de-duplication,
 * the cap and the count past it all run). Invariants:
 * - every note's host and reason are printable ASCII (a space only in reasons), bounded,
 *   NUL-terminated within their buffers;
 * - every formatted line, and the "more" line, has no byte below 0x20 nor 0x7f and fits;
 * - at most IPB_EGRESS_NOTES_MAX notes, each counted at least once; a take hands out each
 *   destination once and then nothing.
 *
 * FUZZ_SOURCES: proxy/egress_notes.c
 * FUZZ_PKGS:
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress_notes.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_egress_notes: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);              \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t cap, bool space) {
    size_t n = strnlen(s, cap);
    CHECK(n < cap);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        CHECK((c > ' ' && c < 0x7f) || (space && c == ' '));
    }
}

static void check_line(const char *s) {
    size_t n = strnlen(s, IPB_EGRESS_NOTE_LINE);
    CHECK(n < IPB_EGRESS_NOTE_LINE);
    for (size_t i = 0; i < n; i++)
        CHECK((unsigned char)s[i] >= ' ' && (unsigned char)s[i] != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ipb_egress_notes n, out;
    const char *host = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t hlen = nul ? (size_t)(nul - data) : size;
    char why[IPB_EGRESS_NOTE_WHY * 2];
    size_t wlen = nul ? size - hlen - 1 : 0;
    if (wlen >= sizeof(why))
        wlen = sizeof(why) - 1;
    if (wlen)
        memcpy(why, nul + 1, wlen);
    why[wlen] = '\0';
    ipb_egress_notes_clear(&n);
    ipb_egress_notes_add(&n, host, hlen, false, 443, why);
    ipb_egress_notes_add(&n, host, hlen, true, 0, why);
    ipb_egress_notes_add(&n, host, hlen, false, 443, why);
    for (size_t k = 1; k <= hlen && k < 400; k++)
        ipb_egress_notes_add(&n, host, k, false, (uint16_t)k, why);
    CHECK(n.n <= IPB_EGRESS_NOTES_MAX && n.nseen <= IPB_EGRESS_NOTES_SEEN);
    char line[IPB_EGRESS_NOTE_LINE];
    for (size_t i = 0; i < n.n; i++) {
        const ipb_egress_note *e = &n.list[i];
        check_text(e->host, sizeof(e->host), false);
        check_text(e->why, sizeof(e->why), true);
        CHECK(e->count >= 1);
        ipb_egress_note_line(e, line, sizeof(line));
        check_line(line);
    }
    ipb_egress_notes_more_line(&n, line, sizeof(line));
    check_line(line);
    size_t listed = n.n;
    ipb_egress_notes_take(&n, &out);
    CHECK(out.n == listed);
    ipb_egress_notes_take(&n, &out);
    CHECK(!ipb_egress_notes_any(&out));
    return 0;
}
