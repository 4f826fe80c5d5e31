/* Unit tests for --python's environment: pyvenv.cfg and prefixes (policy/pyenv.c), resolution
 * on real files (supervisor/pyhost.c), and the binds in the mount plan. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_suite.h"
#include "mountplan.h"
#include "options.h"
#include "pyenv.h"
#include "pyhost.h"
#include "tree.h"

static char *home_of(const char *text, ipb_error **err) {
    char *h = NULL;
    if (ipb_pyvenv_home(text, strlen(text), "pyvenv.cfg", &h, err) < 0)
        return NULL;
    return h;
}

START_TEST(pyvenv_home_as_python_reads_it) {
    ipb_error *err = NULL;
    char *h = home_of("home = /usr/bin\ninclude-system-site-packages = true\nversion = 3.11.2\n", &err);
    ck_assert_str_eq(h, "/usr/bin");
    free(h);
    /* Case and blanks around the key, blanks and a trailing '/' around the value, CRLF. */
    h = home_of("version=3.12\r\n  HOME\t=\t/opt/py/bin/ \r\n", &err);
    ck_assert_str_eq(h, "/opt/py/bin");
    free(h);
    /* The first home wins; a line without '=' is skipped. */
    h = home_of("just words\nhome=/a/bin\nhome=/b/bin\n", &err);
    ck_assert_str_eq(h, "/a/bin");
    free(h);
    /* A value may hold '='. */
    h = home_of("home = /x=y/bin", &err);
    ck_assert_str_eq(h, "/x=y/bin");
    free(h);
    ck_assert_ptr_null(err);
}
END_TEST

START_TEST(pyvenv_home_refusals) {
    static const char *const bad[] = {
        "version = 3.11\n",      /* no home */
        "homes = /usr/bin\n",    /* another key */
        "home = usr/bin\n",      /* relative */
        "home = /usr/../etc\n",  /* '..' */
        "home = /usr//bin\n",    /* '//' */
        "home = /usr/./bin\n",   /* '.' */
        "home = \n",             /* empty */
        "home = /usr/b\x01in\n", /* a control character */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        ipb_error *err = NULL;
        char *h = home_of(bad[i], &err);
        ck_assert_msg(!h, "accepted: %s", bad[i]);
        ck_assert_ptr_nonnull(err);
        ck_assert_ptr_nonnull(strstr(err->msg, "pyvenv.cfg"));
        ipb_error_free(err);
    }
    /* A NUL, and a file over the limit. */
    ipb_error *err = NULL;
    char *h = NULL;
    ck_assert_int_lt(ipb_pyvenv_home("home = /a\0b", 11, "p", &h, &err), 0);
    ipb_error_freep(&err);
    size_t big = IPB_PYVENV_MAX + 1;
    char *text = malloc(big);
    memset(text, '\n', big);
    memcpy(text, "home = /usr/bin\n", 16);
    ck_assert_int_lt(ipb_pyvenv_home(text, big, "p", &h, &err), 0);
    ck_assert_ptr_null(h);
    ipb_error_freep(&err);
    free(text);
}
END_TEST

