/* Unit tests for supervisor/files: host paths resolved beneath the allowed directories' fds
 * (reads, writes, symlinks planted or outside the granted trees, special files). The fixture:
 * files_fixture.h; workspace writes and reads: test_files.c. */
#include <check.h>
#include <string.h>

#include "files.h"
#include "files_fixture.h"
#include "hostpath.h"
#include "run_suite.h"

/* ---- host side ---- */

/* The allowed directories as a session opens them. */
static ipb_host_dirs open_dirs(const ipb_strv *dirs) {
    ipb_host_dirs d;
    char *missing = NULL;
    ipb_error *err = NULL;
    ck_assert_msg(ipb_host_dirs_open(&d, dirs, &missing, &err) == 0, "%s", ipb_error_msg(err));
    free(missing);
    return d;
}

/* Reads local_path (below top) through ipb_host_open_read; the content, or NULL with *ret_err. */
static char *read_host(const ipb_host_dirs *d, const char *path, ipb_error **ret_err) {
    static char buf[256];
    int fd = -1;
    if (ipb_host_open_read(d, path, &fd, ret_err) < 0) {
        ck_assert_int_eq(fd, -1);
        return NULL;
    }
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    ck_assert_int_ge(n, 0);
    buf[n] = '\0';
    return buf;
}

#define READ_OK(rel_or_abs, expect)                                                                                    \
    do {                                                                                                               \
        ipb_error *e_ = NULL;                                                                                          \
        char *got_ = read_host(&hd, (rel_or_abs), &e_);                                                                \
        ck_assert_msg(got_ != NULL, "reading %s: %s", (rel_or_abs), ipb_error_msg(e_));                                \
        ck_assert_str_eq(got_, (expect));                                                                              \
    } while (0)

#define READ_FAILS(rel_or_abs, needle)                                                                                 \
    do {                                                                                                               \
        ipb_error *e_ = NULL;                                                                                          \
        ck_assert_msg(read_host(&hd, (rel_or_abs), &e_) == NULL, "reading %s worked", (rel_or_abs));                   \
        ck_assert_msg(strstr(ipb_error_msg(e_), (needle)) != NULL, "reading %s: message lacks '%s': %s", (rel_or_abs), \
                      (needle), ipb_error_msg(e_));                                                                    \
        ipb_error_free(e_);                                                                                            \
    } while (0)

static int write_host(const ipb_host_dirs *d, const char *path, const char *data, const ipb_commit_gate *gate,
                      ipb_error **ret_err) {
    int pf[2];
    ck_assert_int_eq(pipe(pf), 0);
    ck_assert_int_eq(write(pf[1], data, strlen(data)), (ssize_t)strlen(data));
    close(pf[1]);
    int r = ipb_host_write_from(d, path, pf[0], gate, ret_err);
    close(pf[0]);
    return r;
}

#define WRITE_OK(path, data)                                                                                           \
    do {                                                                                                               \
        ipb_error *e_ = NULL;                                                                                          \
        ck_assert_msg(write_host(&hd, (path), (data), NULL, &e_) == 0, "writing %s: %s", (path), ipb_error_msg(e_));   \
    } while (0)

#define WRITE_FAILS(path, needle)                                                                                      \
    do {                                                                                                               \
        ipb_error *e_ = NULL;                                                                                          \
        ck_assert_msg(write_host(&hd, (path), "data", NULL, &e_) < 0, "writing %s worked", (path));                    \
        ck_assert_msg(strstr(ipb_error_msg(e_), (needle)) != NULL, "writing %s: message lacks '%s': %s", (path),       \
                      (needle), ipb_error_msg(e_));                                                                    \
        ipb_error_free(e_);                                                                                            \
    } while (0)

static char pbuf[8][PATH_MAX];
static int pnext;
/* top/rel, in one of a few rotating buffers. */
static const char *P(const char *rel) {
    char *b = pbuf[pnext++ % 8];
    p(b, rel);
    return b;
}

static ipb_host_dirs hd;

static void host_setup(void) {
    setup();
    hd = open_dirs(&allowed);
}

static void host_teardown(void) {
    ipb_host_dirs_free(&hd);
    teardown();
}

