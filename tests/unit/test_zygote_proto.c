/* Unit tests for kernel-shim/zygote_proto.c: the 16-byte records between a sandbox's PID 1
 * (S1), its zygote and S0, parsed and built, and sent over SOCK_SEQPACKET socketpairs. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run_suite.h"
#include "zygote_proto.h"

static void raw(uint8_t out[ZY_REC_SIZE], uint32_t type, uint32_t gen, int32_t a, int32_t b) {
    zy_rec r = {type, gen, a, b};
    memcpy(out, &r, ZY_REC_SIZE);
}

START_TEST(build_parse_round_trip) {
    const zy_rec ok[] = {
        {ZY_FORK, 5, 0, 0},         {ZY_READY, 0, 0, 0},   {ZY_STARTED, 5, 2, 0},  {ZY_STARTED, 9, 4194304, 0},
        {ZY_FAILED, 5, EAGAIN, 0},  {ZY_MAKE, 0, 0, 0},    {ZY_KILL, 0, 0, 0},     {ZY_NEW, 0, 0, 0},
        {ZY_ENDED, 0, 9, 0},        {ZY_ENDED, 0, 0, 0},   {ZY_GO, 0, 0, 0},       {ZY_BOOT, 0, 0, 0},
        {ZY_NOTMADE, 0, EAGAIN, 0}, {ZY_STANDBY, 1, 0, 0}, {ZY_STANDBY, 0, 0, 0},  {ZY_PREPARED, 3, 0, 0},
        {ZY_ACTIVATE, 7, 0, 0},     {ZY_ACTIVE, 7, 0, 0},  {ZY_DECLINED, 7, 1, 0}, {ZY_DECLINED, 7, 5, 0}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint8_t b[ZY_REC_SIZE];
        zy_build(b, ok[i].type, ok[i].gen, ok[i].a);
        zy_rec r;
        ck_assert_int_eq(zy_parse(b, sizeof(b), &r), 0);
        ck_assert_mem_eq(&r, &ok[i], sizeof(r));
    }
}
END_TEST

START_TEST(refuses_malformed) {
    uint8_t b[ZY_REC_SIZE + 1];
    zy_rec r;
    /* sizes */
    zy_build(b, ZY_READY, 0, 0);
    for (size_t n = 0; n <= sizeof(b); n++)
        if (n != ZY_REC_SIZE)
            ck_assert_int_eq(zy_parse(b, n, &r), -EBADMSG);
    /* types and fields */
    const zy_rec bad[] = {{0, 0, 0, 0},
                          {11, 0, 0, 0},
                          {15, 0, 0, 0},
                          {22, 0, 0, 0},
                          {0xffffffffu, 0, 0, 0},
                          {ZY_READY, 1, 0, 0},
                          {ZY_READY, 0, 1, 0},
                          {ZY_READY, 0, 0, 1},
                          {ZY_FORK, 1, 1, 0},
                          {ZY_STARTED, 1, 1, 0},
                          {ZY_STARTED, 1, 0, 0},
                          {ZY_STARTED, 1, -5, 0},
                          {ZY_FAILED, 1, 0, 0},
                          {ZY_FAILED, 1, -1, 0},
                          {ZY_ENDED, 3, 0, 0},
                          {ZY_GO, 0, 7, 0},
                          {ZY_NEW, 2, 0, 0},
                          {ZY_KILL, 0, 0, 1},
                          {ZY_BOOT, 1, 0, 0},
                          {ZY_BOOT, 0, 1, 0},
                          {ZY_NOTMADE, 0, 0, 0},
                          {ZY_NOTMADE, 0, -11, 0},
                          {ZY_NOTMADE, 1, 11, 0},
                          {ZY_STANDBY, 1, 1, 0},
                          {ZY_STANDBY, 1, 0, 1},
                          {ZY_PREPARED, 1, 1, 0},
                          {ZY_PREPARED, 1, 0, 2},
                          {ZY_ACTIVATE, 2, -1, 0},
                          {ZY_ACTIVATE, 2, 0, 1},
                          {ZY_ACTIVE, 2, 3, 0},
                          {ZY_ACTIVE, 2, 0, -1},
                          {ZY_DECLINED, 2, 0, 0},
                          {ZY_DECLINED, 2, -1, 0},
                          {ZY_DECLINED, 2, 1, 1}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        raw(b, bad[i].type, bad[i].gen, bad[i].a, bad[i].b);
        ck_assert_msg(zy_parse(b, ZY_REC_SIZE, &r) == -EBADMSG, "record %zu accepted", i);
    }
}
END_TEST

static void pair(int sp[2]) { ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0); }

START_TEST(send_receive) {
    int sp[2];
    pair(sp);
    ck_assert_int_eq(zy_send(sp[0], ZY_STARTED, 3, 77, -1), 0);
    zy_rec r;
    int fd = -2;
    ck_assert_int_eq(zy_recv(sp[1], &r, &fd, 1000), 1);
    ck_assert_uint_eq(r.type, ZY_STARTED);
    ck_assert_uint_eq(r.gen, 3);
    ck_assert_int_eq(r.a, 77);
    ck_assert_int_eq(fd, -1);
    /* nothing more: a timeout */
    ck_assert_int_eq(zy_recv(sp[1], &r, &fd, 10), 0);
    /* the other end gone: EOF */
    close(sp[0]);
    ck_assert_int_eq(zy_recv(sp[1], &r, &fd, 1000), -EPIPE);
    close(sp[1]);
}
END_TEST