START_TEST(prefix_of_bin_is_its_parent) {
    static const char *const cases[][2] = {
        {"/home/u/venv/bin", "/home/u/venv"}, {"/opt/conda/bin/", "/opt/conda"}, {"/bin", "/"}, {"/opt/py", "/opt/py"},
        {"/opt/sbin", "/opt/sbin"},           {"/opt/bin2", "/opt/bin2"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        char *p = ipb_python_prefix_of(cases[i][0]);
        ck_assert_str_eq(p, cases[i][1]);
        free(p);
    }
}
END_TEST

START_TEST(system_dirs_and_places) {
    ck_assert(ipb_python_in_system_dirs("/usr"));
    ck_assert(ipb_python_in_system_dirs("/usr/local"));
    ck_assert(ipb_python_in_system_dirs("/lib64"));
    ck_assert(!ipb_python_in_system_dirs("/usrx"));
    ck_assert(!ipb_python_in_system_dirs("/opt/conda"));
    bool inside;
    static const char *const refused[][3] = {
        {"/", "/", "cover"},
        {"/tmp/v", "/tmp", "in"},
        {"/home", "/home/appuser", "cover"},
        {"/home/appuser/v", "/home/appuser", "in"},
        {"/app", "/app", "in"},
        {"/etc/py", "/etc", "in"},
        {"/opt", "/opt/ipybox", "cover"},
        {"/var", "/var/tmp", "cover"},
        {"/proc", "/proc", "in"},
        {"/run/x", "/run", "in"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++) {
        const char *p = ipb_python_place_conflict(refused[i][0], &inside);
        ck_assert_msg(p && !strcmp(p, refused[i][1]), "%s: %s", refused[i][0], p ? p : "(fits)");
        ck_assert_int_eq(inside, !strcmp(refused[i][2], "in"));
    }
    ck_assert_ptr_null(ipb_python_place_conflict("/home/u/venv", &inside));
    ck_assert_ptr_null(ipb_python_place_conflict("/opt/conda", &inside));
    ck_assert_ptr_null(ipb_python_place_conflict("/var/lib/py", &inside));
    ck_assert_ptr_null(ipb_python_place_conflict("/tmpx", &inside));
}
END_TEST

/* ---- resolution on files: a fake tree next to this test's binary (not under /tmp, a
 * place of the sandbox's own) ---- */

static char base[PATH_MAX];

static void mk(const char *rel, const char *text, mode_t mode) {
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", base, rel);
    if (!text) {
        ck_assert_int_eq(ipb_mkdir_p(p, 0755), 0);
        return;
    }
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
}

/* Whether p is in a place the sandbox has of its own, where --python trees are refused. */
static bool in_sandbox_own(const char *p) {
    static const char *const own[] = {"/tmp", "/var/tmp", "/run", "/dev",        "/proc",
                                      "/sys", "/etc",     "/app", "/opt/ipybox", "/home/appuser"};
    for (size_t i = 0; i < sizeof(own) / sizeof(*own); i++) {
        size_t k = strlen(own[i]);
        if (!strncmp(p, own[i], k) && (p[k] == '\0' || p[k] == '/'))
            return true;
    }
    return false;
}

/* mkdir -p, each new component 0755. */
static void mkdirs(const char *path) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s", path);
    for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
        if (s)
            *s = '\0';
        ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s", p);
        if (!s)
            break;
        *s = '/';
    }
}

/* The directory beside the test binary, unless that is in one of the sandbox's own places (a
 * checkout under /tmp): then IPYBOX_TEST_SCRATCH, /var/lib/ipybox-tests (root) or
 * ~/.cache/ipybox-tests, as tests/lib/ipybox_test.py host_scratch(). */
static void scratch_dir(char *out, size_t len) {
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    ck_assert_int_gt(n, 0);
    out[n] = '\0';
    *strrchr(out, '/') = '\0';
    if (!in_sandbox_own(out))
        return;
    const char *env = getenv("IPYBOX_TEST_SCRATCH"), *home = getenv("HOME");
    if (env && *env)
        snprintf(out, len, "%s", env);
    else if (geteuid() == 0 || !home)
        snprintf(out, len, "/var/lib/ipybox-tests");
    else
        snprintf(out, len, "%s/.cache/ipybox-tests", home);
    mkdirs(out);
}

static void tree_setup(void) {
    char exe[PATH_MAX];
    scratch_dir(exe, sizeof(exe));
    ck_assert_int_lt(snprintf(base, sizeof(base), "%.*s/pyenv-unit-XXXXXX", PATH_MAX - 32, exe), (int)sizeof(base));
    ck_assert_ptr_nonnull(mkdtemp(base));
    /* A base interpreter PREFIX/bin/python3.12 and a venv made from it. */
    mk("base/bin", NULL, 0);
    mk("base/lib/python3.12", NULL, 0);
    mk("base/lib/python3.12/os.py", "# the standard library's landmark\n", 0644);
    mk("base/bin/python3.12", "#!fake\n", 0755);
    mk("home/venv/bin", NULL, 0);
    mk("home/secret", "x\n", 0600);
    char cfg[PATH_MAX * 2], link[PATH_MAX * 2], target[PATH_MAX * 2];
    snprintf(cfg, sizeof(cfg), "home = %s/base/bin\ninclude-system-site-packages = false\n", base);
    mk("home/venv/pyvenv.cfg", cfg, 0644);
    snprintf(link, sizeof(link), "%s/home/venv/bin/python", base);
    snprintf(target, sizeof(target), "%s/base/bin/python3.12", base);
    ck_assert_int_eq(symlink(target, link), 0);
    mk("home/notexec", "#!fake\n", 0644);
}

