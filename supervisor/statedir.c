#include "statedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "hostpath.h"
#include "strbuf.h"
#include "tmpmark.h"
#include "tree.h"
#include "treehold.h"
#include "wsname.h"

int ipb_state_dir(char **ret, ipb_error **err) {
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char *p = NULL;
    int r;
    if (xdg && xdg[0] == '/')
        r = asprintf(&p, "%s/ipybox", xdg);
    else if (home && home[0] == '/')
        r = asprintf(&p, "%s/.local/state/ipybox", home);
    else
        return ipb_error_set(err, 0,
                             "neither XDG_STATE_HOME nor HOME is set to an absolute path; "
                             "set one so that ipybox has a place for session state");
    if (r < 0)
        return ipb_error_set(err, ENOMEM, "state directory");
    if ((r = ipb_mkdir_p(p, 0700)) < 0) {
        ipb_error_set(err, -r, "creating the state directory %s", p);
        free(p);
        return -1;
    }
    *ret = p;
    return 0;
}

/* ---- paths the user names, and the trees sandbox code could write ----
 * A workspace or a --container-bind source is bound read-write into a sandbox; when the session
 * ends, what the kernel left there stays, symlinks included. A path the user names later
 * (another --workspace, a bind source, an --mcp-config) that runs through such a directory
 * must not be steered by those symlinks. The canonical paths of every tree granted so are
 * kept in <state>/granted, NUL-separated, newest last; the state directory's own sessions/
 * and workspaces/ count always. */

#define GRANTED_MAX 1024

static bool path_within(const char *p, const char *tree) {
    size_t n = strlen(tree);
    while (n > 1 && tree[n - 1] == '/')
        n--;
    if (n == 1 && tree[0] == '/')
        return true;
    return !strncmp(p, tree, n) && (p[n] == '\0' || p[n] == '/');
}

int ipb_sandbox_trees(ipb_strv *ret, ipb_error **err) {
    memset(ret, 0, sizeof(*ret));
    cleanup_free char *state = NULL;
    if (ipb_state_dir(&state, err) < 0)
        return -1;
    /* Compared with canonical paths: resolve the state directory's own symlinks (if any). */
    char *canon = realpath(state, NULL);
    if (canon) {
        free(state);
        state = canon;
    }
    cleanup_free char *sessions = NULL, *workspaces = NULL, *granted = NULL;
    if (asprintf(&sessions, "%s/sessions", state) < 0 || asprintf(&workspaces, "%s/workspaces", state) < 0 ||
        asprintf(&granted, "%s/granted", state) < 0 || ipb_strv_push(ret, sessions) < 0 ||
        ipb_strv_push(ret, workspaces) < 0)
        goto oom;
    char *text = NULL;
    size_t len = 0;
    int r = ipb_read_file(granted, (size_t)GRANTED_MAX * (PATH_MAX + 1), &text, &len);
    if (r == -ENOENT)
        return 0;
    if (r < 0) {
        ipb_strv_free(ret);
        return ipb_error_set(err, -r, "reading %s", granted);
    }
    for (size_t i = 0; i < len;) {
        size_t n = strnlen(text + i, len - i);
        if (i + n < len && n > 1 && text[i] == '/' && ipb_strv_push(ret, text + i) < 0) {
            free(text);
            goto oom;
        }
        i += n + 1;
    }
    free(text);
    return 0;
oom:
    ipb_strv_free(ret);
    return ipb_error_set(err, ENOMEM, "the list of trees given to sandboxes");
}

/* Adds canon to <state>/granted unless trees holds it already; past GRANTED_MAX entries the
 * file is rewritten with the newest. Best effort: a failure only forgets a tree. */
static void granted_add(const char *state, ipb_strv *trees, const char *canon) {
    for (size_t i = 0; i < trees->n; i++)
        if (!strcmp(trees->v[i], canon))
            return;
    if (ipb_strv_push(trees, canon) < 0)
        return;
    cleanup_free char *path = NULL;
    if (asprintf(&path, "%s/granted", state) < 0)
        return;
    if (trees->n - 2 <= GRANTED_MAX) {
        cleanup_close int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
            (void)ipb_write_all(fd, canon, strlen(canon) + 1);
        return;
    }
    ipb_buf b = {0};
    for (size_t i = trees->n - GRANTED_MAX; i < trees->n; i++)
        ipb_buf_append(&b, trees->v[i], strlen(trees->v[i]) + 1);
    cleanup_free char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp-%d", path, (int)getpid()) >= 0 && ipb_write_file(tmp, b.data, b.len, 0600) == 0 &&
        rename(tmp, path) < 0)
        unlink(tmp);
    ipb_buf_free(&b);
}

