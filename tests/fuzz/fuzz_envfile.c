/* libFuzzer harness: env files, KEY=VALUE assignments and sizes (policy/options.c).
 *
 * - ipb_parse_env_file() on the whole input (an exact-size copy, not NUL-terminated); every
 *   variable it accepts must itself pass ipb_check_env_assignment() and hold no newline.
 * - ipb_check_env_assignment() on each line, compared with a reference of the documented rule
 *   (KEY is [A-Za-z_][A-Za-z0-9_]*, not JPY_PARENT_PID).
 * - ipb_parse_size() on each line, compared with a reference of the documented grammar
 *   (digits, optional k/m/g in either case, after which an optional i, B or iB; overflow is an
 *   error).
 *
 * FUZZ_SOURCES: policy/options.c policy/wsname.c policy/egress.c policy/pathrules.c common/fdio.c common/strbuf.c common/error.c common/nofile.c
 * FUZZ_PKGS:
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_envfile: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static bool ref_assignment_ok(const char *kv) {
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return false;
    if (!(isalpha((unsigned char)kv[0]) || kv[0] == '_'))
        return false;
    for (const char *p = kv + 1; p < eq; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_'))
            return false;
    return !((size_t)(eq - kv) == 14 && !strncmp(kv, "JPY_PARENT_PID", 14));
}

/* 1: ok with *ret; 0: malformed; -1: overflow. */
static int ref_size(const char *s, uint64_t *ret) {
    uint64_t v = 0;
    bool over = false;
    const char *p = s;
    if (!isdigit((unsigned char)*p))
        return 0;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            over = true;
        else
            v = v * 10 + d;
        p++;
    }
    unsigned shift = 0;
    switch (*p) {
    case 'k':
    case 'K':
        shift = 10;
        p++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        p++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        p++;
        break;
    default:
        break;
    }
    if (shift && *p == 'i') {
        p++;
        if (*p == 'B' || *p == 'b')
            p++;
    } else if (shift && (*p == 'B' || *p == 'b')) {
        p++;
    }
    if (*p)
        return 0;
    if (over || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *ret = v << shift;
    return 1;
}

static void check_line(const char *line) {
    ipb_error *err = NULL;
    int r = ipb_check_env_assignment(line, &err);
    CHECK((r == 0) == ref_assignment_ok(line));
    CHECK(r == 0 ? !err : err && err->msg);
    ipb_error_free(err);

    uint64_t got = 0xdeadbeef, want = 0;
    r = ipb_parse_size(line, &got);
    int ref = ref_size(line, &want);
    if (ref == 1)
        CHECK(r == 0 && got == want);
    else
        CHECK(r < 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    ipb_strv env = {0};
    ipb_error *err = NULL;
    int r = ipb_parse_env_file(copy, size, "fuzz.env", &env, &err);
    free(copy);
    if (r < 0)
        CHECK(err && err->msg);
    else
        CHECK(!err);
    ipb_error_free(err);
    for (size_t i = 0; i < env.n; i++) {
        ipb_error *e = NULL;
        CHECK(env.v[i] && !strchr(env.v[i], '\n'));
        CHECK(ipb_check_env_assignment(env.v[i], &e) == 0);
        CHECK(!e);
    }
    CHECK(env.n == 0 || env.v[env.n] == NULL);
    ipb_strv_free(&env);

    /* Each line (NUL also ends a line) through the single-value parsers. */
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || data[i] == '\n' || data[i] == '\0') {
            char *line = strndup((const char *)data + start, i - start);
            if (!line)
                return 0;
            check_line(line);
            free(line);
            start = i + 1;
        }
    }
    return 0;
}
