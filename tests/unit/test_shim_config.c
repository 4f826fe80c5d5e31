/* Unit tests for kernel-shim/shim_config.c: the configuration encoding and the fixed-size
 * records on the supervisor <-> shim socket.
 * Tests named fixed_bug_* are regression tests for bugs these suites found. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run_suite.h"
#include "shim_proto.h"

/* Tags as in shim_config.c's encoding comment: {u16 tag, u32 length, payload}. */
enum {
    TAG_MODE = 1,
    TAG_UID,
    TAG_GID,
    TAG_ROOT,
    TAG_HOSTNAME,
    TAG_CWD,
    TAG_MOUNT,
    TAG_ARGV,
    TAG_ENV,
    TAG_BPF,
    TAG_SYSTEM,
    TAG_RLIMITS,
    TAG_ZYGOTE,
    TAG_STANDBY
};

static const uint8_t bpf16[16] = {0x20, 0, 0, 0, 4, 0, 0, 0, 0x06, 0, 0, 0, 0, 0, 0xff, 0x7f};

/* A configuration with every field set; the caller frees it with shim_config_free(). */
static void sample_config(shim_config *c) {
    memset(c, 0, sizeof(*c));
    c->mode = SHIM_MODE_KERNEL;
    c->uid = 1000;
    c->gid = 1001;
    c->root = strdup("/var/lib/ipybox/root");
    c->hostname = strdup("ipybox");
    c->cwd = strdup("/app");
    ck_assert_int_eq(
        ipb_mount_plan_add(&c->plan, IPB_MNT_BIND_RO, IPB_MNT_OPTIONAL | IPB_MNT_MIRROR, "/usr", "/usr", NULL), 0);
    ck_assert_int_eq(ipb_mount_plan_add(&c->plan, IPB_MNT_DIR, 0, NULL, "/etc", NULL), 0);
    ck_assert_int_eq(ipb_mount_plan_add(&c->plan, IPB_MNT_FILE, 0, NULL, "/etc/hostname", "ipybox\n"), 0);
    ck_assert_int_eq(ipb_mount_plan_add(&c->plan, IPB_MNT_TMPFS, 0, NULL, "/tmp", ""), 0); /* empty, not NULL */
    ck_assert_int_eq(ipb_mount_plan_add(&c->plan, IPB_MNT_READONLY, IPB_MNT_OPTIONAL, NULL, "/proc/sys", NULL), 0);
    /* a user-named tree with the identity the shim checks */
    ck_assert_int_eq(
        ipb_mount_plan_add(&c->plan, IPB_MNT_BIND_RW, IPB_MNT_USER | IPB_MNT_SAME, "/home/u/ws", "/app", NULL), 0);
    c->plan.m[c->plan.n - 1].id = (ipb_file_id){0x1122334455667788ull, 0x8877665544332211ull};
    ipb_strv_push(&c->argv, "/usr/bin/python3");
    ipb_strv_push(&c->argv, "-m");
    ipb_strv_push(&c->argv, "");
    ipb_strv_push(&c->env, "A=1");
    ipb_strv_push(&c->env, "B=");
    c->bpf = malloc(sizeof(bpf16));
    memcpy(c->bpf, bpf16, sizeof(bpf16));
    c->bpf_len = sizeof(bpf16);
}

static void encode(const shim_config *c, ipb_buf *out) {
    memset(out, 0, sizeof(*out));
    ck_assert_int_eq(shim_config_encode(c, out), 0);
}

/* Decodes from an exact-size heap copy so that ASan sees any read past the end. */
static int decode(const void *data, size_t len, shim_config *ret, char **msg) {
    void *copy = malloc(len ? len : 1);
    if (len)
        memcpy(copy, data, len);
    ipb_error *err = NULL;
    int r = shim_config_decode(copy, len, ret, &err);
    free(copy);
    ck_assert_msg((r < 0) == (err != NULL), "return value and error disagree");
    if (err) {
        ck_assert_int_eq(err->errnum, EBADMSG);
        ck_assert_ptr_nonnull(strstr(ipb_error_msg(err), "malformed sandbox configuration"));
    }
    if (msg)
        *msg = err ? strdup(ipb_error_msg(err)) : NULL;
    ipb_error_free(err);
    return r;
}