int ipb_path_planted_symlink(const ipb_strv *trees, const char *path, char **ret_link) {
    *ret_link = NULL;
    if (path[0] != '/')
        return 0;
    /* rest: what is left to resolve; canon: what is resolved ("" is the root). */
    char rest[2 * PATH_MAX], canon[PATH_MAX] = "", link[PATH_MAX];
    if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
        return 0;
    int links = 0;
    char *p = rest;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *end = strchrnul(p, '/');
        size_t clen = (size_t)(end - p);
        if (clen == 1 && p[0] == '.') {
            p = end;
            continue;
        }
        if (clen == 2 && p[0] == '.' && p[1] == '.') {
            char *slash = strrchr(canon, '/');
            if (slash)
                *slash = '\0';
            p = end;
            continue;
        }
        size_t cl = strlen(canon);
        if (cl + 1 + clen >= sizeof(canon))
            return 0; /* too long to resolve: the open will say so */
        char cand[PATH_MAX];
        memcpy(cand, canon, cl);
        cand[cl] = '/';
        memcpy(cand + cl + 1, p, clen);
        cand[cl + 1 + clen] = '\0';
        struct stat st;
        if (lstat(cand, &st) < 0)
            return 0; /* missing (made later, without symlinks) or unreachable */
        if (!S_ISLNK(st.st_mode)) {
            memcpy(canon, cand, strlen(cand) + 1);
            p = end;
            continue;
        }
        const char *parent = canon[0] ? canon : "/";
        for (size_t i = 0; i < trees->n; i++)
            if (path_within(parent, trees->v[i])) {
                *ret_link = strdup(cand);
                return *ret_link ? 1 : -1;
            }
        if (++links > 40)
            return 0; /* ELOOP for the open */
        ssize_t n = readlink(cand, link, sizeof(link) - 1);
        if (n <= 0)
            return 0;
        link[n] = '\0';
        /* The link's target, then what followed it. */
        char next[2 * PATH_MAX];
        if (snprintf(next, sizeof(next), "%s%s", link, end) >= (int)sizeof(next))
            return 0;
        memcpy(rest, next, strlen(next) + 1);
        p = rest;
        if (link[0] == '/')
            canon[0] = '\0';
    }
    return 0;
}

/* Refuses a path the user named when resolving it meets a symlink inside a tree that sandbox
 * code could write. */
static int check_named_path(const ipb_strv *trees, const char *what, const char *path, ipb_error **err) {
    cleanup_free char *link = NULL, *abs = NULL;
    if (path[0] != '/') {
        cleanup_free char *cwd = getcwd(NULL, 0);
        if (!cwd || asprintf(&abs, "%s/%s", cwd, path) < 0)
            return 0; /* the open will resolve it, or fail, itself */
    }
    int r = ipb_path_planted_symlink(trees, abs ? abs : path, &link);
    if (r < 0)
        return ipb_error_set(err, ENOMEM, "%s", what);
    if (r == 0)
        return 0;
    return ipb_error_set(err, 0,
                         "%s %s: the way there passes through the symlink %s, inside a directory that a "
                         "sandbox could write (a workspace or a bind of this or an earlier session); ipybox "
                         "does not follow such a symlink, since kernel code may have planted it: name the "
                         "real path, or remove the symlink",
                         what, path, link);
}

