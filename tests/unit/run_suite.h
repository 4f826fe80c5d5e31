/* The main of every unit suite: runs it and exits non-zero when a check failed. */
#pragma once
#include <check.h>
#include <stdlib.h>

static inline int ipb_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
