/* libFuzzer harness: command-line options (policy/options.c ipb_options_parse).
 *
 * The input is split on NUL bytes into an argv (at most 64 words, each an exact-size heap copy).
 * --container-env-file never reads a file named by the input: its value (after '=' or the next
 * word) is replaced with /dev/null. Invariants: on failure an error is set; on success *ret_next
 * is in [0, argc], every stored value obeys its option's rule, and ipb_options_finish() and
 * ipb_sandbox_env() work on the result. ipb_options_free() must release partial results too.
 *
 * FUZZ_SOURCES: policy/options.c policy/wsname.c policy/egress.c policy/pathrules.c common/fdio.c common/strbuf.c common/error.c common/nofile.c
 * FUZZ_PKGS:
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "pathrules.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_options: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

#define MAX_ARGS 64
static const char envfile[] = "--container-env-file";

static char *dup_exact(const char *s, size_t n) {
    char *c = malloc(n + 1);
    if (!c)
        abort();
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    size_t start = 0;
    for (size_t i = 0; i <= size && argc < MAX_ARGS; i++) {
        if (i == size || data[i] == 0) {
            argv[argc++] = dup_exact((const char *)data + start, i - start);
            start = i + 1;
        }
    }
    argv[argc] = NULL;
    /* Never read a file named by the input. */
    for (int i = 0; i < argc; i++) {
        size_t el = strlen(envfile);
        if (!strncmp(argv[i], envfile, el) && argv[i][el] == '=') {
            free(argv[i]);
            argv[i] = dup_exact("--container-env-file=/dev/null", strlen("--container-env-file=/dev/null"));
        } else if (!strcmp(argv[i], envfile) && i + 1 < argc) {
            free(argv[++i]);
            argv[i] = dup_exact("/dev/null", strlen("/dev/null"));
        }
    }

    ipb_options o;
    ipb_options_init(&o);
    int next = -7;
    ipb_error *err = NULL;
    int r = ipb_options_parse(&o, argc, argv, &next, &err);
    if (r < 0) {
        CHECK(err && err->msg);
    } else {
        CHECK(r == 0 && !err);
        CHECK(next >= 0 && next <= argc);
        for (size_t i = 0; i < o.allowed_dirs.n; i++)
            CHECK(o.allowed_dirs.v[i][0] == '/');
        for (size_t i = 0; i < o.allowed_domains.n; i++)
            CHECK(o.allowed_domains.v[i][0] != '\0');
        for (size_t i = 0; i < o.env.n; i++)
            CHECK(ipb_check_env_assignment(o.env.v[i], NULL) == 0);
        for (size_t i = 0; i < o.n_binds; i++) {
            CHECK(o.binds[i].host && o.binds[i].host[0] == '/');
            CHECK(o.binds[i].rel && ipb_check_relpath(o.binds[i].rel, strlen(o.binds[i].rel), NULL) == 0);
        }
        CHECK(!o.rootfs || o.rootfs[0] == '/');
        CHECK(!o.workspace || o.workspace[0] == '/');
        CHECK(!o.python || o.python[0] == '/');
        CHECK(!o.container_tag || o.container_tag[0] != '\0');
        CHECK(o.tmp_size >= (1u << 20) && o.shm_size >= (1u << 20));
        CHECK(o.max_output_chars >= 100 && o.max_output_chars <= 10000000);

        CHECK(ipb_options_finish(&o, "/home/fuzz", &err) == 0);
        CHECK(o.python && o.python[0] == '/' && o.allowed_dirs.n > 0);
        ipb_strv env = {0};
        CHECK(ipb_sandbox_env(&o, true, &env, &err) == 0);
        CHECK(env.n > 0 && env.v[env.n] == NULL);
        /* Every key appears once (later entries replace earlier ones). */
        for (size_t i = 0; i < env.n; i++) {
            size_t kl = (size_t)(strchr(env.v[i], '=') - env.v[i]);
            for (size_t j = i + 1; j < env.n; j++)
                CHECK(strncmp(env.v[i], env.v[j], kl + 1) != 0);
        }
        ipb_strv_free(&env);
    }
    ipb_error_free(err);
    ipb_options_free(&o);
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    return 0;
}