static void expect_refused(const ipb_buf *b, const char *what) {
    shim_config out;
    memset(&out, 0x5a, sizeof(out));
    ck_assert_msg(decode(b->data, b->len, &out, NULL) < 0, "decode accepted %s", what);
    const unsigned char *p = (const unsigned char *)&out;
    for (size_t i = 0; i < sizeof(out); i++)
        ck_assert_msg(p[i] == 0x5a, "decode of %s wrote to *ret on failure", what);
}

static void put_record(ipb_buf *b, uint16_t tag, const void *p, uint32_t len) {
    ipb_buf_append(b, &tag, 2);
    ipb_buf_append(b, &len, 4);
    ipb_buf_append(b, p, len);
}

static void put_u32_record(ipb_buf *b, uint16_t tag, uint32_t v) { put_record(b, tag, &v, 4); }

/* The minimum accepted configuration, written by hand, with `skip` tag left out and `extra`
 * (if not NULL) appended before the BPF record. */
static void minimal_by_hand(ipb_buf *b, int skip, void (*extra)(ipb_buf *)) {
    memset(b, 0, sizeof(*b));
    if (skip != TAG_MODE)
        put_u32_record(b, TAG_MODE, SHIM_MODE_RUN);
    if (skip != TAG_ROOT)
        put_record(b, TAG_ROOT, "/r", 2);
    if (skip != TAG_ARGV)
        put_record(b, TAG_ARGV, "/bin/sh", 7);
    if (extra)
        extra(b);
    if (skip != TAG_BPF)
        put_record(b, TAG_BPF, bpf16, 8);
}

START_TEST(round_trip_all_fields) {
    shim_config in, out;
    sample_config(&in);
    ipb_buf b;
    encode(&in, &b);
    char *msg = NULL;
    ck_assert_msg(decode(b.data, b.len, &out, &msg) == 0, "%s", msg ? msg : "");
    ck_assert_uint_eq(out.mode, SHIM_MODE_KERNEL);
    ck_assert_uint_eq(out.uid, 1000);
    ck_assert_uint_eq(out.gid, 1001);
    ck_assert_str_eq(out.root, in.root);
    ck_assert_str_eq(out.hostname, in.hostname);
    ck_assert_str_eq(out.cwd, in.cwd);
    ck_assert_uint_eq(out.plan.n, in.plan.n);
    for (size_t i = 0; i < in.plan.n; i++) {
        const ipb_mount *a = &in.plan.m[i], *z = &out.plan.m[i];
        ck_assert_uint_eq(z->kind, a->kind);
        ck_assert_uint_eq(z->flags, a->flags);
        ck_assert_uint_eq(z->id.dev, a->id.dev);
        ck_assert_uint_eq(z->id.ino, a->id.ino);
        ck_assert_str_eq(z->dst, a->dst);
        if (a->src)
            ck_assert_str_eq(z->src, a->src);
        else
            ck_assert_ptr_null(z->src);
        if (a->data)
            ck_assert_str_eq(z->data, a->data);
        else
            ck_assert_ptr_null(z->data);
    }
    ck_assert_str_eq(out.plan.m[3].data, ""); /* empty stays distinct from NULL */
    ck_assert_uint_eq(out.argv.n, 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert_str_eq(out.argv.v[i], in.argv.v[i]);
    ck_assert_ptr_null(out.argv.v[3]);
    ck_assert_uint_eq(out.env.n, 2);
    ck_assert_str_eq(out.env.v[0], "A=1");
    ck_assert_str_eq(out.env.v[1], "B=");
    ck_assert_uint_eq(out.bpf_len, sizeof(bpf16));
    ck_assert_int_eq(memcmp(out.bpf, bpf16, sizeof(bpf16)), 0);
    /* encoding the decoded configuration gives the same bytes */
    ipb_buf again;
    encode(&out, &again);
    ck_assert_uint_eq(again.len, b.len);
    ck_assert_int_eq(memcmp(again.data, b.data, b.len), 0);
    ipb_buf_free(&again);
    ipb_buf_free(&b);
    shim_config_free(&in);
    shim_config_free(&out);
    ck_assert_ptr_null(out.root);
    ck_assert_uint_eq(out.plan.n, 0);
}
END_TEST

START_TEST(round_trip_optional_fields_absent) {
    shim_config in, out;
    sample_config(&in);
    free(in.hostname);
    free(in.cwd);
    in.hostname = in.cwd = NULL;
    ipb_mount_plan_free(&in.plan);
    ipb_strv_free(&in.env);
    ipb_buf b;
    encode(&in, &b);
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), 0);
    ck_assert_ptr_null(out.hostname);
    ck_assert_ptr_null(out.cwd);
    ck_assert_uint_eq(out.plan.n, 0);
    ck_assert_uint_eq(out.env.n, 0);
    ck_assert_uint_eq(out.argv.n, 3);
    ipb_buf_free(&b);
    shim_config_free(&in);
    shim_config_free(&out);
}
END_TEST

