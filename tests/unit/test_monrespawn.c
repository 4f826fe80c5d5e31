/* Unit tests for when a private monitor that ended may be started again
 * (supervisor/monrespawn.c). */
#include <check.h>

#include "monrespawn.h"
#include "run_suite.h"

START_TEST(served_monitors_are_always_replaced) {
    ipb_respawn r = {0};
    long wait;
    /* Killed again and again, each after serving: never refused. */
    for (int i = 0; i < 20; i++) {
        ipb_respawn_served(&r);
        ipb_respawn_ended(&r, 1000 + i);
        ck_assert(ipb_respawn_may_start(&r, 1000 + i, &wait));
        ck_assert_int_eq(wait, 0);
    }
}
END_TEST

START_TEST(unserved_ones_stop_after_a_few) {
    ipb_respawn r = {0};
    long wait;
    for (int i = 0; i < IPB_RESPAWN_TRIES - 1; i++) {
        ipb_respawn_ended(&r, 1000);
        ck_assert(ipb_respawn_may_start(&r, 1000, &wait));
    }
    ipb_respawn_ended(&r, 1000);
    ck_assert(!ipb_respawn_may_start(&r, 1000, &wait));
    ck_assert_int_eq(wait, IPB_RESPAWN_PAUSE_MS);
    /* Asking again does not count as another end, and stays refused until the pause is over. */
    ck_assert(!ipb_respawn_may_start(&r, 1000 + IPB_RESPAWN_PAUSE_MS - 1, &wait));
    ck_assert_int_eq(wait, 1);
    /* Then one more try; if that one ends unserved too, another pause. */
    ck_assert(ipb_respawn_may_start(&r, 1000 + IPB_RESPAWN_PAUSE_MS, &wait));
    ipb_respawn_ended(&r, 2000 + IPB_RESPAWN_PAUSE_MS);
    ck_assert(!ipb_respawn_may_start(&r, 2000 + IPB_RESPAWN_PAUSE_MS, &wait));
}
END_TEST

START_TEST(serving_resets_the_count) {
    ipb_respawn r = {0};
    long wait;
    for (int i = 0; i < IPB_RESPAWN_TRIES - 1; i++)
        ipb_respawn_ended(&r, 1000);
    ipb_respawn_served(&r);
    ipb_respawn_ended(&r, 1000);
    for (int i = 0; i < IPB_RESPAWN_TRIES - 1; i++) {
        ck_assert(ipb_respawn_may_start(&r, 1000, &wait));
        ipb_respawn_ended(&r, 1000);
    }
    ck_assert(ipb_respawn_may_start(&r, 1000, &wait));
    ipb_respawn_ended(&r, 1000);
    ck_assert(!ipb_respawn_may_start(&r, 1000, &wait));
}
END_TEST

int main(void) {
    Suite *s = suite_create("monrespawn");
    TCase *tc = tcase_create("monrespawn");
    tcase_add_test(tc, served_monitors_are_always_replaced);
    tcase_add_test(tc, unserved_ones_stop_after_a_few);
    tcase_add_test(tc, serving_resets_the_count);
    suite_add_tcase(s, tc);
    return ipb_run_suite(s);
}
