/* The sniffer's checks, shared by test_sniff.c and test_sniff_http.c: every input is copied into
 * a heap buffer of exactly its size, so a sanitizer build catches a read past the end. */
#pragma once
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sniff.h"

static inline enum ipb_sniff_kind sniff(const void *p, size_t n, ipb_sniff *o) {
    uint8_t *copy = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, p, n);
    enum ipb_sniff_kind k = ipb_sniff_bytes(copy, n, o);
    free(copy);
    ck_assert_int_eq(o->kind, k);
    if (k == IPB_SNIFF_BAD)
        ck_assert_msg(o->why && o->why[0], "BAD without a why");
    return k;
}

static inline enum ipb_sniff_kind sniff_str(const char *s, ipb_sniff *o) { return sniff(s, strlen(s), o); }