/* User mode's rlimits travel as one record, absent when both are 0; a record of another size
 * is refused. */
START_TEST(rlimits_round_trip) {
    shim_config in, out;
    sample_config(&in);
    in.nproc_max = 40;
    in.as_max = 512ull << 20;
    ipb_buf b;
    encode(&in, &b);
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), 0);
    ck_assert_uint_eq(out.nproc_max, 40);
    ck_assert_uint_eq(out.as_max, 512ull << 20);
    shim_config_free(&out);
    ipb_buf_free(&b);
    in.nproc_max = in.as_max = 0;
    encode(&in, &b);
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), 0);
    ck_assert_uint_eq(out.nproc_max, 0);
    ck_assert_uint_eq(out.as_max, 0);
    shim_config_free(&out);
    uint64_t one = 40;
    put_record(&b, TAG_RLIMITS, &one, sizeof(one));
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), -1);
    ipb_buf_free(&b);
    shim_config_free(&in);
}
END_TEST

START_TEST(zygote_flag) {
    shim_config in, out;
    sample_config(&in);
    in.zygote = 1;
    ipb_buf b;
    encode(&in, &b);
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), 0);
    ck_assert_uint_eq(out.zygote, 1);
    shim_config_free(&out);
    /* twice, or another value: malformed */
    uint32_t v = 1;
    size_t len = b.len;
    put_record(&b, TAG_ZYGOTE, &v, sizeof(v));
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), -1);
    b.len = len;
    ipb_buf_free(&b);
    in.zygote = 0;
    encode(&in, &b);
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), 0);
    ck_assert_uint_eq(out.zygote, 0);
    shim_config_free(&out);
    v = 2;
    put_record(&b, TAG_ZYGOTE, &v, sizeof(v));
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), -1);
    ipb_buf_free(&b);
    /* run mode has no zygote */
    in.mode = SHIM_MODE_RUN;
    in.zygote = 1;
    encode(&in, &b);
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), -1);
    ipb_buf_free(&b);
    shim_config_free(&in);
}
END_TEST

