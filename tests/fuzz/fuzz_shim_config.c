/* libFuzzer harness: the sandbox configuration the shim decodes (kernel-shim/shim_config.c).
 *
 * shim_config_decode() on arbitrary bytes (an exact-size heap copy). When it accepts, the result
 * must satisfy what the shim relies on (mode, absolute root, argv, BPF length, absolute mount
 * destinations, no NULs), and encode -> decode -> encode must reproduce the same bytes.
 *
 * FUZZ_SOURCES: kernel-shim/shim_config.c policy/mountplan.c policy/options.c policy/wsname.c policy/egress.c policy/pathrules.c common/fdio.c common/record.c common/strbuf.c common/error.c common/nofile.c
 * FUZZ_PKGS:
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_proto.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_shim_config: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);               \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static void check_config(const shim_config *c) {
    CHECK(c->mode == SHIM_MODE_KERNEL || c->mode == SHIM_MODE_RUN);
    CHECK(c->root && c->root[0] == '/');
    CHECK(c->argv.n > 0 && c->argv.v && c->argv.v[c->argv.n] == NULL);
    for (size_t i = 0; i < c->argv.n; i++)
        CHECK(c->argv.v[i]);
    CHECK(c->env.n == 0 || (c->env.v && c->env.v[c->env.n] == NULL));
    for (size_t i = 0; i < c->env.n; i++)
        CHECK(c->env.v[i]);
    CHECK(c->bpf && c->bpf_len > 0 && c->bpf_len % 8 == 0);
    for (size_t i = 0; i < c->plan.n; i++) {
        const ipb_mount *m = &c->plan.m[i];
        CHECK(m->kind >= IPB_MNT_BIND_RO && m->kind <= IPB_MNT_DEVPTS);
        CHECK(m->dst && m->dst[0] == '/');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    shim_config c;
    memset(&c, 0xa5, sizeof(c)); /* decode must not rely on the caller zeroing *ret */
    ipb_error *err = NULL;
    int r = shim_config_decode(copy, size, &c, &err);
    free(copy);
    if (r < 0) {
        CHECK(err && err->msg);
        ipb_error_free(err);
        return 0;
    }
    CHECK(r == 0 && !err);
    check_config(&c);

    ipb_buf b1 = {0}, b2 = {0};
    CHECK(shim_config_encode(&c, &b1) == 0);
    shim_config d;
    memset(&d, 0, sizeof(d));
    CHECK(shim_config_decode(b1.data, b1.len, &d, &err) == 0);
    check_config(&d);
    CHECK(d.mode == c.mode && d.uid == c.uid && d.gid == c.gid);
    CHECK(d.argv.n == c.argv.n && d.env.n == c.env.n && d.plan.n == c.plan.n && d.bpf_len == c.bpf_len);
    CHECK(!memcmp(d.bpf, c.bpf, c.bpf_len));
    CHECK(shim_config_encode(&d, &b2) == 0);
    CHECK(b1.len == b2.len && !memcmp(b1.data, b2.data, b1.len));
    ipb_buf_free(&b1);
    ipb_buf_free(&b2);
    shim_config_free(&d);
    shim_config_free(&c);
    return 0;
}