START_TEST(host_read_inside_and_outside) {
    put_file("allowed/in.txt", "ok");
    put_file("outside/out.txt", "no");
    READ_OK(P("allowed/in.txt"), "ok");
    READ_OK(P("allowed//./in.txt"), "ok");
    /* '..' is resolved by the kernel (where it leads is only a hint), then opened beneath */
    READ_OK(P("allowed/../allowed/./in.txt"), "ok");
    ck_assert_int_eq(mkdir(P("allowed/sub"), 0755), 0);
    READ_OK(P("allowed/sub/../in.txt"), "ok");
    READ_FAILS(P("outside/out.txt"), "is outside the allowed directories");
    READ_FAILS(P("outside/out.txt"), "--allowed-dir");
    READ_FAILS(P("allowed/../outside/out.txt"), "is outside the allowed directories");
    READ_FAILS("relative/in.txt", "must be an absolute host path");
    READ_FAILS(P("allowed/missing"), "file not found");
    READ_FAILS(P("allowed"), "is not a regular file (it is a directory)");
    READ_FAILS(P("allowed/sub"), "is not a regular file (it is a directory)");
    READ_FAILS(P("allowed/in.txt/x"), "not a directory");
}
END_TEST

static void mkdir_p(const char *rel) { ck_assert_int_eq(mkdir(P(rel), 0755), 0); }

START_TEST(host_read_symlinks) {
    mkdir_p("allowed/real");
    put_file("allowed/real/f.txt", "real");
    put_file("outside/out.txt", "secret");
    /* links that stay beneath the allowed directory work: relative, absolute, last component */
    ck_assert_int_eq(symlink("real", P("allowed/rel-link")), 0);
    READ_OK(P("allowed/rel-link/f.txt"), "real");
    link_to("allowed/real", "allowed/abs-link");
    READ_OK(P("allowed/abs-link/f.txt"), "real");
    ck_assert_int_eq(symlink("real/f.txt", P("allowed/flink")), 0);
    READ_OK(P("allowed/flink"), "real");
    link_to("allowed/real/f.txt", "allowed/abs-flink");
    READ_OK(P("allowed/abs-flink"), "real");
    /* links that lead outside are refused by the kernel (EXDEV), and the message says which */
    link_to("outside", "allowed/out");
    READ_FAILS(P("allowed/out/out.txt"), "leads outside the allowed directory");
    READ_FAILS(P("allowed/out/out.txt"), "a symlink, ");
    READ_FAILS(P("allowed/out/out.txt"), "/allowed/out (to '");
    ck_assert_int_eq(symlink("../outside", P("allowed/up")), 0);
    READ_FAILS(P("allowed/up/out.txt"), "leads outside the allowed directory");
    link_to("outside/out.txt", "allowed/to_secret");
    READ_FAILS(P("allowed/to_secret"), "leads outside the allowed directory");
    ck_assert_int_eq(symlink("real/../../outside/out.txt", P("allowed/dotdot-link")), 0);
    READ_FAILS(P("allowed/dotdot-link"), "leads outside the allowed directory");
    /* a link from one allowed directory into another is followed */
    ipb_strv two = {0};
    ipb_strv_push(&two, P("allowed"));
    ipb_strv_push(&two, P("outside"));
    ipb_host_dirs both = open_dirs(&two);
    ipb_error *e = NULL;
    char *got = read_host(&both, P("allowed/to_secret"), &e);
    ck_assert_msg(got != NULL, "%s", ipb_error_msg(e));
    ck_assert_str_eq(got, "secret");
    ipb_host_dirs_free(&both);
    ipb_strv_free(&two);
}
END_TEST