static int check_named_paths(const ipb_options *o, const ipb_strv *trees, ipb_error **err) {
    if (o->workspace && !ipb_workspace_is_name(o->workspace) &&
        check_named_path(trees, "--workspace", o->workspace, err) < 0)
        return -1;
    for (size_t i = 0; i < o->n_binds; i++)
        if (check_named_path(trees, "--container-bind", o->binds[i].host, err) < 0)
            return -1;
    for (size_t i = 0; i < o->env_files.n; i++)
        if (check_named_path(trees, "--container-env-file", o->env_files.v[i], err) < 0)
            return -1;
    if (o->mcp_config && check_named_path(trees, "--mcp-config", o->mcp_config, err) < 0)
        return -1;
    if (o->rootfs && check_named_path(trees, "--rootfs", o->rootfs, err) < 0)
        return -1;
    if (o->home_dir && check_named_path(trees, "--home", o->home_dir, err) < 0)
        return -1;
    return 0;
}

static int file_id(int fd, ipb_file_id *ret, const char *what, const char *path, ipb_error **err) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return ipb_error_set(err, errno, "%s %s", what, path);
    ret->dev = (uint64_t)st.st_dev;
    ret->ino = (uint64_t)st.st_ino;
    return 0;
}

/* The user's variables in order, each --container-env-file's entries (options.c read it by
 * name while parsing, for early syntax errors) replaced by what reading it now through the
 * walk gives: that is what the sandbox gets. */
static int session_env(const ipb_options *o, ipb_strv *ret, ipb_error **err) {
    ipb_strv env = {0};
    size_t f = 0;
    for (size_t i = 0; i <= o->env.n; i++) {
        while (f < o->env_files.n && o->env_spans[f].start == i) {
            cleanup_free char *text = NULL;
            size_t len = 0;
            const char *path = o->env_files.v[f];
            int r = ipb_host_named_read("--container-env-file", path, 1 << 20, &text, &len, err);
            if (r == 0 && (r = ipb_parse_env_file(text, len, path, &env, err)) < 0)
                ipb_error_wrap(err, "--container-env-file");
            if (r < 0) {
                ipb_strv_free(&env);
                return -1;
            }
            i += o->env_spans[f].n;
            f++;
        }
        if (i < o->env.n && ipb_strv_push(&env, o->env.v[i]) < 0) {
            ipb_strv_free(&env);
            return ipb_error_set(err, ENOMEM, "the sandbox environment");
        }
    }
    *ret = env;
    return 0;
}

static int sub(char **ret, const char *base, const char *name, ipb_error **err) {
    if (asprintf(ret, "%s/%s", base, name) < 0)
        return ipb_error_set(err, ENOMEM, "session directories");
    if (mkdir(*ret, 0700) < 0 && errno != EEXIST)
        return ipb_error_set(err, errno, "creating %s", *ret);
    return 0;
}

/* A tree lent to a sandbox read-write must not hold the state directory: from there its code
 * could rewrite the record of granted trees (and so the planted-symlink rule), other sessions'
 * directories, their tool packages and sockets. One of the state directory's own workspaces
 * (an earlier default /app, named again) or one MCP server's private home (`ipybox run
 * --home`) holds none of that: lendable says whether such a one is taken. A --host-dir (an
 * MCP server's allowed dir, chosen by whoever registers it) is never lendable: another
 * server's private home or another session's /app is not its to reach. canon: the tree's
 * canonical path. */
static int state_reachable(const char *what, const char *canon, const char *state, bool lendable, ipb_error **err) {
    cleanup_free char *st = realpath(state, NULL);
    if (!st || !canon)
        return 0;
    cleanup_free char *wsroot = NULL, *homes = NULL;
    if (asprintf(&wsroot, "%s/workspaces", st) < 0 || asprintf(&homes, "%s/" IPB_MCP_HOMES, st) < 0)
        return ipb_error_set(err, ENOMEM, "%s", what);
    bool holds = path_within(st, canon);
    bool inside = path_within(canon, st) && !(lendable && ((path_within(canon, wsroot) && strcmp(canon, wsroot)) ||
                                                           (path_within(canon, homes) && strcmp(canon, homes))));
    if (!holds && !inside)
        return 0;
    return ipb_error_set(err, 0,
                         "%s %s: %s ipybox's state directory %s (its sessions, workspaces, the private homes "
                         "of MCP servers and the record of trees lent to sandboxes); a sandbox must not reach "
                         "it: choose another directory",
                         what, canon, holds ? "holds" : "is inside", st);
}

