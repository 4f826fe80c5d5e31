/* Writing the generated package and the runtime under the host directory that becomes the
 * sandbox's read-only package root: everything relative to directory fds, never following
 * symlinks, and replaced atomically so that an import sees the old or the new package. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "runtime.h"
#include "strbuf.h"
#include "toolgen.h"
#include "tree.h"

/* mcptools/ under dirfd, created (0755) when missing. fd or -errno. */
static int open_mcptools(int dirfd, bool create) {
    if (create && mkdirat(dirfd, "mcptools", 0755) < 0 && errno != EEXIST)
        return -errno;
    int fd = openat(dirfd, "mcptools", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return fd;
}

/* ".<base>.tmp-<16 hex digits>": hidden, and never a server, module or runtime name. */
static char *tmp_name(const char *base) {
    unsigned char rnd[8];
    char hex[2 * sizeof(rnd) + 1];
    if (ipb_random(rnd, sizeof(rnd)) < 0)
        return NULL;
    ipb_hex(rnd, sizeof(rnd), hex);
    return ipb_strdupf(".%s.tmp-%s", base, hex);
}

static int write_file_at(int dfd, const char *name, const char *data, size_t len) {
    cleanup_close int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (fchmod(fd, 0644) < 0) /* whatever the umask */
        return -errno;
    int r = ipb_write_all(fd, data, len);
    if (r < 0)
        return r;
    return close(steal_fd(fd)) < 0 ? -errno : 0;
}

/* A file name the generator makes: "<identifier>.py" (so no '/', no leading '.'). */
static bool relpath_ok(const char *p) {
    size_t n = strlen(p);
    if (n < 4 || n > 255 || strcmp(p + n - 3, ".py") || p[0] == '.')
        return false;
    for (size_t i = 0; i < n - 3; i++) {
        char c = p[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

/* Moves mfd/tmp to mfd/name, exchanging it with an existing entry (left at tmp). 0 or -errno;
 * *exchanged tells whether tmp now holds the old entry. */
static int put_in_place(int mfd, const char *tmp, const char *name, bool *exchanged) {
    *exchanged = false;
    if (renameat2(mfd, tmp, mfd, name, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno == EEXIST) {
        if (renameat2(mfd, tmp, mfd, name, RENAME_EXCHANGE) < 0)
            return -errno;
        *exchanged = true;
        return 0;
    }
    if (errno != EINVAL) /* EINVAL: a filesystem without rename flags */
        return -errno;
    struct stat st;
    if (fstatat(mfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return -errno;
        return renameat(mfd, tmp, mfd, name) < 0 ? -errno : 0;
    }
    /* Not atomic on such a filesystem: the old tree is moved aside first. */
    cleanup_free char *old = tmp_name(name);
    if (!old)
        return -ENOMEM;
    if (renameat(mfd, name, mfd, old) < 0)
        return -errno;
    if (renameat(mfd, tmp, mfd, name) < 0) {
        int e = -errno;
        (void)renameat(mfd, old, mfd, name);
        return e;
    }
    (void)ipb_rm_rf_at(mfd, old);
    return 0;
}

int ipb_toolgen_write(int dirfd, const char *server, const ipb_toolgen_pkg *pkg, ipb_error **err) {
    if (!ipb_toolgen_server_name_ok(server, err))
        return -1;
    cleanup_close int mfd = open_mcptools(dirfd, true);
    if (mfd < 0)
        return ipb_error_set(err, -mfd, "Cannot open the directory mcptools of the generated packages");
    cleanup_free char *tmp = tmp_name(server);
    if (!tmp)
        return ipb_error_set(err, ENOMEM, "Cannot write the Python package of the MCP server %s", server);
    if (mkdirat(mfd, tmp, 0700) < 0)
        return ipb_error_set(err, errno, "Cannot create a directory for the Python package of the MCP server %s",
                             server);
    int r = 0;
    const char *what = "open the new directory";
    cleanup_close int tfd = openat(mfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0)
        r = -errno;
    for (size_t i = 0; r == 0 && i < pkg->n; i++) {
        what = pkg->files[i].relpath;
        if (!relpath_ok(pkg->files[i].relpath))
            r = -EINVAL;
        else
            r = write_file_at(tfd, pkg->files[i].relpath, pkg->files[i].content, strlen(pkg->files[i].content));
    }
    if (r == 0) {
        what = "set the directory's mode";
        r = fchmod(tfd, 0755) < 0 ? -errno : 0;
    }
    bool exchanged = false;
    if (r == 0) {
        what = "move the new package into place";
        r = put_in_place(mfd, tmp, server, &exchanged);
    }
    if (r < 0 || exchanged)
        (void)ipb_rm_rf_at(mfd, tmp); /* the new tree on failure, the old one after an exchange */
    if (r < 0)
        return ipb_error_set(err, -r, "Cannot write the Python package of the MCP server %s (%s)", server, what);
    return 0;
}

int ipb_toolgen_remove(int dirfd, const char *server) {
    if (!ipb_toolgen_server_name_ok(server, NULL))
        return -EINVAL;
    cleanup_close int mfd = open_mcptools(dirfd, false);
    if (mfd < 0)
        return mfd == -ENOENT ? 0 : mfd;
    return ipb_rm_rf_at(mfd, server);
}

static int replace_file(int mfd, const char *name, const char *data, size_t len) {
    cleanup_free char *tmp = tmp_name(name);
    if (!tmp)
        return -ENOMEM;
    int r = write_file_at(mfd, tmp, data, len);
    if (r == 0 && renameat(mfd, tmp, mfd, name) < 0)
        r = -errno;
    if (r < 0)
        (void)unlinkat(mfd, tmp, 0);
    return r;
}

int ipb_toolgen_write_runtime(int dirfd, ipb_error **err) {
    cleanup_close int mfd = open_mcptools(dirfd, true);
    if (mfd < 0)
        return ipb_error_set(err, -mfd, "Cannot open the directory mcptools of the generated packages");
    if (fchmod(mfd, 0755) < 0)
        return ipb_error_set(err, errno, "Cannot set the mode of the directory mcptools");
    int r = replace_file(mfd, "_runtime.py", ipb_mcptools_runtime_py, ipb_mcptools_runtime_py_len);
    if (r < 0)
        return ipb_error_set(err, -r, "Cannot write mcptools/_runtime.py");
    r = replace_file(mfd, "__init__.py", ipb_mcptools_init_py, ipb_mcptools_init_py_len);
    if (r < 0)
        return ipb_error_set(err, -r, "Cannot write mcptools/__init__.py");
    return 0;
}