START_TEST(host_read_special_files) {
    ck_assert_int_eq(mkfifo(P("allowed/fifo"), 0600), 0);
    /* refused without waiting for a writer (the test's timeout would catch a hang) */
    READ_FAILS(P("allowed/fifo"), "is not a regular file (it is a FIFO)");
    /* a device is refused */
    ipb_strv devs = {0};
    ipb_strv_push(&devs, "/dev");
    ipb_host_dirs dd = open_dirs(&devs);
    ipb_error *e = NULL;
    ck_assert_ptr_null(read_host(&dd, "/dev/null", &e));
    ck_assert_msg(strstr(ipb_error_msg(e), "is not a regular file (it is a character device)"), "%s", ipb_error_msg(e));
    ipb_error_free(e);
    ipb_host_dirs_free(&dd);
    ipb_strv_free(&devs);
    /* and a link to one, or out of the directory at all */
    ck_assert_int_eq(symlink("/dev/null", P("allowed/null")), 0);
    READ_FAILS(P("allowed/null"), "leads outside the allowed directory");
    /* /proc magic links are refused */
    ck_assert_int_eq(symlink("/proc/self/root/etc/hostname", P("allowed/magic")), 0);
    READ_FAILS(P("allowed/magic"), "leads outside");
}
END_TEST