static void tree_teardown(void) { ipb_rm_rf(base); }

static int resolve(const char *rel, ipb_python_env *e, ipb_error **err) {
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", base, rel);
    memset(e, 0, sizeof(*e));
    return ipb_python_env_resolve(p, NULL, NULL, NULL, e, err);
}

START_TEST(venv_binds_its_prefix_and_its_base) {
    ipb_python_env e;
    ipb_error *err = NULL;
    ck_assert_msg(resolve("home/venv/bin/python", &e, &err) == 0, "%s", ipb_error_msg(err));
    char want[PATH_MAX * 2];
    /* Run by its venv path (that is how Python sees the venv), not its base's. */
    snprintf(want, sizeof(want), "%s/home/venv/bin/python", base);
    ck_assert_str_eq(e.exec, want);
    ck_assert_uint_eq(e.n, 2);
    snprintf(want, sizeof(want), "%s/home/venv", base);
    ck_assert_str_eq(e.prefix[0], want);
    snprintf(want, sizeof(want), "%s/base", base);
    ck_assert_str_eq(e.prefix[1], want);
    struct stat st;
    ck_assert_int_eq(stat(e.prefix[1], &st), 0);
    ck_assert_uint_eq(e.id[1].ino, (uint64_t)st.st_ino);
    ck_assert_uint_eq(e.id[1].dev, (uint64_t)st.st_dev);
    ipb_python_env_free(&e);
}
END_TEST

START_TEST(plain_interpreter_binds_its_prefix) {
    ipb_python_env e;
    ipb_error *err = NULL;
    ck_assert_msg(resolve("base/bin/python3.12", &e, &err) == 0, "%s", ipb_error_msg(err));
    ck_assert_uint_eq(e.n, 1);
    char want[PATH_MAX * 2];
    snprintf(want, sizeof(want), "%s/base", base);
    ck_assert_str_eq(e.prefix[0], want);
    ipb_python_env_free(&e);
    /* Debian's: nothing to bind, run by the name given. */
    ck_assert_int_eq(ipb_python_env_resolve("/usr/bin/python3", NULL, NULL, NULL, &e, &err), 0);
    ck_assert_uint_eq(e.n, 0);
    ck_assert_str_eq(e.exec, "/usr/bin/python3");
    ipb_python_env_free(&e);
    /* A symlink elsewhere (~/bin/python -> PREFIX/bin/python3.12): run by the real path, as
     * only the prefix is shown. */
    snprintf(want, sizeof(want), "%s/base/bin/python3.12", base);
    char link[PATH_MAX * 2];
    snprintf(link, sizeof(link), "%s/home/python", base);
    ck_assert_int_eq(symlink(want, link), 0);
    ck_assert_msg(resolve("home/python", &e, &err) == 0, "%s", ipb_error_msg(err));
    ck_assert_str_eq(e.exec, want);
    ck_assert_uint_eq(e.n, 1);
    ipb_python_env_free(&e);
    /* PREFIX/bin/python -> python3.12 in the same prefix: by the name given. */
    snprintf(link, sizeof(link), "%s/base/bin/python", base);
    ck_assert_int_eq(symlink("python3.12", link), 0);
    ck_assert_msg(resolve("base/bin/python", &e, &err) == 0, "%s", ipb_error_msg(err));
    ck_assert_str_eq(e.exec, link);
    ipb_python_env_free(&e);
}
END_TEST