START_TEST(standby_flag) {
    shim_config in, out;
    sample_config(&in);
    in.zygote = 1;
    in.standby = 1;
    ipb_buf b;
    encode(&in, &b);
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), 0);
    ck_assert_uint_eq(out.zygote, 1);
    ck_assert_uint_eq(out.standby, 1);
    shim_config_free(&out);
    /* twice: malformed */
    uint32_t v = 1;
    size_t len = b.len;
    put_record(&b, TAG_STANDBY, &v, sizeof(v));
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), -1);
    b.len = len;
    ipb_buf_free(&b);
    /* absent: none; another value, or a standby without the zygote: malformed */
    in.standby = 0;
    encode(&in, &b);
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), 0);
    ck_assert_uint_eq(out.standby, 0);
    shim_config_free(&out);
    len = b.len;
    v = 2;
    put_record(&b, TAG_STANDBY, &v, sizeof(v));
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), -1);
    b.len = len;
    ipb_buf_free(&b);
    in.zygote = 0;
    in.standby = 1;
    encode(&in, &b);
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), -1);
    ipb_buf_free(&b);
    shim_config_free(&in);
}
END_TEST

START_TEST(refuses_every_truncation) {
    shim_config in;
    sample_config(&in);
    ipb_buf b;
    encode(&in, &b);
    for (size_t len = 0; len < b.len; len++) {
        shim_config out;
        ck_assert_msg(decode(b.data, len, &out, NULL) < 0, "a %zu-byte prefix of %zu was accepted", len, b.len);
    }
    ipb_buf_free(&b);
    shim_config_free(&in);
}
END_TEST

START_TEST(minimal_by_hand_is_accepted) {
    ipb_buf b;
    minimal_by_hand(&b, 0, NULL);
    shim_config out;
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), 0);
    ck_assert_uint_eq(out.mode, SHIM_MODE_RUN);
    ck_assert_str_eq(out.root, "/r");
    ck_assert_str_eq(out.argv.v[0], "/bin/sh");
    ck_assert_uint_eq(out.bpf_len, 8);
    shim_config_free(&out);
    ipb_buf_free(&b);
}
END_TEST

START_TEST(refuses_missing_required_fields) {
    static const int required[] = {TAG_MODE, TAG_ROOT, TAG_ARGV, TAG_BPF};
    for (size_t i = 0; i < 4; i++) {
        ipb_buf b;
        minimal_by_hand(&b, required[i], NULL);
        char what[32];
        snprintf(what, sizeof(what), "a config without tag %d", required[i]);
        expect_refused(&b, what);
        ipb_buf_free(&b);
    }
    ipb_buf empty = {0};
    expect_refused(&empty, "an empty config");
}
END_TEST

static void add_unknown_tag(ipb_buf *b) { put_u32_record(b, 99, 0); }
static void add_tag_zero(ipb_buf *b) { put_record(b, 0, NULL, 0); }
static void add_dup_root(ipb_buf *b) { put_record(b, TAG_ROOT, "/other", 6); }
static void add_dup_hostname(ipb_buf *b) {
    put_record(b, TAG_HOSTNAME, "a", 1);
    put_record(b, TAG_HOSTNAME, "b", 1);
}
static void add_dup_cwd(ipb_buf *b) {
    put_record(b, TAG_CWD, "/", 1);
    put_record(b, TAG_CWD, "/", 1);
}
static void add_dup_bpf(ipb_buf *b) { put_record(b, TAG_BPF, bpf16, 8); }
static void add_bad_uid_len(ipb_buf *b) { put_record(b, TAG_UID, "\1\0\0", 3); }
static void add_nul_in_argv(ipb_buf *b) { put_record(b, TAG_ARGV, "a\0b", 3); }
static void add_nul_in_env(ipb_buf *b) { put_record(b, TAG_ENV, "X=\0", 3); }
static void add_length_past_end(ipb_buf *b) {
    uint16_t tag = TAG_ENV;
    uint32_t len = 1000;
    ipb_buf_append(b, &tag, 2);
    ipb_buf_append(b, &len, 4);
    ipb_buf_append(b, "X=1", 3);
}
static void add_header_only(ipb_buf *b) { ipb_buf_append(b, "\x08\x00\x01", 3); }

