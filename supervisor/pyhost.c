#include "pyhost.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "hostpath.h"
#include "pyenv.h"
#include "strbuf.h"

void ipb_python_env_free(ipb_python_env *e) {
    free(e->exec);
    for (size_t i = 0; i < e->n; i++)
        free(e->prefix[i]);
    memset(e, 0, sizeof(*e));
}

/* ret_fd (may be NULL): the O_PATH fd of what was checked, for checks on the same tree. */
static int open_dir(const char *what, const char *path, char **ret_canon, ipb_file_id *ret_id, int *ret_fd,
                    ipb_error **err) {
    int fd = -1;
    if (ipb_host_named_open(what, path, IPB_NAMED_DIR, &fd, ret_canon, err) < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        free(*ret_canon);
        *ret_canon = NULL;
        return ipb_error_set(err, e, "%s %s", what, path);
    }
    if (ret_id)
        *ret_id = (ipb_file_id){(uint64_t)st.st_dev, (uint64_t)st.st_ino};
    if (ret_fd)
        *ret_fd = fd;
    else
        close(fd);
    return 0;
}

static int beneath(int dirfd, const char *path, int flags) {
    struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    int fd;
    do
        fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
    while (fd < 0 && errno == EAGAIN);
    return fd;
}

/* Whether dir (beneath pfd) holds a standard library: a directory python3.X (or pypy3.X) with
 * os.py, a regular file. */