int ipb_host_dir_check(const char *what, const char *path, ipb_error **err) {
    cleanup_free char *state = NULL;
    if (ipb_state_dir(&state, err) < 0)
        return -1;
    ipb_strv trees;
    if (ipb_sandbox_trees(&trees, err) < 0)
        return -1;
    int r = check_named_path(&trees, what, path, err);
    ipb_strv_free(&trees);
    if (r < 0)
        return -1;
    /* The canonical path of what exists now, else the path as written: a missing one is made
     * by `ipybox run` without following anything. */
    cleanup_free char *canon = realpath(path, NULL);
    return state_reachable(what, canon ? canon : path, state, false, err);
}

/* The workspace under <state>/workspaces: name (wsname.h; made if missing), or when NULL a
 * new unnamed one for session d->id. Only ipybox makes entries there (a session's sandbox sees
 * its own workspace only, and no tree that holds the state directory is lent to one), and
 * nothing there is followed as a symlink. */
static int state_workspace_open(const char *state, const char *name, ipb_session_dirs *d, ipb_error **err) {
    char unnamed[IPB_WS_UNNAMED_LEN + 1];
    if (!name) {
        if (ipb_workspace_unnamed_name(time(NULL), d->id, unnamed, sizeof(unnamed)) < 0)
            return ipb_error_set(err, 0, "naming the session's workspace");
        name = unnamed;
    }
    cleanup_free char *wsroot = NULL;
    if (sub(&wsroot, state, "workspaces", err) < 0)
        return -1;
    cleanup_close int rootfd = open(wsroot, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0)
        return ipb_error_set(err, errno, "opening %s", wsroot);
    bool made = mkdirat(rootfd, name, 0700) == 0;
    if (!made && errno != EEXIST)
        return ipb_error_set(err, errno, "creating the workspace %s/%s", wsroot, name);
    /* A new one named in the form ipybox gives unnamed ones would be taken for one, and a
     * plain prune would remove it (coming back to an existing unnamed one is fine). */
    char id[17];
    if (made && name != unnamed && ipb_workspace_unnamed_id(name, id, NULL)) {
        (void)unlinkat(rootfd, name, AT_REMOVEDIR);
        return ipb_error_set(err, 0,
                             "--workspace %s: that is the form of the names ipybox gives unnamed workspaces "
                             "(16 hex digits, or <UTC time>Z-<16 hex digits>), which `ipybox workspaces "
                             "prune` removes; choose another name",
                             name);
    }
    if (!(d->workspace_name = strdup(name)) || asprintf(&d->workspace, "%s/%s", wsroot, name) < 0) {
        d->workspace = NULL;
        return ipb_error_set(err, ENOMEM, "the workspace");
    }
    d->workspace_fd = openat(rootfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->workspace_fd < 0)
        return ipb_error_set(err, errno == ELOOP ? ENOTDIR : errno, "opening the workspace %s", d->workspace);
    /* As the default workspace always was (the sandbox's user needs nothing more; workspaces/
     * itself is 0700). */
    if (made) {
        cleanup_close int fd = openat(d->workspace_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0)
            (void)fchmod(fd, 0755);
    }
    d->workspace_owned = made && name == unnamed;
    return 0;
}

/* After the hold: a state workspace is still the one its name gives, and not one that
 * `ipybox workspaces prune` took away (it renames before it removes, holding it exclusively;
 * the hold waits for that, or gives up after a while: this tells). */