START_TEST(refuses_bad_records) {
    static const struct {
        void (*extra)(ipb_buf *);
        const char *what;
    } cases[] = {
        {add_unknown_tag, "an unknown tag"},
        {add_tag_zero, "tag 0"},
        {add_dup_root, "a second root"},
        {add_dup_hostname, "a second hostname"},
        {add_dup_cwd, "a second cwd"},
        {add_dup_bpf, "a second BPF program"},
        {add_bad_uid_len, "a 3-byte uid"},
        {add_nul_in_argv, "a NUL inside an argv string"},
        {add_nul_in_env, "a NUL inside an env string"},
        {add_length_past_end, "a length past the end"},
        {add_header_only, "a truncated record header"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        ipb_buf b;
        minimal_by_hand(&b, 0, cases[i].extra);
        expect_refused(&b, cases[i].what);
        ipb_buf_free(&b);
    }
}
END_TEST

START_TEST(refuses_bad_values) {
    ipb_buf b = {0};
    /* mode must be KERNEL or RUN */
    uint32_t modes[] = {0, 3, 100};
    for (size_t i = 0; i < 3; i++) {
        memset(&b, 0, sizeof(b));
        put_u32_record(&b, TAG_MODE, modes[i]);
        put_record(&b, TAG_ROOT, "/r", 2);
        put_record(&b, TAG_ARGV, "/bin/sh", 7);
        put_record(&b, TAG_BPF, bpf16, 8);
        expect_refused(&b, "a bad mode");
        ipb_buf_free(&b);
    }
    /* root must be absolute; BPF a non-empty multiple of 8 bytes */
    struct {
        const char *root;
        uint32_t bpf_len;
        const char *what;
    } cases[] = {{"r", 8, "a relative root"},
                 {"", 8, "an empty root"},
                 {"/r", 12, "a 12-byte BPF program"},
                 {"/r", 0, "an empty BPF program"},
                 {"/r", 4, "a 4-byte BPF program"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        memset(&b, 0, sizeof(b));
        put_u32_record(&b, TAG_MODE, SHIM_MODE_KERNEL);
        put_record(&b, TAG_ROOT, cases[i].root, (uint32_t)strlen(cases[i].root));
        put_record(&b, TAG_ARGV, "/bin/sh", 7);
        put_record(&b, TAG_BPF, bpf16, cases[i].bpf_len);
        expect_refused(&b, cases[i].what);
        ipb_buf_free(&b);
    }
}
END_TEST

/* Encodes a config whose only mount is m (built with ipb_mount_plan_add, which takes any
 * kind) and expects the decoder to refuse it. */
static void expect_mount_refused(uint32_t kind, const char *src, const char *dst, const char *what) {
    shim_config in;
    sample_config(&in);
    ipb_mount_plan_free(&in.plan);
    ck_assert_int_eq(ipb_mount_plan_add(&in.plan, kind, 0, src, dst, NULL), 0);
    ipb_buf b;
    encode(&in, &b);
    expect_refused(&b, what);
    ipb_buf_free(&b);
    shim_config_free(&in);
}

static void mount_record(ipb_buf *b, const void *payload, uint32_t len) { put_record(b, TAG_MOUNT, payload, len); }

static const uint8_t *raw_mount_payload;
static uint32_t raw_mount_len;
static void add_raw_mount(ipb_buf *b) { mount_record(b, raw_mount_payload, raw_mount_len); }

START_TEST(refuses_bad_mounts) {
    expect_mount_refused(0, NULL, "/x", "mount kind 0");
    expect_mount_refused(IPB_MNT_DEVPTS + 1, NULL, "/x", "a mount kind past the last");
    expect_mount_refused(0xffffffffu, NULL, "/x", "mount kind 0xffffffff");
    expect_mount_refused(IPB_MNT_DIR, NULL, "relative", "a relative mount destination");
    expect_mount_refused(IPB_MNT_DIR, NULL, "", "an empty mount destination");

    /* hand-made payloads: {kind, flags, src, dst, data} with 0xffffffff for NULL */
    static const uint8_t null_dst[] = {5,    0,    0,    0,    0,    0,    0,    0,    0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t trailing[] = {5, 0, 0, 0, 0,   0,   0,    0,    0xff, 0xff, 0xff, 0xff,
                                       2, 0, 0, 0, '/', 'x', 0xff, 0xff, 0xff, 0xff, 'z'};
    static const uint8_t short_str[] = {5, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 9, 0, 0, 0, '/', 'x'};
    static const uint8_t nul_dst[] = {5, 0, 0, 0, 0,   0, 0,   0,    0xff, 0xff, 0xff, 0xff,
                                      3, 0, 0, 0, '/', 0, 'x', 0xff, 0xff, 0xff, 0xff};
    static const uint8_t too_short[] = {5, 0, 0, 0, 0, 0, 0};
    /* IPB_MNT_SAME (0x10): {u64 dev, u64 ino} after the strings, and a source to check */
    static const uint8_t same_no_id[] = {2,   0,   0, 0, 0x10, 0, 0,   0,   2,    0,    0,    0,
                                         '/', 'w', 2, 0, 0,    0, '/', 'x', 0xff, 0xff, 0xff, 0xff};
    static const uint8_t same_short_id[] = {2,   0,   0, 0, 0x10, 0, 0,   0,   2,    0,    0,    0,
                                            '/', 'w', 2, 0, 0,    0, '/', 'x', 0xff, 0xff, 0xff, 0xff,
                                            1,   2,   3, 4, 5,    6, 7,   8,   9,    10,   11,   12};
    static const uint8_t same_no_src[] = {2, 0, 0, 0,   0x10, 0,    0,    0,    0xff, 0xff, 0xff, 0xff, 2,
                                          0, 0, 0, '/', 'x',  0xff, 0xff, 0xff, 0xff, 1,    2,    3,    4,
                                          5, 6, 7, 8,   9,    10,   11,   12,   13,   14,   15,   16};
    static const uint8_t good[] = {5,    0, 0, 0, 0, 0,   0,   0,    0xff, 0xff, 0xff,
                                   0xff, 2, 0, 0, 0, '/', 'x', 0xff, 0xff, 0xff, 0xff};
    static const struct {
        const uint8_t *p;
        uint32_t len;
        const char *what;
    } cases[] = {{null_dst, sizeof(null_dst), "a NULL mount destination"},
                 {trailing, sizeof(trailing), "bytes after a mount's last string"},
                 {short_str, sizeof(short_str), "a mount string past the record"},
                 {nul_dst, sizeof(nul_dst), "a NUL inside a mount string"},
                 {too_short, sizeof(too_short), "a 7-byte mount record"},
                 {same_no_id, sizeof(same_no_id), "IPB_MNT_SAME without the identity"},
                 {same_short_id, sizeof(same_short_id), "IPB_MNT_SAME with 12 bytes of identity"},
                 {same_no_src, sizeof(same_no_src), "IPB_MNT_SAME without a source"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        raw_mount_payload = cases[i].p;
        raw_mount_len = cases[i].len;
        ipb_buf b;
        minimal_by_hand(&b, 0, add_raw_mount);
        expect_refused(&b, cases[i].what);
        ipb_buf_free(&b);
    }
    /* the same layout, well-formed, is accepted (the cases above fail for their reason) */
    raw_mount_payload = good;
    raw_mount_len = sizeof(good);
    ipb_buf b;
    minimal_by_hand(&b, 0, add_raw_mount);
    shim_config out;
    ck_assert_int_eq(decode(b.data, b.len, &out, NULL), 0);
    ck_assert_uint_eq(out.plan.n, 1);
    ck_assert_uint_eq(out.plan.m[0].kind, IPB_MNT_DIR);
    ck_assert_str_eq(out.plan.m[0].dst, "/x");
    ck_assert_ptr_null(out.plan.m[0].src);
    shim_config_free(&out);
    ipb_buf_free(&b);
}
END_TEST

START_TEST(encode_refuses_oversized) {
    shim_config in;
    sample_config(&in);
    char *big = malloc(SHIM_CONFIG_MAX + 2);
    memset(big, 'v', SHIM_CONFIG_MAX + 1);
    big[0] = 'V';
    big[1] = '=';
    big[SHIM_CONFIG_MAX + 1] = '\0';
    ipb_strv_push(&in.env, big);
    free(big);
    ipb_buf b = {0};
    ck_assert_int_eq(shim_config_encode(&in, &b), -E2BIG);
    ipb_buf_free(&b);
    /* many records that are each small but add up */
    ipb_strv_free(&in.env);
    char chunk[4096];
    memset(chunk, 'x', sizeof(chunk) - 1);
    chunk[0] = 'X';
    chunk[1] = '=';
    chunk[sizeof(chunk) - 1] = '\0';
    for (int i = 0; i < 300; i++)
        ipb_strv_push(&in.env, chunk);
    memset(&b, 0, sizeof(b));
    ck_assert_int_eq(shim_config_encode(&in, &b), -E2BIG);
    ipb_buf_free(&b);
    shim_config_free(&in);
}
END_TEST

/* ---- records on the socket ---- */

static int sv[2] = {-1, -1};

static void pair_setup(void) {
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    signal(SIGPIPE, SIG_IGN);
}

static void pair_teardown(void) {
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    sv[0] = sv[1] = -1;
}

START_TEST(send_recv_record) {
    ck_assert_int_eq(shim_send(sv[0], SHIM_EV_ERROR, -5, EACCES, 7, "mount /proc", "mounting proc failed"), 0);
    struct shim_msg m;
    memset(&m, 0xee, sizeof(m));
    ck_assert_int_eq(shim_recv(sv[1], &m), 1);
    ck_assert_uint_eq(m.type, SHIM_EV_ERROR);
    ck_assert_int_eq(m.arg, -5);
    ck_assert_int_eq(m.err, EACCES);
    ck_assert_uint_eq(m.gen, 7);
    ck_assert_str_eq(m.step, "mount /proc");
    ck_assert_str_eq(m.text, "mounting proc failed");
    /* NULL strings arrive empty; both directions work */
    ck_assert_int_eq(shim_send(sv[1], SHIM_CMD_START, 0, 0, 8, NULL, NULL), 0);
    ck_assert_int_eq(shim_recv(sv[0], &m), 1);
    ck_assert_uint_eq(m.type, SHIM_CMD_START);
    ck_assert_str_eq(m.step, "");
    ck_assert_str_eq(m.text, "");
}
END_TEST

START_TEST(send_truncates_long_strings) {
    char step[100], text[1000];
    memset(step, 's', sizeof(step) - 1);
    step[sizeof(step) - 1] = '\0';
    memset(text, 't', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    ck_assert_int_eq(shim_send(sv[0], SHIM_EV_ERROR, 0, 0, 0, step, text), 0);
    struct shim_msg m;
    ck_assert_int_eq(shim_recv(sv[1], &m), 1);
    ck_assert_uint_eq(strlen(m.step), sizeof(m.step) - 1);
    ck_assert_uint_eq(strlen(m.text), sizeof(m.text) - 1);
}
END_TEST

START_TEST(recv_terminates_peer_strings) {
    struct shim_msg raw;
    memset(&raw, 'A', sizeof(raw)); /* no NUL anywhere */
    ck_assert_int_eq(send(sv[0], &raw, sizeof(raw), 0), (ssize_t)sizeof(raw));
    struct shim_msg m;
    ck_assert_int_eq(shim_recv(sv[1], &m), 1);
    ck_assert_uint_eq(strlen(m.step), sizeof(m.step) - 1);
    ck_assert_uint_eq(strlen(m.text), sizeof(m.text) - 1);
}
END_TEST

START_TEST(recv_wrong_size) {
    char small[10] = "short";
    ck_assert_int_eq(send(sv[0], small, sizeof(small), 0), (ssize_t)sizeof(small));
    char big[sizeof(struct shim_msg) + 16];
    memset(big, 0, sizeof(big));
    ck_assert_int_eq(send(sv[0], big, sizeof(big), 0), (ssize_t)sizeof(big));
    ck_assert_int_eq(shim_send(sv[0], SHIM_EV_READY, 42, 0, 1, "ready", NULL), 0);
    struct shim_msg m;
    ck_assert_int_eq(shim_recv(sv[1], &m), -EBADMSG);
    ck_assert_int_eq(shim_recv(sv[1], &m), -EBADMSG);
    /* record boundaries hold: the good record after the bad ones is intact */
    ck_assert_int_eq(shim_recv(sv[1], &m), 1);
    ck_assert_uint_eq(m.type, SHIM_EV_READY);
    ck_assert_int_eq(m.arg, 42);
    ck_assert_str_eq(m.step, "ready");
}
END_TEST

START_TEST(recv_eof_and_send_to_closed) {
    close(sv[0]);
    sv[0] = -1;
    struct shim_msg m;
    ck_assert_int_eq(shim_recv(sv[1], &m), 0);
    ck_assert_int_eq(shim_send(sv[1], SHIM_EV_KILLED, 0, 0, 0, NULL, NULL), -EPIPE);
    ck_assert_int_eq(shim_recv(-1, &m), -EBADF);
}
END_TEST

/* FIXED BUG (kernel-shim/shim_config.c:219-220, shim_recv): shim_recv() maps a zero-length record
 * to 0, which callers read as EOF; on SOCK_SEQPACKET an empty record is a message like any other,
 * and shim_proto.h promises -EBADMSG for every record of the wrong size. A peer that sends zero
 * bytes makes the supervisor believe the shim closed the channel while it is alive. */
START_TEST(fixed_bug_empty_record_reads_as_eof) {
    ck_assert_int_eq(send(sv[0], "", 0, 0), 0);
    struct shim_msg m;
    int r = shim_recv(sv[1], &m);
    ck_assert_msg(r == -EBADMSG, "an empty record gave %d (0 means EOF), expected -EBADMSG", r);
}
END_TEST

static Suite *shim_config_suite(void) {
    Suite *s = suite_create("shim_config");
    TCase *c = tcase_create("config");
    tcase_add_test(c, round_trip_all_fields);
    tcase_add_test(c, round_trip_optional_fields_absent);
    tcase_add_test(c, rlimits_round_trip);
    tcase_add_test(c, zygote_flag);
    tcase_add_test(c, standby_flag);
    tcase_add_test(c, refuses_every_truncation);
    tcase_add_test(c, minimal_by_hand_is_accepted);
    tcase_add_test(c, refuses_missing_required_fields);
    tcase_add_test(c, refuses_bad_records);
    tcase_add_test(c, refuses_bad_values);
    tcase_add_test(c, refuses_bad_mounts);
    tcase_add_test(c, encode_refuses_oversized);
    suite_add_tcase(s, c);
    TCase *r = tcase_create("records");
    tcase_add_checked_fixture(r, pair_setup, pair_teardown);
    tcase_add_test(r, send_recv_record);
    tcase_add_test(r, send_truncates_long_strings);
    tcase_add_test(r, recv_terminates_peer_strings);
    tcase_add_test(r, recv_wrong_size);
    tcase_add_test(r, recv_eof_and_send_to_closed);
    suite_add_tcase(s, r);
    {
        TCase *k = tcase_create("fixed_bugs");
        tcase_add_checked_fixture(k, pair_setup, pair_teardown);
        tcase_add_test(k, fixed_bug_empty_record_reads_as_eof);
        suite_add_tcase(s, k);
    }
    return s;
}

int main(void) { return ipb_run_suite(shim_config_suite()); }
