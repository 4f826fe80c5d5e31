/* Unit tests for kernel-shim/zygote_s1.c, S1's side of the zygote, driven through its channel
 * to S0 by a fake S0 (a socketpair end the test reads and writes): what S1 asks for and what it
 * counts when a zygote ends, or when S0 could not make one. */
#include <check.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run_suite.h"
#include "zygote_proto.h"
#include "zygote_s1.h"

/* S1 with a fake S0: s0 is the test's end. The first ZY_MAKE (init asks for the first zygote
 * at once) is read here. */
static void s1_with_fake_s0(shim_zygote *z, int *s0) {
    int sp[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    shim_zygote_init(z, sp[0]);
    *s0 = sp[1];
    zy_rec m;
    ck_assert_int_eq(zy_recv(*s0, &m, NULL, 1000), 1);
    ck_assert_uint_eq(m.type, ZY_MAKE);
    ck_assert_int_eq(z->state, SHIM_ZY_MAKING);
}

/* What S1 sent S0 since, within 200 ms: a record's type, or 0. */
static uint32_t next_from_s1(int s0) {
    zy_rec m;
    return zy_recv(s0, &m, NULL, 200) == 1 ? m.type : 0;
}

START_TEST(failed_make_is_no_loss) {
    shim_zygote z;
    int s0;
    s1_with_fake_s0(&z, &s0);
    ck_assert_int_eq(zy_send(s0, ZY_NOTMADE, 0, EAGAIN, -1), 0);
    shim_zygote_service(&z);
    /* Nothing ended: not counted towards giving up, nothing to tell, no retry before a START. */
    ck_assert_int_eq(z.state, SHIM_ZY_NONE);
    ck_assert_int_eq(z.failed_boots, 0);
    ck_assert(!z.untold);
    ck_assert(!z.after_loss);
    ck_assert_uint_eq(next_from_s1(s0), 0);
    close(s0);
    close(z.ctl);
}
END_TEST

START_TEST(made_zygote_lost_is_told_and_replaced) {
    shim_zygote z;
    int s0, zc[2];
    s1_with_fake_s0(&z, &s0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, zc), 0);
    ck_assert_int_eq(zy_send(s0, ZY_NEW, 0, 0, zc[0]), 0);
    close(zc[0]);
    shim_zygote_service(&z);
    ck_assert_int_eq(z.state, SHIM_ZY_BOOTING);
    zy_rec m;
    ck_assert_int_eq(zy_recv(zc[1], &m, NULL, 1000), 1);
    ck_assert_uint_eq(m.type, ZY_BOOT); /* the first zygote boots at once */
    /* It ends before READY (killed by signal 9): told, counted, and its slot held again at once. */
    ck_assert_int_eq(zy_send(s0, ZY_ENDED, 0, 9, -1), 0);
    shim_zygote_service(&z);
    ck_assert(z.untold);
    ck_assert_int_eq(z.status, 9);
    ck_assert_int_eq(z.why, 0);
    ck_assert_int_eq(z.failed_boots, 1);
    ck_assert_int_eq(z.fd, -1);
    ck_assert_uint_eq(next_from_s1(s0), ZY_MAKE);
    ck_assert(z.after_loss);
    ck_assert_int_eq(z.state, SHIM_ZY_MAKING);
    /* That make fails: still one loss to tell, with its status, and one failed boot. */
    ck_assert_int_eq(zy_send(s0, ZY_NOTMADE, 0, EAGAIN, -1), 0);
    shim_zygote_service(&z);
    ck_assert(z.untold);
    ck_assert_int_eq(z.status, 9);
    ck_assert_int_eq(z.failed_boots, 1);
    ck_assert_int_eq(z.state, SHIM_ZY_NONE);
    ck_assert_uint_eq(next_from_s1(s0), 0);
    close(zc[1]);
    close(s0);
    close(z.ctl);
}
END_TEST

static Suite *zygote_s1_suite(void) {
    Suite *s = suite_create("zygote_s1");
    TCase *c = tcase_create("S0's answers");
    tcase_add_test(c, failed_make_is_no_loss);
    tcase_add_test(c, made_zygote_lost_is_told_and_replaced);
    suite_add_tcase(s, c);
    return s;
}

int main(void) { return ipb_run_suite(zygote_s1_suite()); }