static int state_workspace_still_named(const char *state, const ipb_session_dirs *d, ipb_error **err) {
    if (!d->workspace_name)
        return 0;
    cleanup_free char *wsroot = NULL;
    if (asprintf(&wsroot, "%s/workspaces", state) < 0)
        return ipb_error_set(err, ENOMEM, "the workspace");
    struct stat st;
    cleanup_close int rootfd = open(wsroot, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd >= 0 && fstatat(rootfd, d->workspace_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (uint64_t)st.st_dev == d->workspace_id.dev && (uint64_t)st.st_ino == d->workspace_id.ino)
        return 0;
    return ipb_error_set(err, 0,
                         "the workspace %s was removed (by `ipybox workspaces prune`?) while the session "
                         "started; start again",
                         d->workspace);
}

/* Holds the tree at fd (canonical path canon) for the session (treehold.h). One in the state
 * directory's workspaces/ is held strictly (a prune may be about to remove it); one deeper
 * inside a workspace there also holds that workspace, strictly, in d->top_holds: the lock of
 * a directory covers only that directory, and a prune removes the workspace whole. */
static int hold_tree(ipb_session_dirs *d, const char *wsroot, int fd, const char *what, const char *canon, int *ret,
                     ipb_error **err) {
    size_t rl = wsroot ? strlen(wsroot) : 0;
    if (!wsroot || !canon || strncmp(canon, wsroot, rl) || canon[rl] != '/' || !canon[rl + 1])
        return ipb_tree_hold(fd, what, canon, ret, err);
    const char *top = canon + rl + 1;
    size_t tl = strcspn(top, "/");
    if (!top[tl])
        return ipb_tree_hold_state_workspace(fd, what, canon, ret, err);
    if (ipb_tree_hold(fd, what, canon, ret, err) < 0)
        return -1;
    char name[NAME_MAX + 1], topdir[PATH_MAX];
    if (tl > NAME_MAX || snprintf(topdir, sizeof(topdir), "%.*s", (int)(rl + 1 + tl), canon) >= (int)sizeof(topdir))
        return ipb_error_set(err, ENAMETOOLONG, "%s %s", what, canon);
    memcpy(name, top, tl);
    name[tl] = '\0';
    cleanup_close int rootfd = open(wsroot, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    cleanup_close int topfd = rootfd < 0 ? -1 : openat(rootfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (topfd < 0)
        return ipb_error_set(err, errno, "%s %s: opening the workspace %s that holds it", what, canon, topdir);
    int *v = realloc(d->top_holds, (d->n_tops + 1) * sizeof(*v));
    if (!v)
        return ipb_error_set(err, ENOMEM, "%s", what);
    d->top_holds = v;
    d->top_holds[d->n_tops] = -1;
    if (ipb_tree_hold_state_workspace(topfd, what, topdir, &d->top_holds[d->n_tops++], err) < 0)
        return -1;
    /* Held: still the one that holds the tree (a prune renames before it removes). */
    char proc[64], where[PATH_MAX];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, where, sizeof(where) - 1);
    if (n > 0)
        where[n] = '\0';
    if (n <= 0 || strncmp(where, topdir, strlen(topdir)) || where[strlen(topdir)] != '/')
        return ipb_error_set(err, 0,
                             "%s %s: the workspace %s that holds it was moved or removed (by `ipybox "
                             "workspaces prune`?) while the session started; start again",
                             what, canon, topdir);
    return 0;
}

int ipb_session_dirs_create(const ipb_options *o, bool kernel, ipb_session_dirs *ret, ipb_error **err) {
    ipb_session_dirs d;
    memset(&d, 0, sizeof(d));
    d.workspace_fd = d.rootfs_fd = d.workspace_hold = d.home_fd = -1;
    unsigned char rnd[8];
    cleanup_free char *state = NULL;
    if (ipb_random(rnd, sizeof(rnd)) < 0)
        return ipb_error_set(err, errno, "generating a session id");
    ipb_hex(rnd, sizeof(rnd), d.id);
    if (ipb_state_dir(&state, err) < 0)
        return -1;
    ipb_strv trees;
    if (ipb_sandbox_trees(&trees, err) < 0)
        return -1;
    if (check_named_paths(o, &trees, err) < 0) {
        ipb_strv_free(&trees);
        return -1;
    }
    /* The interpreter first: a wrong --python is refused before anything is made. With
     * --rootfs it names a file of that tree, as it is. */
    if (!o->rootfs && o->python && (kernel || strcmp(o->python, IPB_DEFAULT_PYTHON)) &&
        ipb_python_env_resolve(o->python, state, getenv("HOME"), &trees, &d.python, err) < 0) {
        ipb_strv_free(&trees);
        return -1;
    }
    cleanup_free char *sessions = NULL;
    if (sub(&sessions, state, "sessions", err) < 0)
        goto fail;
    if (sub(&d.base, sessions, d.id, err) < 0 || sub(&d.root, d.base, "root", err) < 0 ||
        (!o->home_dir && sub(&d.home, d.base, "home", err) < 0) ||
        (kernel && (sub(&d.run, d.base, "run", err) < 0 || sub(&d.mcp, d.base, "mcp", err) < 0)))
        goto fail;
    char pidbuf[32];
    int n = snprintf(pidbuf, sizeof(pidbuf), "%d\n", (int)getpid());
    cleanup_free char *pidfile = NULL;
    if (asprintf(&pidfile, "%s/pid", d.base) < 0 || ipb_write_file(pidfile, pidbuf, (size_t)n, 0600) < 0) {
        ipb_error_set(err, errno, "writing the session's pid file");
        goto fail;
    }
    /* Each path the user named is resolved once, from "/" on fds; from here on the fd is what
     * counts (a session running now may swap a symlink in under any name at any moment). */
    d.held = true;
    if (o->workspace && !ipb_workspace_is_name(o->workspace)) {
        /* A host directory: made when missing, but not its parents (a typo there would
         * otherwise make a tree somewhere unexpected). */
        if (ipb_host_named_open("--workspace", o->workspace, IPB_NAMED_NEW_DIR, &d.workspace_fd, &d.workspace, err) < 0)
            goto fail;
    } else if (state_workspace_open(state, o->workspace, &d, err) < 0) {
        goto fail;
    }
    if (file_id(d.workspace_fd, &d.workspace_id, "--workspace", d.workspace, err) < 0)
        goto fail;
    d.n_binds = o->n_binds;
    d.bind_fds = calloc(o->n_binds + 1, sizeof(*d.bind_fds));
    d.bind_holds = calloc(o->n_binds + 1, sizeof(*d.bind_holds));
    d.bind_ids = calloc(o->n_binds + 1, sizeof(*d.bind_ids));
    d.bind_canon = calloc(o->n_binds + 1, sizeof(*d.bind_canon));
    if (!d.bind_fds || !d.bind_holds || !d.bind_ids || !d.bind_canon) {
        ipb_error_set(err, ENOMEM, "session directories");
        goto fail;
    }
    for (size_t i = 0; i < o->n_binds; i++)
        d.bind_fds[i] = d.bind_holds[i] = -1;
    for (size_t i = 0; i < o->n_binds; i++)
        if (ipb_host_named_open("--container-bind", o->binds[i].host, IPB_NAMED_MAKE, &d.bind_fds[i], &d.bind_canon[i],
                                err) < 0 ||
            file_id(d.bind_fds[i], &d.bind_ids[i], "--container-bind", o->binds[i].host, err) < 0)
            goto fail;
    if (!d.workspace_owned && state_reachable("--workspace", d.workspace, state, true, err) < 0)
        goto fail;
    /* The --host-dir entries are the last binds (options.c). */
    for (size_t i = 0; i < o->n_binds; i++) {
        bool host_dir = i >= o->n_binds - o->n_host_dirs;
        if (state_reachable(host_dir ? "--host-dir" : "--container-bind", d.bind_canon[i], state, !host_dir, err) < 0)
            goto fail;
    }
    /* Held for the session's life; swept of a killed session's temporary files first when no
     * live session holds it (treehold.h). */
    (void)ipb_tmp_marks_open(state);
    {
        cleanup_free char *st = realpath(state, NULL), *wsroot = st ? ipb_strdupf("%s/workspaces", st) : NULL;
        /* A named one by its path under the state directory as it was made (not canonical
         * when the state directory's path has symlinks): held strictly all the same. */
        if ((d.workspace_name
                 ? ipb_tree_hold_state_workspace(d.workspace_fd, "--workspace", d.workspace, &d.workspace_hold, err)
                 : hold_tree(&d, wsroot, d.workspace_fd, "--workspace", d.workspace, &d.workspace_hold, err)) < 0 ||
            state_workspace_still_named(state, &d, err) < 0)
            goto fail;
        for (size_t i = 0; i < o->n_binds; i++)
            if (hold_tree(&d, wsroot, d.bind_fds[i], "--container-bind", d.bind_canon[i], &d.bind_holds[i], err) < 0)
                goto fail;
    }
    if (o->rootfs && ipb_host_named_open("--rootfs", o->rootfs, IPB_NAMED_DIR, &d.rootfs_fd, NULL, err) < 0)
        goto fail;
    if (o->home_dir && (ipb_host_named_open("--home", o->home_dir, IPB_NAMED_MAKE_DIR, &d.home_fd, &d.home, err) < 0 ||
                        file_id(d.home_fd, &d.home_id, "--home", o->home_dir, err) < 0 ||
                        state_reachable("--home", d.home, state, true, err) < 0))
        goto fail;
    if (session_env(o, &d.env, err) < 0)
        goto fail;
    /* From now on, kernel code may plant symlinks in these. */
    if (!d.workspace_name) /* the state's workspaces/ counts always */
        granted_add(state, &trees, d.workspace);
    for (size_t i = 0; i < o->n_binds; i++)
        granted_add(state, &trees, d.bind_canon[i]);
    if (o->home_dir)
        granted_add(state, &trees, d.home);
    ipb_strv_free(&trees);
    *ret = d;
    return 0;
fail:
    ipb_strv_free(&trees);
    ipb_session_dirs_remove(&d);
    return -1;
}

void ipb_session_dirs_remove(ipb_session_dirs *d) {
    if (d->base)
        ipb_rm_rf(d->base);
    if (d->workspace && d->workspace_owned)
        rmdir(d->workspace); /* only when empty: the user's files stay */
    /* Its last use, for `ipybox workspaces` and its prune: now (while still held). */
    if (d->workspace_name && d->held && d->workspace_hold >= 0)
        (void)futimens(d->workspace_hold, NULL);
    free(d->workspace_name);
    free(d->base);
    free(d->root);
    free(d->home);
    free(d->run);
    free(d->mcp);
    free(d->workspace);
    if (d->held) {
        if (d->workspace_fd >= 0)
            close(d->workspace_fd);
        if (d->workspace_hold >= 0)
            close(d->workspace_hold);
        if (d->rootfs_fd >= 0)
            close(d->rootfs_fd);
        if (d->home_fd >= 0)
            close(d->home_fd);
        for (size_t i = 0; d->bind_fds && i < d->n_binds; i++)
            if (d->bind_fds[i] >= 0)
                close(d->bind_fds[i]);
        for (size_t i = 0; d->bind_holds && i < d->n_binds; i++)
            if (d->bind_holds[i] >= 0)
                close(d->bind_holds[i]);
        for (size_t i = 0; i < d->n_tops; i++)
            if (d->top_holds[i] >= 0)
                close(d->top_holds[i]);
    }
    free(d->top_holds);
    for (size_t i = 0; d->bind_canon && i < d->n_binds; i++)
        free(d->bind_canon[i]);
    free(d->bind_fds);
    free(d->bind_holds);
    free(d->bind_ids);
    free(d->bind_canon);
    ipb_strv_free(&d->env);
    ipb_python_env_free(&d->python);
    memset(d, 0, sizeof(*d));
    d->workspace_fd = d->rootfs_fd = d->workspace_hold = d->home_fd = -1;
}

int ipb_session_dirs_reap_stale(void) {
    cleanup_free char *state = NULL;
    ipb_error *err = NULL;
    if (ipb_state_dir(&state, &err) < 0) {
        ipb_error_free(err);
        return 0;
    }
    cleanup_free char *sessions = NULL;
    if (asprintf(&sessions, "%s/sessions", state) < 0)
        return 0;
    DIR *dir = opendir(sessions);
    if (!dir)
        return 0;
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s/pid", sessions, de->d_name);
        char *text = NULL;
        long pid = 0;
        if (ipb_read_file(path, 64, &text, NULL) == 0) {
            pid = strtol(text, NULL, 10);
            free(text);
        }
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
            continue;
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", sessions, de->d_name);
        /* No pid file yet may mean a session being created right now. */
        if (pid <= 0 && (stat(path, &st) < 0 || st.st_mtime > time(NULL) - 60))
            continue;
        snprintf(path, sizeof(path), "%s/%s", sessions, de->d_name);
        if (ipb_rm_rf(path) == 0)
            removed++;
    }
    closedir(dir);
    /* Their default workspaces too, when empty (and any other that no session holds). */
    ipb_default_workspaces_sweep(state);
    return removed;
}
