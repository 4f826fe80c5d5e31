/* Unit tests for the kernel environments that refuse a zygote (supervisor/zygote_env.c). */
#include <check.h>
#include <string.h>

#include "run_suite.h"
#include "zygote_env.h"

static char why[32];

static bool ok(const char *kv) {
    char *env[] = {(char *)"PATH=/usr/bin:/bin", (char *)"HOME=/home/appuser", (char *)kv};
    why[0] = '\0';
    return ipb_zygote_env_ok(env, 3, why, sizeof(why));
}

START_TEST(plain_environment_allows) {
    ck_assert(ok("LANG=C.UTF-8"));
    ck_assert(ok("PYTHONUNBUFFERED=1"));
    ck_assert(ok("TZ=Europe/Berlin"));
    ck_assert(ok("TZ=UTC"));
    ck_assert(ok("LD=ld.gold"));
    ck_assert(ok("MYLD_PRELOAD=x"));
    ck_assert(ok("PYTHONPATHX=1"));
    ck_assert_str_eq(why, "");
}
END_TEST

START_TEST(loaders_refuse) {
    static const char *const bad[][2] = {
        {"PYTHONPATH=/app", "PYTHONPATH"},
        {"PYTHONUSERBASE=/app", "PYTHONUSERBASE"},
        {"PYTHONHOME=/usr", "PYTHONHOME"},
        {"PYTHONPYCACHEPREFIX=/tmp/pyc", "PYTHONPYCACHEPREFIX"},
        {"PYTHONPLATLIBDIR=lib", "PYTHONPLATLIBDIR"},
        {"LD_PRELOAD=/app/x.so", "LD_PRELOAD"},
        {"LD_LIBRARY_PATH=/app/lib", "LD_LIBRARY_PATH"},
        {"LD_AUDIT=/app/a.so", "LD_AUDIT"},
        {"GCONV_PATH=/app", "GCONV_PATH"},
        {"LOCPATH=/app/locale", "LOCPATH"},
        {"TZDIR=/app", "TZDIR"},
        {"TZ=/app/tz", "TZ"},
        {"TZ=:/app/tz", "TZ"},
        {"TZ=../../app/tz", "TZ"},
        {"OPENSSL_CONF=/app/o.cnf", "OPENSSL_CONF"},
        {"OPENSSL_MODULES=/app", "OPENSSL_MODULES"},
        {"OPENSSL_ENGINES=/app", "OPENSSL_ENGINES"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(!ok(bad[i][0]), "%s allowed a zygote", bad[i][0]);
        ck_assert_str_eq(why, bad[i][1]);
    }
}
END_TEST

START_TEST(long_name_is_cut) {
    ck_assert(!ok("LD_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=1"));
    ck_assert_uint_eq(strlen(why), sizeof(why) - 1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("zygote_env");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, plain_environment_allows);
    tcase_add_test(tc, loaders_refuse);
    tcase_add_test(tc, long_name_is_cut);
    suite_add_tcase(s, tc);
    return ipb_run_suite(s);
}