START_TEST(refusals_say_why) {
    ipb_python_env e;
    ipb_error *err = NULL;
    ck_assert_int_lt(resolve("home/notexec", &e, &err), 0);
    ck_assert_ptr_nonnull(strstr(err->msg, "not an executable file"));
    ipb_error_freep(&err);
    ck_assert_int_lt(ipb_python_env_resolve("python3", NULL, NULL, NULL, &e, &err), 0);
    ck_assert_ptr_nonnull(strstr(err->msg, "must be an absolute path"));
    ipb_error_freep(&err);
    /* The base gone: the venv names it. */
    char p[PATH_MAX * 2], q[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/base", base);
    snprintf(q, sizeof(q), "%s/base-moved", base);
    ck_assert_int_eq(rename(p, q), 0);
    ck_assert_int_lt(resolve("home/venv/bin/python", &e, &err), 0);
    ck_assert_ptr_nonnull(strstr(err->msg, "which does not exist"));
    ipb_error_freep(&err);
    ck_assert_int_eq(rename(q, p), 0);
    /* A tree that holds the home (HOME given as the fake home's parent's child). */
    snprintf(p, sizeof(p), "%s/home/venv/bin/python", base);
    snprintf(q, sizeof(q), "%s/home/venv", base);
    ck_assert_int_lt(ipb_python_env_resolve(p, NULL, q, NULL, &e, &err), 0);
    ck_assert_ptr_nonnull(strstr(err->msg, "holds your home directory"));
    ipb_error_freep(&err);
    /* A tree inside the state directory. */
    ck_assert_int_lt(ipb_python_env_resolve(p, base, NULL, NULL, &e, &err), 0);
    ck_assert_ptr_nonnull(strstr(err->msg, "state directory"));
    ipb_error_freep(&err);
}
END_TEST

/* A venv's pyvenv.cfg is text that sandbox code may have rewritten (a venv in a workspace or a
 * bind): its `home` steers what is bound, so it must name an interpreter's prefix outside
 * every tree a sandbox could write. */
static void write_home(const char *home_rel) {
    char cfg[PATH_MAX * 2];
    snprintf(cfg, sizeof(cfg), "home = %s/%s\ninclude-system-site-packages = false\n", base, home_rel);
    mk("home/venv/pyvenv.cfg", cfg, 0644);
}

START_TEST(venv_home_steered_by_sandbox_code_is_refused) {
    ipb_python_env e;
    ipb_error *err = NULL;
    /* A directory of secrets, not an interpreter: never bound. */
    mk("home/dotssh", NULL, 0);
    mk("home/dotssh/id_ed25519", "key\n", 0600);
    write_home("home/dotssh");
    ck_assert_int_lt(resolve("home/venv/bin/python", &e, &err), 0);
    ck_assert_ptr_nonnull(strstr(err->msg, "holds no Python standard library"));
    ipb_error_freep(&err);
    /* Its bin/ too: the prefix would be home/dotssh. */
    mk("home/dotssh/bin", NULL, 0);
    write_home("home/dotssh/bin");
    ck_assert_int_lt(resolve("home/venv/bin/python", &e, &err), 0);
    ck_assert_ptr_nonnull(strstr(err->msg, "holds no Python standard library"));
    ipb_error_freep(&err);
    /* A real-looking prefix, but in a tree sandboxes could write. */
    write_home("base/bin");
    char tree[PATH_MAX * 2], p[PATH_MAX * 2];
    snprintf(tree, sizeof(tree), "%s/base", base);
    snprintf(p, sizeof(p), "%s/home/venv/bin/python", base);
    char *tv[] = {tree, NULL};
    ipb_strv trees = {tv, 1};
    memset(&e, 0, sizeof(e));
    ck_assert_int_lt(ipb_python_env_resolve(p, NULL, NULL, &trees, &e, &err), 0);
    ck_assert_ptr_nonnull(strstr(err->msg, "a tree that sandboxes could write"));
    ipb_error_freep(&err);
    /* The same venv, its base an interpreter's prefix elsewhere: fine. */
    snprintf(tree, sizeof(tree), "%s/home", base);
    ck_assert_msg(ipb_python_env_resolve(p, NULL, NULL, &trees, &e, &err) == 0, "%s", ipb_error_msg(err));
    ck_assert_uint_eq(e.n, 2);
    ipb_python_env_free(&e);
    /* A prefix whose library directory is lib64 (a platlibdir of lib64), or PyPy's. */
    mk("lib64base/bin", NULL, 0);
    mk("lib64base/lib64/python3.12", NULL, 0);
    mk("lib64base/lib64/python3.12/os.py", "\n", 0644);
    write_home("lib64base/bin");
    ck_assert_msg(ipb_python_env_resolve(p, NULL, NULL, &trees, &e, &err) == 0, "%s", ipb_error_msg(err));
    ipb_python_env_free(&e);
    mk("pypy/bin", NULL, 0);
    mk("pypy/lib/pypy3.10", NULL, 0);
    mk("pypy/lib/pypy3.10/os.py", "\n", 0644);
    write_home("pypy/bin");
    ck_assert_msg(ipb_python_env_resolve(p, NULL, NULL, &trees, &e, &err) == 0, "%s", ipb_error_msg(err));
    ipb_python_env_free(&e);
    /* os.py a directory, or a symlink leading out of the prefix: no landmark. */
    mk("fakeos/bin", NULL, 0);
    mk("fakeos/lib/python3.12/os.py", NULL, 0);
    write_home("fakeos/bin");
    ck_assert_int_lt(ipb_python_env_resolve(p, NULL, NULL, &trees, &e, &err), 0);
    ipb_error_freep(&err);
    mk("outlink/bin", NULL, 0);
    mk("outlink/lib/python3.12", NULL, 0);
    char lnk[PATH_MAX * 2];
    snprintf(lnk, sizeof(lnk), "%s/outlink/lib/python3.12/os.py", base);
    ck_assert_int_eq(symlink("/usr/lib/python3.11/os.py", lnk), 0);
    write_home("outlink/bin");
    ck_assert_int_lt(ipb_python_env_resolve(p, NULL, NULL, &trees, &e, &err), 0);
    ipb_error_freep(&err);
}
END_TEST

START_TEST(plan_binds_prefixes_read_only_at_their_path) {
    ipb_options o;
    ipb_options_init(&o);
    ck_assert_int_eq(ipb_options_finish(&o, "/home/u", NULL), 0);
    char *prefixes[] = {(char *)"/home/u/venv", (char *)"/opt/base"};
    ipb_file_id ids[] = {{1, 2}, {3, 4}};
    ipb_plan_input in = {.opts = &o,
                         .workspace = "/srv/ws",
                         .home = "/srv/home",
                         .n_python = 2,
                         .python_prefixes = prefixes,
                         .python_ids = ids};
    ipb_mount_plan plan = {0};
    ipb_error *err = NULL;
    ck_assert_int_eq(ipb_mount_plan_build(&in, &plan, &err), 0);
    long tmp = -1;
    for (size_t i = 0; i < plan.n; i++)
        if (!strcmp(plan.m[i].dst, "/tmp"))
            tmp = (long)i;
    ck_assert_int_ge(tmp, 0);
    for (size_t k = 0; k < 2; k++) {
        long at = -1;
        for (size_t i = 0; i < plan.n; i++)
            if (!strcmp(plan.m[i].dst, prefixes[k]))
                at = (long)i;
        ck_assert_int_gt(at, tmp);
        const ipb_mount *m = &plan.m[at];
        ck_assert_uint_eq(m->kind, IPB_MNT_BIND_RO);
        ck_assert_str_eq(m->src, prefixes[k]);
        ck_assert_uint_eq(m->flags & (IPB_MNT_USER | IPB_MNT_SAME), IPB_MNT_USER | IPB_MNT_SAME);
        ck_assert_uint_eq(m->id.dev, ids[k].dev);
        ck_assert_uint_eq(m->id.ino, ids[k].ino);
    }
    ipb_mount_plan_free(&plan);
    ipb_options_free(&o);
}
END_TEST

static Suite *pyenv_suite(void) {
    Suite *s = suite_create("pyenv");
    TCase *t = tcase_create("strings");
    tcase_add_test(t, pyvenv_home_as_python_reads_it);
    tcase_add_test(t, pyvenv_home_refusals);
    tcase_add_test(t, prefix_of_bin_is_its_parent);
    tcase_add_test(t, system_dirs_and_places);
    tcase_add_test(t, plan_binds_prefixes_read_only_at_their_path);
    suite_add_tcase(s, t);
    TCase *f = tcase_create("files");
    tcase_add_checked_fixture(f, tree_setup, tree_teardown);
    tcase_add_test(f, venv_binds_its_prefix_and_its_base);
    tcase_add_test(f, plain_interpreter_binds_its_prefix);
    tcase_add_test(f, refusals_say_why);
    tcase_add_test(f, venv_home_steered_by_sandbox_code_is_refused);
    suite_add_tcase(s, f);
    return s;
}

int main(void) { return ipb_run_suite(pyenv_suite()); }