START_TEST(descriptor_only_with_new_or_started) {
    int sp[2];
    pair(sp);
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(probe, 0);
    ck_assert_int_eq(zy_send(sp[0], ZY_NEW, 0, 0, probe), 0);
    zy_rec r;
    int fd = -1;
    ck_assert_int_eq(zy_recv(sp[1], &r, &fd, 1000), 1);
    ck_assert_uint_eq(r.type, ZY_NEW);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ne(fd, probe);
    ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    close(fd);
    /* a descriptor with another record: refused, and not kept */
    ck_assert_int_eq(zy_send(sp[0], ZY_READY, 0, 0, probe), 0);
    int before = dup(0);
    close(before);
    ck_assert_int_eq(zy_recv(sp[1], &r, &fd, 1000), -EBADMSG);
    ck_assert_int_eq(fd, -1);
    int after = dup(0);
    ck_assert_int_eq(after, before); /* the received descriptor was closed */
    close(after);
    /* ZY_STARTED may carry one (a standby's channel): kept */
    ck_assert_int_eq(zy_send(sp[0], ZY_STARTED, 1, 5, probe), 0);
    ck_assert_int_eq(zy_recv(sp[1], &r, &fd, 1000), 1);
    ck_assert_uint_eq(r.type, ZY_STARTED);
    ck_assert_int_ge(fd, 0);
    close(fd);
    /* ... and without one it is still a record (a kernel's) */
    ck_assert_int_eq(zy_send(sp[0], ZY_STARTED, 1, 5, -1), 0);
    ck_assert_int_eq(zy_recv(sp[1], &r, &fd, 1000), 1);
    ck_assert_int_eq(fd, -1);
    /* NULL fd: the one that comes with ZY_STARTED is closed, the record accepted */
    ck_assert_int_eq(zy_send(sp[0], ZY_STARTED, 1, 5, probe), 0);
    before = dup(0);
    close(before);
    ck_assert_int_eq(zy_recv(sp[1], &r, NULL, 1000), 1);
    after = dup(0);
    ck_assert_int_eq(after, before);
    close(after);
    /* a standby record with one: refused */
    ck_assert_int_eq(zy_send(sp[0], ZY_PREPARED, 1, 0, probe), 0);
    ck_assert_int_eq(zy_recv(sp[1], &r, &fd, 1000), -EBADMSG);
    ck_assert_int_eq(fd, -1);
    /* ZY_NEW without one: refused */
    ck_assert_int_eq(zy_send(sp[0], ZY_NEW, 0, 0, -1), 0);
    ck_assert_int_eq(zy_recv(sp[1], &r, &fd, 1000), -EBADMSG);
    /* NULL fd: a descriptor that comes is closed, the record refused (it needs one kept) */
    ck_assert_int_eq(zy_send(sp[0], ZY_NEW, 0, 0, probe), 0);
    ck_assert_int_eq(zy_recv(sp[1], &r, NULL, 1000), -EBADMSG);
    close(probe);
    close(sp[0]);
    close(sp[1]);
}
END_TEST

START_TEST(wrong_sizes_on_the_wire) {
    int sp[2];
    pair(sp);
    uint8_t b[64];
    memset(b, 0, sizeof(b));
    zy_build(b, ZY_READY, 0, 0);
    zy_rec r;
    ck_assert_int_eq(send(sp[0], b, ZY_REC_SIZE - 1, 0), ZY_REC_SIZE - 1);
    ck_assert_int_eq(zy_recv(sp[1], &r, NULL, 1000), -EBADMSG);
    ck_assert_int_eq(send(sp[0], b, ZY_REC_SIZE + 1, 0), ZY_REC_SIZE + 1);
    ck_assert_int_eq(zy_recv(sp[1], &r, NULL, 1000), -EBADMSG);
    ck_assert_int_eq(send(sp[0], b, sizeof(b), 0), (ssize_t)sizeof(b));
    ck_assert_int_eq(zy_recv(sp[1], &r, NULL, 1000), -EBADMSG);
    /* and a good one after them is read as itself */
    ck_assert_int_eq(send(sp[0], b, ZY_REC_SIZE, 0), ZY_REC_SIZE);
    ck_assert_int_eq(zy_recv(sp[1], &r, NULL, 1000), 1);
    ck_assert_uint_eq(r.type, ZY_READY);
    close(sp[0]);
    close(sp[1]);
}
END_TEST

static Suite *zygote_proto_suite(void) {
    Suite *s = suite_create("zygote_proto");
    TCase *c = tcase_create("records");
    tcase_add_test(c, build_parse_round_trip);
    tcase_add_test(c, refuses_malformed);
    tcase_add_test(c, send_receive);
    tcase_add_test(c, descriptor_only_with_new_or_started);
    tcase_add_test(c, wrong_sizes_on_the_wire);
    suite_add_tcase(s, c);
    return s;
}

int main(void) { return ipb_run_suite(zygote_proto_suite()); }