static bool stdlib_in(int pfd, const char *dir) {
    int lib = beneath(pfd, dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
    if (lib < 0)
        return false;
    DIR *d = fdopendir(lib);
    if (!d) {
        close(lib);
        return false;
    }
    bool found = false;
    struct dirent *de;
    /* A prefix's lib holds a few hundred entries at most; a bound on what is looked at. */
    for (int seen = 0; !found && seen < 4096 && (de = readdir(d)); seen++) {
        if (strncmp(de->d_name, "python3", 7) && strncmp(de->d_name, "pypy3", 5))
            continue;
        char rel[NAME_MAX + 8];
        snprintf(rel, sizeof(rel), "%s/os.py", de->d_name);
        int f = beneath(dirfd(d), rel, O_PATH);
        struct stat st;
        found = f >= 0 && fstat(f, &st) == 0 && S_ISREG(st.st_mode);
        if (f >= 0)
            close(f);
    }
    closedir(d);
    return found;
}

/* Whether the tree behind pfd is an interpreter's prefix, as Python's start-up (getpath) finds
 * one: its standard library's landmark, lib/python3.X/os.py (lib64/ where that is the
 * platform's library directory), beneath it. A venv's pyvenv.cfg may have been rewritten by
 * sandbox code (a venv in a workspace, a bind, an allowed directory): its `home` may then name
 * any directory, and only a real interpreter's prefix is bound for it, never ~/.ssh. */
static bool has_stdlib_landmark(int pfd) { return stdlib_in(pfd, "lib") || stdlib_in(pfd, "lib64"); }

/* A tree the sandbox would see at its own path: where it may go. */
static int check_prefix(const char *python, const char *prefix, const char *state, const char *home, ipb_error **err) {
    bool inside;
    const char *place = ipb_python_place_conflict(prefix, &inside);
    if (place)
        return ipb_error_set(err, 0,
                             "--python %s: its environment %s %s the sandbox's own %s, where it would be "
                             "bound (at its own path); use an interpreter installed elsewhere",
                             python, prefix, inside ? "is inside" : "would cover", place);
    cleanup_free char *st = state ? realpath(state, NULL) : NULL;
    if (st && (ipb_path_within_tree(prefix, st) || ipb_path_within_tree(st, prefix)))
        return ipb_error_set(err, 0,
                             "--python %s: its environment %s %s ipybox's state directory %s (sessions, "
                             "workspaces, tool sockets); a sandbox must not see it: use a venv or interpreter "
                             "installed elsewhere",
                             python, prefix, ipb_path_within_tree(prefix, st) ? "is inside" : "holds", st);
    cleanup_free char *h = home && home[0] == '/' ? realpath(home, NULL) : NULL;
    if (h && ipb_path_within_tree(h, prefix))
        return ipb_error_set(err, 0,
                             "--python %s: its environment would be %s, which holds your home directory %s; "
                             "only an environment's own directory is shown to the sandbox, not a whole home: "
                             "use an interpreter in a directory of its own (a venv, pyenv, conda or uv "
                             "environment)",
                             python, prefix, h);
    return 0;
}

/* cfg: the pyvenv.cfg whose `home` named prefix (NULL: the prefix holds what the user named):
 * its text is not the user's word, so the tree must be an interpreter's prefix outside every
 * tree a sandbox could write (trees, may be NULL). */
static int add_prefix(ipb_python_env *e, const char *python, const char *prefix, const char *cfg, const ipb_strv *trees,
                      const char *state, const char *home, ipb_error **err) {
    if (ipb_python_in_system_dirs(prefix))
        return 0; /* every sandbox sees these */
    cleanup_free char *canon = NULL;
    cleanup_close int fd = -1;
    ipb_file_id id;
    if (open_dir("--python", prefix, &canon, &id, &fd, err) < 0)
        return -1;
    if (ipb_python_in_system_dirs(canon))
        return 0;
    for (size_t i = 0; i < e->n; i++)
        if (ipb_path_within_tree(canon, e->prefix[i]))
            return 0;
    if (check_prefix(python, canon, state, home, err) < 0)
        return -1;
    for (size_t i = 0; cfg && trees && i < trees->n; i++)
        if (ipb_path_within_tree(canon, trees->v[i]))
            return ipb_error_set(err, 0,
                                 "--python %s: %s names as its base interpreter's prefix %s, which is in %s, "
                                 "a tree that sandboxes could write: the base of a venv must be an "
                                 "interpreter installed outside of them",
                                 python, cfg, canon, trees->v[i]);
    if (cfg && !has_stdlib_landmark(fd))
        return ipb_error_set(err, 0,
                             "--python %s: %s names as its base interpreter's prefix %s, which holds no "
                             "Python standard library (lib/python3.X/os.py); refused, as it would be shown "
                             "to the sandbox (a venv's pyvenv.cfg may have been rewritten by code that "
                             "could write it): recreate the venv from an interpreter that exists",
                             python, cfg, canon);
    /* One that holds an earlier one replaces it. */
    for (size_t i = 0; i < e->n;) {
        if (ipb_path_within_tree(e->prefix[i], canon)) {
            free(e->prefix[i]);
            e->prefix[i] = e->prefix[e->n - 1];
            e->id[i] = e->id[e->n - 1];
            e->n--;
        } else {
            i++;
        }
    }
    if (e->n == IPB_PYTHON_MAX_PREFIXES)
        return ipb_error_set(err, 0, "--python %s: its environment spans more than %d trees", python,
                             IPB_PYTHON_MAX_PREFIXES);
    e->prefix[e->n] = steal_ptr(canon);
    e->id[e->n++] = id;
    return 0;
}

/* The venv's pyvenv.cfg in dir (canonical) or its parent, as Python looks for it next to the
 * executable it was started as: 1 with *ret_cfg (its path), 0 when there is none. */
static int find_pyvenv(const char *dir, char **ret_cfg, ipb_error **err) {
    cleanup_free char *parent = strdup(dir);
    if (!parent)
        return ipb_error_set(err, ENOMEM, "--python");
    char *slash = strrchr(parent, '/');
    if (slash)
        slash[slash == parent ? 1 : 0] = '\0';
    const char *cands[2] = {dir, parent};
    for (int i = 0; i < 2; i++) {
        cleanup_free char *cfg = ipb_strdupf("%s%spyvenv.cfg", cands[i], strcmp(cands[i], "/") ? "/" : "");
        if (!cfg)
            return ipb_error_set(err, ENOMEM, "--python");
        struct stat st;
        if (lstat(cfg, &st) == 0) {
            *ret_cfg = steal_ptr(cfg);
            return 1;
        }
        if (errno != ENOENT && errno != ENOTDIR)
            return ipb_error_set(err, errno, "--python: looking for %s", cfg);
    }
    return 0;
}

int ipb_python_env_resolve(const char *python, const char *state, const char *home, const ipb_strv *trees,
                           ipb_python_env *ret, ipb_error **err) {
    ipb_python_env e = {0};
    if (python[0] != '/')
        return ipb_error_set(err, 0,
                             "--python '%s': must be an absolute path (the interpreter on this host, such "
                             "as /usr/bin/python3 or /home/me/venv/bin/python)",
                             python);
    const char *slash = strrchr(python, '/');
    const char *base = slash + 1;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return ipb_error_set(err, 0, "--python '%s': must name the interpreter's file", python);
    cleanup_free char *dir = strndup(python, slash == python ? 1 : (size_t)(slash - python));
    cleanup_free char *canon_dir = NULL, *canon_exe = NULL, *cfg = NULL, *exe_dir = NULL, *exe_prefix = NULL;
    if (!dir)
        return ipb_error_set(err, ENOMEM, "--python");
    if (open_dir("--python", dir, &canon_dir, NULL, NULL, err) < 0)
        return -1;
    int fd = -1;
    if (ipb_host_named_open("--python", python, IPB_NAMED_FILE, &fd, &canon_exe, err) < 0) {
        struct stat st;
        char target[PATH_MAX];
        ssize_t n;
        if (lstat(python, &st) == 0 && S_ISLNK(st.st_mode) && stat(python, &st) < 0 && errno == ENOENT &&
            (n = readlink(python, target, sizeof(target) - 1)) > 0) {
            target[n] = '\0';
            ipb_error_freep(err);
            return ipb_error_set(err, 0,
                                 "--python %s: it is a symlink to %s, which does not exist (the interpreter "
                                 "a venv was made from was moved or removed?): recreate the environment",
                                 python, target);
        }
        return -1;
    }
    struct stat st;
    int sr = fstat(fd, &st);
    close(fd);
    if (sr < 0)
        return ipb_error_set(err, errno, "--python %s", python);
    if (!(st.st_mode & 0111))
        return ipb_error_set(err, 0, "--python %s: not an executable file (mode %04o)", python,
                             (unsigned)(st.st_mode & 07777));

    int venv = find_pyvenv(canon_dir, &cfg, err);
    if (venv < 0)
        goto fail;
    if (!(exe_dir = strdup(canon_exe))) {
        ipb_error_set(err, ENOMEM, "--python");
        goto fail;
    }
    *strrchr(exe_dir, '/') = '\0';
    if (venv) {
        /* Started as DIR/python, next to (or below) pyvenv.cfg: that is how Python tells it
         * is a venv, so it runs by that path inside too. */
        cleanup_free char *text = NULL, *vhome = NULL, *canon_home = NULL;
        size_t len = 0;
        if (ipb_host_named_read("--python", cfg, IPB_PYVENV_MAX, &text, &len, err) < 0 ||
            ipb_pyvenv_home(text, len, cfg, &vhome, err) < 0)
            goto fail;
        if (ipb_host_named_open("--python", vhome, IPB_NAMED_DIR, &fd, &canon_home, NULL) < 0) {
            *strrchr(cfg, '/') = '\0';
            ipb_error_set(err, 0,
                          "--python %s: the venv %s was made from the Python in %s (its pyvenv.cfg's "
                          "home), which does not exist any more: recreate the venv from an interpreter that "
                          "exists, such as `/usr/bin/python3 -m venv --system-site-packages %s`",
                          python, cfg, vhome, cfg);
            goto fail;
        }
        close(fd);
        char *vprefix = strdup(cfg);
        if (!vprefix) {
            ipb_error_set(err, ENOMEM, "--python");
            goto fail;
        }
        *strrchr(vprefix, '/') = '\0';
        cleanup_free char *base_prefix = ipb_python_prefix_of(canon_home);
        int r = add_prefix(&e, python, vprefix, NULL, trees, state, home, err);
        free(vprefix);
        if (r < 0 || !base_prefix || add_prefix(&e, python, base_prefix, cfg, trees, state, home, err) < 0)
            goto fail_oom;
        e.exec = ipb_strdupf("%s%s%s", canon_dir, strcmp(canon_dir, "/") ? "/" : "", base);
    } else {
        /* By the name given (python3, not python3.11) where its directory is seen inside: in
         * the system directories or in the interpreter's own prefix; else by its real path. */
        cleanup_free char *dir_prefix = ipb_python_prefix_of(canon_dir);
        cleanup_free char *real_prefix = ipb_python_prefix_of(exe_dir);
        if (!dir_prefix || !real_prefix)
            goto fail_oom;
        if (ipb_python_in_system_dirs(canon_dir) || !strcmp(dir_prefix, real_prefix))
            e.exec = ipb_strdupf("%s%s%s", canon_dir, strcmp(canon_dir, "/") ? "/" : "", base);
        else
            e.exec = strdup(canon_exe);
    }
    /* The file itself: a venv's bin/python is a symlink to its base interpreter. */
    if (!(exe_prefix = ipb_python_prefix_of(exe_dir)) ||
        add_prefix(&e, python, exe_prefix, NULL, trees, state, home, err) < 0)
        goto fail_oom;
    if (!e.exec)
        goto fail_oom;
    *ret = e;
    return 0;
fail_oom:
    ipb_error_set(err, ENOMEM, "--python"); /* unless an error is set already */
fail:
    ipb_python_env_free(&e);
    return -1;
}
