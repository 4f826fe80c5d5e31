/* The fixture of the supervisor/files suites (test_files.c, test_files_host.c): each test works
 * in a fresh temporary directory holding ws/ (the workspace, open as wsfd), allowed/ (an allowed
 * host directory) and outside/, with a state directory of its own. */
#pragma once
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "hostpath.h"

static char top[256];
static int wsfd = -1;
static ipb_strv allowed;

static __attribute__((unused)) void p(char *out, const char *rel) {
    int n = snprintf(out, PATH_MAX, "%s/%s", top, rel);
    ck_assert(n > 0 && n < PATH_MAX);
}

static __attribute__((unused)) void setup(void) {
    const char *t = getenv("TMPDIR");
    snprintf(top, sizeof(top), "%s/ipb-unit-files-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(top));
    /* canonical, so that comparisons with resolved paths hold */
    char *canon = realpath(top, NULL);
    ck_assert_ptr_nonnull(canon);
    snprintf(top, sizeof(top), "%s", canon);
    free(canon);
    char d[PATH_MAX];
    static const char *const dirs[] = {"ws", "allowed", "outside"};
    for (int i = 0; i < 3; i++) {
        p(d, dirs[i]);
        ck_assert_int_eq(mkdir(d, 0755), 0);
    }
    /* the state directory (its `granted` lists the trees given to sandboxes): a fresh one */
    p(d, "state");
    ck_assert_int_eq(mkdir(d, 0700), 0);
    setenv("XDG_STATE_HOME", d, 1);
    p(d, "ws");
    wsfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(wsfd, 0);
    memset(&allowed, 0, sizeof(allowed));
    p(d, "allowed");
    ipb_strv_push(&allowed, d);
}

static __attribute__((unused)) void teardown(void) {
    if (wsfd >= 0)
        close(wsfd);
    wsfd = -1;
    ipb_strv_free(&allowed);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", top);
}

static __attribute__((unused)) void put_file(const char *rel, const char *content) {
    char path[PATH_MAX];
    p(path, rel);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "creating %s", path);
    fputs(content, f);
    fclose(f);
}

/* The file's content (at most 255 bytes), or NULL if it cannot be opened. */
static __attribute__((unused)) char *content_of(const char *rel) {
    static char buf[256];
    char path[PATH_MAX];
    p(path, rel);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static __attribute__((unused)) bool exists(const char *rel) {
    char path[PATH_MAX];
    struct stat st;
    p(path, rel);
    return lstat(path, &st) == 0;
}

static __attribute__((unused)) void link_to(const char *target_rel, const char *link_rel) {
    char t[PATH_MAX], l[PATH_MAX];
    p(t, target_rel);
    p(l, link_rel);
    ck_assert_int_eq(symlink(t, l), 0);
}

/* No temporary file is left anywhere below dir. */
static __attribute__((unused)) void assert_no_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        ck_assert_msg(strncmp(de->d_name, ".ipybox-tmp-", 12), "temporary file %s/%s left behind", dir, de->d_name);
        if (de->d_type == DT_DIR) {
            char sub[PATH_MAX];
            snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
            assert_no_temp_files(sub);
        }
    }
    closedir(d);
}

static __attribute__((unused)) void assert_clean(void) {
    char d[PATH_MAX];
    p(d, "ws");
    assert_no_temp_files(d);
    p(d, "allowed");
    assert_no_temp_files(d);
    p(d, "outside");
    assert_no_temp_files(d);
}

/* Runs a call that must fail and checks its message. */
#define EXPECT_FAIL(call, needle)                                                                                      \
    do {                                                                                                               \
        ipb_error *err = NULL;                                                                                         \
        int r_ = (call);                                                                                               \
        ck_assert_msg(r_ < 0, #call " succeeded");                                                                     \
        ck_assert_msg(err != NULL, #call " failed without an error");                                                  \
        ck_assert_msg(strstr(ipb_error_msg(err), (needle)) != NULL, #call ": message lacks '%s': %s", needle,          \
                      ipb_error_msg(err));                                                                             \
        ipb_error_free(err);                                                                                           \
    } while (0)

#define EXPECT_OK(call)                                                                                                \
    do {                                                                                                               \
        ipb_error *err = NULL;                                                                                         \
        int r_ = (call);                                                                                               \
        ck_assert_msg(r_ == 0, #call " failed: %s", ipb_error_msg(err));                                               \
        ipb_error_free(err);                                                                                           \
    } while (0)
