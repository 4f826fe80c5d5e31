/* libFuzzer harness: /app-relative path rules (policy/pathrules.c).
 *
 * ipb_check_relpath() gets the input with its explicit length, in an exact-size heap buffer that
 * is NOT NUL-terminated (JSON strings may carry embedded NULs; callers pass the length), with an
 * error out-parameter so the messages are built too. Invariants when it accepts: not empty, no
 * NUL, not absolute, at most IPB_RELPATH_MAX bytes, no ".." component, no component over 255
 * bytes, and at least one component other than "" and ".". It must also accept every such path.
 *
 * ipb_path_is_under() is compared with a reference on two NUL-separated strings from the input.
 *
 * FUZZ_SOURCES: policy/pathrules.c common/error.c common/nofile.c
 * FUZZ_PKGS:
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathrules.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_relpath: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* The documented rule, written independently. */
static bool ref_relpath_ok(const uint8_t *p, size_t len) {
    if (len == 0 || len > IPB_RELPATH_MAX || memchr(p, 0, len) || p[0] == '/')
        return false;
    size_t real = 0, start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && p[i] != '/')
            continue;
        size_t cl = i - start;
        const uint8_t *c = p + start;
        if (cl == 2 && c[0] == '.' && c[1] == '.')
            return false;
        if (cl > 255)
            return false;
        if (cl && !(cl == 1 && c[0] == '.'))
            real++;
        start = i + 1;
    }
    return real > 0;
}

static bool ref_is_under(const char *path, const char *dir) {
    if (!strcmp(dir, "/"))
        return path[0] == '/';
    size_t dl = strlen(dir);
    return !strncmp(path, dir, dl) && (path[dl] == '\0' || path[dl] == '/');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    ipb_error *err = NULL;
    int r = ipb_check_relpath(p, size, &err);
    bool want = ref_relpath_ok(data, size);
    if (r == 0) {
        CHECK(!err);
        /* The security properties, spelled out on their own. */
        CHECK(size > 0 && p[0] != '/' && !memchr(p, 0, size));
        for (size_t i = 0; i + 1 < size; i++)
            if (p[i] == '.' && p[i + 1] == '.')
                CHECK(!((i == 0 || p[i - 1] == '/') && (i + 2 == size || p[i + 2] == '/')));
    } else {
        CHECK(err && err->msg);
    }
    CHECK((r == 0) == want);
    ipb_error_free(err);
    /* Same check without an error out-parameter. */
    CHECK((ipb_check_relpath(p, size, NULL) == 0) == want);
    free(p);

    const uint8_t *nul = memchr(data, 0, size);
    if (nul) {
        char *path = strndup((const char *)data, (size_t)(nul - data));
        char *dir = strndup((const char *)nul + 1, size - (size_t)(nul - data) - 1);
        if (path && dir && dir[0] == '/')
            CHECK(ipb_path_is_under(path, dir) == ref_is_under(path, dir));
        free(path);
        free(dir);
    }
    return 0;
}