START_TEST(host_write_creates_parents) {
    WRITE_OK(P("allowed/a/b/c/out.txt"), "downloaded");
    ck_assert_str_eq(content_of("allowed/a/b/c/out.txt"), "downloaded");
    WRITE_OK(P("allowed/a/b/c/out.txt"), "again"); /* replaces */
    ck_assert_str_eq(content_of("allowed/a/b/c/out.txt"), "again");
    WRITE_OK(P("allowed/top.txt"), "top");
    ck_assert_str_eq(content_of("allowed/top.txt"), "top");
    WRITE_OK(P("allowed//x/./y.txt"), "y");
    ck_assert_str_eq(content_of("allowed/x/y.txt"), "y");
    struct stat st;
    ck_assert_int_eq(lstat(P("allowed/a/b"), &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    /* '..' where the directories exist is resolved first */
    WRITE_OK(P("allowed/a/../dd.txt"), "dd");
    ck_assert_str_eq(content_of("allowed/dd.txt"), "dd");
    assert_clean();
}
END_TEST

START_TEST(host_write_refusals) {
    WRITE_FAILS(P("outside/x.txt"), "is outside the allowed directories");
    WRITE_FAILS(P("allowed/../outside/x.txt"), "is outside the allowed directories");
    WRITE_FAILS(P("allowed/new/../../outside/x.txt"), "'..' after a directory that does not exist");
    link_to("outside", "allowed/out-link");
    WRITE_FAILS(P("allowed/out-link/x.txt"), "leads outside the allowed directory");
    WRITE_FAILS(P("allowed/out-link/deeper/x.txt"), "leads outside the allowed directory");
    ck_assert_int_eq(symlink("../outside", P("allowed/up")), 0);
    WRITE_FAILS(P("allowed/up/x.txt"), "leads outside the allowed directory");
    WRITE_FAILS(P("allowed/dir/"), "must name a file");
    WRITE_FAILS(P("allowed/dir/."), "must name a file");
    WRITE_FAILS(P("allowed/dir/.."), "must name a file");
    WRITE_FAILS(P("allowed"), "is an allowed directory itself");
    WRITE_FAILS("rel/x", "must be an absolute host path");
    WRITE_FAILS("", "must be an absolute host path");
    WRITE_FAILS("/", "must name a file");
    mkdir_p("allowed/adir");
    put_file("allowed/adir/keep", "k");
    WRITE_FAILS(P("allowed/adir"), "is a directory; name a file");
    ck_assert_str_eq(content_of("allowed/adir/keep"), "k");
    put_file("allowed/plain", "p");
    WRITE_FAILS(P("allowed/plain/x"), "is not a directory");
    ck_assert(!exists("outside/x.txt"));
    ck_assert(!exists("outside/deeper"));
    ck_assert(!exists("allowed/dir"));
    ck_assert(!exists("allowed/new"));
    assert_clean();
}
END_TEST

START_TEST(host_write_symlinks) {
    /* the last component: a symlink there is replaced, never written through */
    link_to("outside/created-by-link", "allowed/dangling");
    WRITE_OK(P("allowed/dangling"), "data");
    ck_assert(!exists("outside/created-by-link"));
    struct stat st;
    ck_assert_int_eq(lstat(P("allowed/dangling"), &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    put_file("outside/victim", "v");
    link_to("outside/victim", "allowed/file-link");
    WRITE_OK(P("allowed/file-link"), "new");
    ck_assert_str_eq(content_of("outside/victim"), "v");
    /* a dangling symlink as a directory: its target is not created, inside or outside */
    link_to("outside/newdir", "allowed/ddir");
    WRITE_FAILS(P("allowed/ddir/f.txt"), "leads outside the allowed directory");
    ck_assert(!exists("outside/newdir"));
    ck_assert_int_eq(symlink("nowhere", P("allowed/rdd")), 0);
    WRITE_FAILS(P("allowed/rdd/f.txt"), "is a symlink to nowhere");
    ck_assert(!exists("allowed/nowhere"));
    /* directory links that stay beneath work, relative or absolute */
    mkdir_p("allowed/real");
    ck_assert_int_eq(symlink("real", P("allowed/rel-link")), 0);
    WRITE_OK(P("allowed/rel-link/new/w.txt"), "w");
    ck_assert_str_eq(content_of("allowed/real/new/w.txt"), "w");
    link_to("allowed/real", "allowed/abs-link");
    WRITE_OK(P("allowed/abs-link/sub/w2.txt"), "w2");
    ck_assert_str_eq(content_of("allowed/real/sub/w2.txt"), "w2");
    assert_clean();
}
END_TEST

static int gate_calls;
static bool gate_no(void *ud) {
    gate_calls++;
    return false;
}
static bool gate_yes(void *ud) {
    gate_calls++;
    return true;
}

START_TEST(host_write_leaves_nothing_on_failure) {
    /* abandoned at the last moment: the temporary file is removed, the target untouched */
    put_file("allowed/existing", "before");
    ipb_commit_gate no = {gate_no, NULL}, yes = {gate_yes, NULL};
    ipb_error *e = NULL;
    gate_calls = 0;
    ck_assert_int_lt(write_host(&hd, P("allowed/existing"), "after", &no, &e), 0);
    ck_assert_msg(strstr(ipb_error_msg(e), "abandoned"), "%s", ipb_error_msg(e));
    ipb_error_free(e);
    e = NULL;
    ck_assert_int_eq(gate_calls, 1);
    ck_assert_str_eq(content_of("allowed/existing"), "before");
    ck_assert_int_lt(write_host(&hd, P("allowed/n/new"), "after", &no, &e), 0);
    ipb_error_free(e);
    e = NULL;
    ck_assert(!exists("allowed/n/new"));
    assert_clean();
    /* a source that fails to read */
    int bad = open(P("outside"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_lt(ipb_host_write_from(&hd, P("allowed/existing"), bad, NULL, &e), 0);
    ipb_error_free(e);
    e = NULL;
    close(bad);
    ck_assert_str_eq(content_of("allowed/existing"), "before");
    assert_clean();
    /* the gate is asked once, then the file is in place */
    gate_calls = 0;
    ck_assert_int_eq(write_host(&hd, P("allowed/existing"), "after", &yes, &e), 0);
    ck_assert_int_eq(gate_calls, 1);
    ck_assert_str_eq(content_of("allowed/existing"), "after");
    /* the workspace side asks the same gate */
    int pf[2];
    ck_assert_int_eq(pipe(pf), 0);
    ck_assert_int_eq(write(pf[1], "x", 1), 1);
    close(pf[1]);
    ck_assert_int_lt(ipb_ws_copy_in(wsfd, "gated.txt", pf[0], &no, &e), 0);
    ipb_error_free(e);
    close(pf[0]);
    ck_assert(!exists("ws/gated.txt"));
    assert_clean();
}
END_TEST

START_TEST(host_missing_allowed_dir) {
    ipb_strv dirs = {0};
    ipb_strv_push(&dirs, P("allowed"));
    ipb_strv_push(&dirs, P("later"));
    ipb_host_dirs d;
    char *missing = NULL;
    ipb_error *e = NULL;
    ck_assert_int_eq(ipb_host_dirs_open(&d, &dirs, &missing, &e), 0);
    ck_assert_ptr_nonnull(missing);
    ck_assert_msg(strstr(missing, P("later")) && strstr(missing, "No such file"), "%s", missing);
    free(missing);
    /* created after the start: still not used, and not looked up by name */
    mkdir_p("later");
    put_file("later/f", "x");
    ck_assert_int_lt(write_host(&d, P("later/new.txt"), "data", NULL, &e), 0);
    ck_assert_msg(strstr(ipb_error_msg(e), "could not be opened when the session started"), "%s", ipb_error_msg(e));
    ipb_error_free(e);
    e = NULL;
    ck_assert(!exists("later/new.txt"));
    ck_assert_ptr_null(read_host(&d, P("later/f"), &e));
    ck_assert_msg(strstr(ipb_error_msg(e), "could not be opened when the session started"), "%s", ipb_error_msg(e));
    ipb_error_free(e);
    e = NULL;
    ck_assert_ptr_null(read_host(&d, P("later/none"), &e));
    ck_assert_msg(strstr(ipb_error_msg(e), "could not be opened when the session started"), "%s", ipb_error_msg(e));
    ipb_error_free(e);
    ipb_host_dirs_free(&d);
    ipb_strv_free(&dirs);
}
END_TEST

START_TEST(host_allowed_dir_rules) {
    /* a sibling whose name extends the allowed directory's is outside */
    mkdir_p("allowed2");
    put_file("allowed2/f", "x");
    READ_FAILS(P("allowed2/f"), "outside the allowed directories");
    /* an allowed directory given through a symlink: paths by either name work */
    ipb_strv via = {0};
    link_to("allowed", "allowed-link");
    ipb_strv_push(&via, P("allowed-link/"));
    put_file("allowed/g", "y");
    ipb_host_dirs vd = open_dirs(&via);
    ipb_error *e = NULL;
    ck_assert_msg(read_host(&vd, P("allowed/g"), &e), "%s", ipb_error_msg(e));
    ck_assert_msg(read_host(&vd, P("allowed-link/g"), &e), "%s", ipb_error_msg(e));
    /* a copy has fds of its own */
    ipb_host_dirs copy;
    ck_assert_int_eq(ipb_host_dirs_dup(&vd, &copy, &e), 0);
    ck_assert_int_ne(copy.v[0].fd, vd.v[0].fd);
    ipb_host_dirs_free(&vd);
    ck_assert_msg(read_host(&copy, P("allowed/g"), &e), "%s", ipb_error_msg(e));
    ipb_host_dirs_free(&copy);
    ipb_strv_free(&via);
    /* no allowed directories: nothing is allowed */
    ipb_strv none = {0};
    ipb_host_dirs nd = open_dirs(&none);
    ck_assert_ptr_null(read_host(&nd, P("allowed/g"), &e));
    ck_assert_msg(strstr(ipb_error_msg(e), "outside the allowed directories (none)"), "%s", ipb_error_msg(e));
    ipb_error_free(e);
    ipb_host_dirs_free(&nd);
}
END_TEST

/* Records rel (below top) in the state directory's `granted`, as a session that bound it
 * into a sandbox would have. */
static void grant(const char *rel) {
    char path[PATH_MAX];
    p(path, "state/ipybox");
    mkdir(path, 0700);
    p(path, "state/ipybox/granted");
    FILE *f = fopen(path, "a");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s%c", P(rel), 0);
    fclose(f);
}

#define PLANTED "inside a directory that a sandbox could write"

START_TEST(host_planted_links_refused) {
    /* allowed/ws was a workspace: kernel code may have left links there */
    mkdir_p("allowed/ws");
    mkdir_p("allowed/ws/sub");
    mkdir_p("allowed/secret");
    mkdir_p("allowed/hostdir");
    put_file("allowed/secret/key", "SECRET");
    put_file("allowed/ws/plain.txt", "plain");
    grant("allowed/ws");
    link_to("allowed/secret/key", "allowed/ws/data.csv");
    ck_assert_int_eq(symlink("../secret/key", P("allowed/ws/rel.csv")), 0);
    ck_assert_int_eq(symlink("../../secret/key", P("allowed/ws/sub/deep.csv")), 0);
    link_to("allowed/hostdir", "allowed/ws/dir");
    ck_assert_int_eq(symlink("sub", P("allowed/ws/inner")), 0); /* even one that stays inside */
    /* reading: the file itself, relative or absolute, at any depth of the tree */
    READ_FAILS(P("allowed/ws/data.csv"), PLANTED);
    READ_FAILS(P("allowed/ws/data.csv"), "the way there passes through the symlink");
    READ_FAILS(P("allowed/ws/data.csv"), "kernel code may have planted it");
    char named[PATH_MAX + 32];
    snprintf(named, sizeof(named), "symlink %s,", P("allowed/ws/data.csv"));
    READ_FAILS(P("allowed/ws/data.csv"), named);
    READ_FAILS(P("allowed/ws/rel.csv"), PLANTED);
    READ_FAILS(P("allowed/ws/sub/deep.csv"), PLANTED);
    READ_FAILS(P("allowed/ws/dir/anything"), PLANTED);
    READ_FAILS(P("allowed/ws/inner/x"), PLANTED);
    READ_OK(P("allowed/ws/plain.txt"), "plain");
    /* through '..' or another name the same walk decides */
    READ_FAILS(P("allowed/ws/sub/../data.csv"), PLANTED);
    ck_assert_int_eq(symlink("ws", P("allowed/ws-by-link")), 0); /* the user's own link, outside the tree */
    READ_FAILS(P("allowed/ws-by-link/data.csv"), PLANTED);
    READ_OK(P("allowed/ws-by-link/plain.txt"), "plain");
    /* writing: a directory on the way is never followed, nothing is written or made there */
    WRITE_FAILS(P("allowed/ws/dir/authorized_keys"), PLANTED);
    snprintf(named, sizeof(named), "symlink %s,", P("allowed/ws/dir"));
    WRITE_FAILS(P("allowed/ws/dir/authorized_keys"), named);
    WRITE_FAILS(P("allowed/ws/dir/new/x"), PLANTED);
    WRITE_FAILS(P("allowed/ws/sub/../dir/x"), PLANTED);
    WRITE_FAILS(P("allowed/ws-by-link/dir/x"), PLANTED);
    ck_assert(!exists("allowed/hostdir/authorized_keys"));
    ck_assert(!exists("allowed/hostdir/new"));
    ck_assert(!exists("allowed/hostdir/x"));
    /* a symlink at the destination itself is replaced, not followed */
    WRITE_OK(P("allowed/ws/data.csv"), "replaced");
    ck_assert_str_eq(content_of("allowed/secret/key"), "SECRET");
    struct stat st;
    ck_assert_int_eq(lstat(P("allowed/ws/data.csv"), &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_str_eq(content_of("allowed/ws/data.csv"), "replaced");
    /* real directories of the tree are fine */
    WRITE_OK(P("allowed/ws/sub/new/out.txt"), "o");
    ck_assert_str_eq(content_of("allowed/ws/sub/new/out.txt"), "o");
    assert_clean();
}
END_TEST

START_TEST(host_links_outside_trees_followed) {
    mkdir_p("allowed/ws");
    mkdir_p("allowed/secret");
    mkdir_p("allowed/hostdir");
    put_file("allowed/secret/key", "SECRET");
    grant("allowed/ws");
    /* the same links, outside every tree a sandbox could write: the user's own, followed */
    link_to("allowed/secret/key", "allowed/data.csv");
    ck_assert_int_eq(symlink("secret/key", P("allowed/rel.csv")), 0);
    link_to("allowed/hostdir", "allowed/dir");
    READ_OK(P("allowed/data.csv"), "SECRET");
    READ_OK(P("allowed/rel.csv"), "SECRET");
    WRITE_OK(P("allowed/dir/sub/x"), "x");
    ck_assert_str_eq(content_of("allowed/hostdir/sub/x"), "x");
    /* into a tree and on: only links inside it are refused */
    put_file("allowed/ws/plain.txt", "plain");
    ck_assert_int_eq(symlink("ws/plain.txt", P("allowed/to-ws")), 0);
    READ_OK(P("allowed/to-ws"), "plain");
    /* '..' applies to where a link led (the directory walked), not to its name */
    mkdir_p("allowed/real");
    mkdir_p("allowed/real/deeper");
    put_file("allowed/real/f.txt", "f");
    ck_assert_int_eq(symlink("real/deeper", P("allowed/dl")), 0);
    READ_OK(P("allowed/dl/../f.txt"), "f");
    ck_assert_int_eq(symlink("deeper/../f.txt", P("allowed/real/dotted")), 0);
    READ_OK(P("allowed/real/dotted"), "f");
    put_file("outside/x", "no");
    ck_assert_int_eq(symlink("../../..", P("allowed/real/deeper/way-up")), 0);
    READ_FAILS(P("allowed/real/deeper/way-up/outside/x"), "leads outside the allowed directory");
    READ_FAILS(P("allowed/real/../../outside/x"), "outside the allowed directories");
    /* a loop ends */
    ck_assert_int_eq(symlink("loop", P("allowed/loop")), 0);
    READ_FAILS(P("allowed/loop"), "too many levels of symlinks");
    /* a tree not recorded in the state directory, but this session's own (by identity) */
    mkdir_p("allowed/ws2");
    put_file("allowed/ws2/plain.txt", "p2");
    link_to("allowed/secret/key", "allowed/ws2/data.csv");
    READ_OK(P("allowed/ws2/data.csv"), "SECRET");
    int fd = open(P("allowed/ws2"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ipb_error *e = NULL;
    ck_assert_int_eq(ipb_host_dirs_add_sandbox_root(&hd, fd, &e), 0);
    close(fd);
    READ_FAILS(P("allowed/ws2/data.csv"), PLANTED);
    READ_OK(P("allowed/ws2/plain.txt"), "p2");
    /* a copy for a transfer keeps them */
    ipb_host_dirs copy;
    ck_assert_int_eq(ipb_host_dirs_dup(&hd, &copy, &e), 0);
    ck_assert_ptr_null(read_host(&copy, P("allowed/ws2/data.csv"), &e));
    ck_assert_msg(strstr(ipb_error_msg(e), PLANTED), "%s", ipb_error_msg(e));
    ipb_error_free(e);
    ipb_host_dirs_free(&copy);
    assert_clean();
}
END_TEST

START_TEST(host_state_dir_trees) {
    /* the state directory's sessions/ and workspaces/ count without being recorded */
    ipb_strv all = {0};
    ipb_strv_push(&all, top);
    ipb_host_dirs d = open_dirs(&all);
    char rel[64];
    mkdir_p("state/ipybox");
    static const char *const subs[] = {"sessions", "workspaces"};
    for (int i = 0; i < 2; i++) {
        snprintf(rel, sizeof(rel), "state/ipybox/%s", subs[i]);
        mkdir_p(rel);
        snprintf(rel, sizeof(rel), "state/ipybox/%s/x", subs[i]);
        mkdir_p(rel);
        snprintf(rel, sizeof(rel), "state/ipybox/%s/x/l", subs[i]);
        ck_assert_int_eq(symlink("/etc", P(rel)), 0);
        snprintf(rel, sizeof(rel), "state/ipybox/%s/x/l/hostname", subs[i]);
        ipb_error *e = NULL;
        ck_assert_ptr_null(read_host(&d, P(rel), &e));
        ck_assert_msg(strstr(ipb_error_msg(e), PLANTED), "%s", ipb_error_msg(e));
        ipb_error_free(e);
    }
    ipb_host_dirs_free(&d);
    ipb_strv_free(&all);
}
END_TEST

static Suite *files_host_suite(void) {
    Suite *s = suite_create("files_host");
    TCase *h = tcase_create("host");
    tcase_add_checked_fixture(h, host_setup, host_teardown);
    tcase_add_test(h, host_read_inside_and_outside);
    tcase_add_test(h, host_read_symlinks);
    tcase_add_test(h, host_read_special_files);
    tcase_add_test(h, host_write_creates_parents);
    tcase_add_test(h, host_write_refusals);
    tcase_add_test(h, host_write_symlinks);
    tcase_add_test(h, host_write_leaves_nothing_on_failure);
    tcase_add_test(h, host_missing_allowed_dir);
    tcase_add_test(h, host_allowed_dir_rules);
    tcase_add_test(h, host_planted_links_refused);
    tcase_add_test(h, host_links_outside_trees_followed);
    tcase_add_test(h, host_state_dir_trees);
    suite_add_tcase(s, h);
    return s;
}

int main(void) { return ipb_run_suite(files_host_suite()); }
