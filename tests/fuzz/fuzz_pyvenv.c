/* libFuzzer harness: a venv's pyvenv.cfg and the --python prefix rules (policy/pyenv.c).
 *
 * - ipb_pyvenv_home() on the whole input (an exact-size copy, not NUL-terminated): either an
 *   error with a message, or a home that is a plain absolute path (no '.', '..', '//', control
 *   characters, trailing '/') and that occurs in the input, and no NUL was in the input.
 * - Each line (NUL also ends a line) as a path: ipb_python_prefix_of() gives a prefix of it;
 *   ipb_python_place_conflict() agrees with ipb_path_within_tree() in both directions.
 *
 * FUZZ_SOURCES: policy/pyenv.c common/error.c common/nofile.c
 * FUZZ_PKGS:
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyenv.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_pyvenv: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                    \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static void check_home(const char *h) {
    size_t n = strlen(h);
    CHECK(n > 0 && h[0] == '/' && n < 4096);
    CHECK(n == 1 || h[n - 1] != '/');
    CHECK(!strstr(h, "//") && !strstr(h, "/./") && !strstr(h, "/../"));
    CHECK(!(n >= 2 && !strcmp(h + n - 2, "/.")) && !(n >= 3 && !strcmp(h + n - 3, "/..")));
    for (const char *c = h; *c; c++)
        CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
}

static void check_path(const char *p) {
    char *pre = ipb_python_prefix_of(p);
    if (!pre)
        return;
    CHECK(strlen(pre) <= strlen(p) || !strcmp(pre, "/"));
    if (p[0] == '/')
        CHECK(!strncmp(pre, p, strlen(pre)) || !strcmp(pre, "/"));
    bool inside = false;
    const char *place = ipb_python_place_conflict(pre, &inside);
    if (place && strcmp(place, "/"))
        CHECK(inside ? ipb_path_within_tree(pre, place) : ipb_path_within_tree(place, pre));
    if (!place && pre[0] == '/')
        CHECK(strcmp(pre, "/") && !ipb_path_within_tree(pre, "/tmp") && !ipb_path_within_tree("/app", pre));
    (void)ipb_python_in_system_dirs(pre);
    free(pre);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    char *home = NULL;
    ipb_error *err = NULL;
    int r = ipb_pyvenv_home(copy, size, "pyvenv.cfg", &home, &err);
    if (r == 0) {
        CHECK(!err && home);
        CHECK(!memchr(data, '\0', size));
        check_home(home);
        CHECK(memmem(data, size, home, strlen(home)) != NULL);
    } else {
        CHECK(err && err->msg && !home);
    }
    free(home);
    ipb_error_free(err);
    free(copy);

    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || data[i] == '\n' || data[i] == '\0') {
            char *line = strndup((const char *)data + start, i - start);
            if (!line)
                return 0;
            check_path(line);
            free(line);
            start = i + 1;
        }
    }
    return 0;
}
