#include "rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/fsuid.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "shim_proto.h"
#include "tree.h"

/* Flags the kernel locks on mounts inherited from a more privileged namespace: a remount
 * must repeat them or it fails with EPERM. */
static unsigned long locked_flags(const char *path) {
    struct statvfs s;
    unsigned long f = 0;
    if (statvfs(path, &s) < 0)
        return 0;
    if (s.f_flag & ST_NOSUID)
        f |= MS_NOSUID;
    if (s.f_flag & ST_NODEV)
        f |= MS_NODEV;
    if (s.f_flag & ST_NOEXEC)
        f |= MS_NOEXEC;
    if (s.f_flag & ST_NOATIME)
        f |= MS_NOATIME;
    if (s.f_flag & ST_NODIRATIME)
        f |= MS_NODIRATIME;
    if (s.f_flag & ST_RELATIME)
        f |= MS_RELATIME;
    if (s.f_flag & ST_RDONLY)
        f |= MS_RDONLY;
    return f;
}

/* path: what to remount; name: what to call it in an error. */
static int remount(const char *path, const char *name, unsigned long flags, ipb_error **err) {
    if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | flags | locked_flags(path), NULL) < 0)
        return ipb_error_set(err, errno, "remounting %s", name);
    return 0;
}

/* Every destination is resolved under the new root (openat2 RESOLVE_IN_ROOT), as it would be
 * inside the sandbox: a symlink planted in a tree that is mounted there cannot point a step
 * at the host. In the workspace, which sandbox code writes and which outlives a session, no
 * symlink is followed at all (RESOLVE_NO_SYMLINKS): one left by an earlier session must not
 * steer where this session's binds land. Objects are then named through /proc/self/fd,
 * which is exactly the object found. */
static int root_fd = -1;

typedef struct place {
    int fd;
    char path[40];
} place;

static bool in_workspace(const char *dst) {
    size_t n = strlen(IPB_SANDBOX_APP);
    while (dst[0] == '/' && dst[1] == '/')
        dst++;
    return !strncmp(dst, IPB_SANDBOX_APP, n) && (dst[n] == '\0' || dst[n] == '/');
}

static int open_in_root(const char *dst, int flags) {
    struct open_how how = {.flags = (uint64_t)(O_PATH | O_CLOEXEC | flags),
                           .resolve =
                               RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (in_workspace(dst) ? RESOLVE_NO_SYMLINKS : 0)};
    int fd = (int)syscall(SYS_openat2, root_fd, dst, &how, sizeof(how));
    return fd < 0 ? -errno : fd;
}

/* The error for a failed step at path; a symlink met in the workspace is named as such. */
static int step_error(ipb_error **err, int e, const char *what, const char *path) {
    if (e == ELOOP && in_workspace(path))
        return ipb_error_set(err, 0,
                             "%s %s: a symlink in the workspace is on the way (left there by sandbox "
                             "code?); ipybox never follows one when mounting: remove it or choose "
                             "another mount point",
                             what, path);
    return ipb_error_set(err, e, "%s %s", what, path);
}

/* mkdirat, or openat creating a file when file; EEXIST is fine. A tree idmapped to the
 * sandbox's user (system mode: the user's own workspace) has no id for the sandbox's root,
 * so there the entry is made as the sandbox's user (the user, on disk). 0 or -errno. */
static int make_entry(int dfd, const char *name, bool file) {
    for (int as_user = 0; as_user < 2; as_user++) {
        if (as_user) {
            setfsgid(IPB_SANDBOX_UID);
            setfsuid(IPB_SANDBOX_UID);
        }
        int r = 0;
        if (file) {
            int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
            if (fd < 0 && errno != EEXIST && errno != EISDIR)
                r = -errno;
            if (fd >= 0)
                close(fd);
        } else if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
            r = -errno;
        if (as_user) {
            setfsuid(0);
            setfsgid(0);
        }
        if (r != -EOVERFLOW)
            return r;
    }
    return -EOVERFLOW;
}

/* dst (absolute in the sandbox) as a place; -errno when it does not resolve. */
static int place_at(place *pl, const char *dst, int flags) {
    pl->fd = open_in_root(dst, flags);
    if (pl->fd < 0)
        return pl->fd;
    snprintf(pl->path, sizeof(pl->path), "/proc/self/fd/%d", pl->fd);
    return 0;
}

static void place_close(place *pl) {
    if (pl->fd >= 0)
        close(pl->fd);
    pl->fd = -1;
}

/* The directory that holds dst, made where missing (mkdir -p, each step resolved in the
 * root), as an O_PATH fd; *name gets dst's last component. Returns the fd or -1. */
static int parent_of(const char *dst, const char **name, ipb_error **err) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", dst) >= (int)sizeof(buf))
        return ipb_error_set(err, ENAMETOOLONG, "%s", dst);
    const char *last = strrchr(dst, '/');
    *name = last + 1;
    buf[last - dst] = '\0';
    int dfd = open_in_root("/", O_DIRECTORY);
    for (char *p = buf; dfd >= 0 && *p;) {
        while (*p == '/')
            p++;
        char *e = strchrnul(p, '/');
        char save = *e;
        *e = '\0';
        int r = *p ? make_entry(dfd, p, false) : 0;
        if (r < 0) {
            close(dfd);
            return step_error(err, -r, "creating", buf);
        }
        close(dfd);
        dfd = open_in_root(buf[0] ? buf : "/", O_DIRECTORY);
        if (dfd < 0) {
            int e2 = -dfd;
            return step_error(err, e2, "creating the directories of", buf[0] ? buf : "/");
        }
        *e = save;
        p = e;
    }
    return dfd;
}

/* A mount point at dst (a directory, or an empty file), then dst as a place. */
static int make_mountpoint(const char *dst, bool dir, place *pl, ipb_error **err) {
    const char *name;
    int dfd = parent_of(dst, &name, err);
    if (dfd < 0)
        return -1;
    int r = -make_entry(dfd, name, !dir);
    close(dfd);
    if (r == 0 && (r = -place_at(pl, dst, 0)) == 0)
        return 0;
    return step_error(err, r, "creating mount point", dst);
}

int shim_check_same(int fd, const char *src, const ipb_file_id *want, ipb_error **err) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return ipb_error_set(err, errno, "bind source %s", src);
    if ((uint64_t)st.st_dev != want->dev || (uint64_t)st.st_ino != want->ino)
        return ipb_error_set(err, 0,
                             "%s changed while the sandbox was built (a symlink swapped in?); refusing to "
                             "bind it",
                             src);
    return 0;
}

/* How much attach_clone takes: the top mount alone, or the tree with whatever is mounted
 * below it, the attrs set on its top only (the mounts below keep theirs: /dev's device binds,
 * /dev/shm) or on every mount of it. */
enum clone_scope { CLONE_TOP, CLONE_TREE_TOP_ATTRS, CLONE_TREE };

/* The tree at src_fd/src (a host path, or a place's fd with src ""), cloned as scope says,
 * and attached at the place: the destination is looked up once, and the new mount's flags
 * are set before anyone can reach it. */
static int attach_clone(int src_fd, const char *src, enum clone_scope scope, uint64_t attrs, const place *pl,
                        const char *what, const char *dst, const ipb_file_id *want, ipb_error **err) {
    unsigned flags =
        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (src[0] ? 0 : AT_EMPTY_PATH) | (scope != CLONE_TOP ? AT_RECURSIVE : 0);
    int t = (int)syscall(SYS_open_tree, src_fd, src, flags);
    if (t < 0)
        return ipb_error_set(err, errno, "%s %s", what, dst);
    if (want && shim_check_same(t, src, want, err) < 0) {
        close(t);
        return -1;
    }
    struct mount_attr a = {.attr_set = attrs};
    int r =
        (int)syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | (scope == CLONE_TREE ? AT_RECURSIVE : 0), &a, sizeof(a));
    if (r == 0)
        r = (int)syscall(SYS_move_mount, t, "", pl->fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
    int e = errno;
    close(t);
    return r < 0 ? ipb_error_set(err, e, "%s %s", what, dst) : 0;
}

static int make_symlink(const char *target, const char *dst, ipb_error **err) {
    const char *name;
    int dfd = parent_of(dst, &name, err);
    if (dfd < 0)
        return -1;
    int r = symlinkat(target, dfd, name) < 0 ? errno : 0;
    close(dfd);
    return r ? ipb_error_set(err, r, "creating symlink %s", dst) : 0;
}

/* A tree the monitor made an idmapped mount of (system mode): attached where it belongs. Its
 * flags (read-only, nosuid, nodev) were set by the monitor. */
static int do_bind_fd(const ipb_mount *m, int mfd, ipb_error **err) {
    struct stat st;
    if (fstat(mfd, &st) < 0)
        return ipb_error_set(err, errno, "the mount for %s", m->dst);
    /* The monitor cloned what the supervisor opened by name: the very tree it resolved? */
    if ((m->flags & IPB_MNT_SAME) && shim_check_same(mfd, m->src ? m->src : m->dst, &m->id, err) < 0)
        return -1;
    place pl;
    if (make_mountpoint(m->dst, S_ISDIR(st.st_mode), &pl, err) < 0)
        return -1;
    int r = (int)syscall(SYS_move_mount, mfd, "", pl.fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
    int e = errno;
    place_close(&pl);
    if (r < 0)
        return ipb_error_set(err, e, "attaching %s at %s", m->src ? m->src : "a bind", m->dst);
    return 0;
}

static int do_bind(const ipb_mount *m, bool system, ipb_error **err) {
    struct stat st;
    if (lstat(m->src, &st) < 0) {
        if (errno == ENOENT && (m->flags & IPB_MNT_OPTIONAL))
            return 0;
        return ipb_error_set(err, errno, "bind source %s", m->src);
    }
    if (S_ISLNK(st.st_mode) && (m->flags & IPB_MNT_MIRROR)) {
        char target[PATH_MAX];
        ssize_t n = readlink(m->src, target, sizeof(target) - 1);
        if (n < 0)
            return ipb_error_set(err, errno, "reading symlink %s", m->src);
        target[n] = '\0';
        return make_symlink(target, m->dst, err);
    }
    if (stat(m->src, &st) < 0) {
        if (errno == ENOENT && (m->flags & IPB_MNT_OPTIONAL))
            return 0;
        return ipb_error_set(err, errno, "bind source %s", m->src);
    }
    if (m->kind == IPB_MNT_BIND_DEV && !S_ISCHR(st.st_mode))
        return ipb_error_set(err, 0, "%s is not a character device", m->src);
    uint64_t attrs = MOUNT_ATTR_NOSUID;
    /* In system mode only the monitor's idmapped mounts may be written through: a path bind
     * is read-only whatever the plan says. */
    if (m->kind == IPB_MNT_BIND_RO || (system && m->kind == IPB_MNT_BIND_RW))
        attrs |= MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV;
    else if (m->kind == IPB_MNT_BIND_RW)
        attrs |= MOUNT_ATTR_NODEV;
    else
        /* Device I/O still works on a read-only bind; chmod/utimes of the host's node do not. */
        attrs |= MOUNT_ATTR_NOEXEC | MOUNT_ATTR_RDONLY;
    place pl;
    if (make_mountpoint(m->dst, S_ISDIR(st.st_mode), &pl, err) < 0)
        return -1;
    /* IPB_MNT_SAME: what open_tree cloned (what gets mounted) must be what the supervisor
     * resolved; a symlink swapped in on the way since makes it another tree. The bind takes
     * the mounts below the source too, each made read-only (nosuid, nodev) as its top: the
     * sandbox sees what the host shows there, never what a mount covers. A bind of the top
     * alone is refused (EINVAL) where the mounts below are locked, as under a systemd unit's
     * ProtectSystem= / ProtectKernelModules= (/usr is a mount, /usr/lib/modules covered). */
    int r = attach_clone(AT_FDCWD, m->src, CLONE_TREE, attrs, &pl, "binding", m->dst,
                         (m->flags & IPB_MNT_SAME) ? &m->id : NULL, err);
    place_close(&pl);
    return r;
}

static int do_tmpfs(const char *dst, const char *data, unsigned long extra, ipb_error **err) {
    place pl;
    if (make_mountpoint(dst, true, &pl, err) < 0)
        return -1;
    int r = mount("tmpfs", pl.path, "tmpfs", MS_NOSUID | MS_NODEV | extra, data);
    int e = errno;
    place_close(&pl);
    if (r < 0)
        return ipb_error_set(err, e, "mounting tmpfs at %s (%s)", dst, data ? data : "");
    return 0;
}

static int do_step(const ipb_mount *m, bool system, int *next_fd, int end_fd, ipb_error **err) {
    /* Every step stays below the new root: no relative path, no ".." component (and every
     * symlink met on the way is resolved in the root). */
    bool up = false;
    for (const char *dd = m->dst; dd && (dd = strstr(dd, "..")); dd += 2)
        up = up || (dd > m->dst && dd[-1] == '/' && (dd[2] == '/' || dd[2] == '\0'));
    if (!m->dst || m->dst[0] != '/' || up)
        return ipb_error_set(err, EINVAL, "mount step destination '%s' leaves the root", m->dst ? m->dst : "");
    if (strlen(m->dst) >= PATH_MAX)
        return ipb_error_set(err, ENAMETOOLONG, "%s", m->dst);
    switch (m->kind) {
    case IPB_MNT_BIND_RO:
    case IPB_MNT_BIND_RW:
    case IPB_MNT_BIND_DEV:
        if (m->flags & IPB_MNT_FD) {
            if (!system || m->kind == IPB_MNT_BIND_DEV)
                return ipb_error_set(err, EINVAL, "a mount fd for %s outside system mode", m->dst);
            if (*next_fd >= end_fd)
                return ipb_error_set(err, EINVAL, "more mount steps than the monitor's mounts (at %s)", m->dst);
            return do_bind_fd(m, (*next_fd)++, err);
        }
        return do_bind(m, system, err);
    case IPB_MNT_TMPFS:
        return do_tmpfs(m->dst, m->data, 0, err);
    case IPB_MNT_DIR: {
        place pl;
        if (make_mountpoint(m->dst, true, &pl, err) < 0)
            return -1;
        place_close(&pl);
        return 0;
    }
    case IPB_MNT_FILE: {
        const char *name;
        int dfd = parent_of(m->dst, &name, err);
        if (dfd < 0)
            return -1;
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
        int e = errno;
        close(dfd);
        if (fd < 0)
            return ipb_error_set(err, e, "writing %s", m->dst);
        const char *d = m->data ? m->data : "";
        int r = ipb_write_all(fd, d, strlen(d));
        close(fd);
        return r < 0 ? ipb_error_set(err, -r, "writing %s", m->dst) : 0;
    }
    case IPB_MNT_SYMLINK:
        return make_symlink(m->src, m->dst, err);
    case IPB_MNT_PROC: {
        place pl;
        if (make_mountpoint(m->dst, true, &pl, err) < 0)
            return -1;
        int r = mount("proc", pl.path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        place_close(&pl);
        if (r < 0)
            return ipb_error_set(err, errno,
                                 "mounting a fresh /proc (the host's /proc may be partly hidden, "
                                 "as inside some containers)");
        return 0;
    }
    case IPB_MNT_DEVPTS: {
        place pl;
        if (make_mountpoint(m->dst, true, &pl, err) < 0)
            return -1;
        /* A new instance: the sandbox's ptys are its own, the host's are not visible. */
        int r = mount("devpts", pl.path, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
        int e = errno;
        place_close(&pl);
        return r < 0 ? ipb_error_set(err, e, "mounting devpts at %s", m->dst) : 0;
    }
    case IPB_MNT_MASK:
    case IPB_MNT_READONLY: {
        place pl;
        struct stat st;
        int r = place_at(&pl, m->dst, 0);
        if (r == -ENOENT && (m->flags & IPB_MNT_OPTIONAL))
            return 0;
        if (r < 0 || fstat(pl.fd, &st) < 0) {
            r = r < 0 ? -r : errno;
            place_close(&pl);
            return ipb_error_set(err, r, "%s %s", m->kind == IPB_MNT_MASK ? "masking" : "making read-only", m->dst);
        }
        if (m->kind == IPB_MNT_MASK && S_ISDIR(st.st_mode)) {
            r = mount("tmpfs", pl.path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY | MS_NOEXEC,
                      "size=4k,nr_inodes=1,mode=0555");
            int e = errno;
            place_close(&pl);
            return r < 0 ? ipb_error_set(err, e, "masking %s", m->dst) : 0;
        }
        if (m->kind == IPB_MNT_MASK) {
            place null = {.fd = -1};
            r = place_at(&null, "/dev/null", 0);
            if (r == 0)
                r = attach_clone(null.fd, "", CLONE_TOP, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, &pl,
                                 "masking", m->dst, NULL, err);
            else
                ipb_error_set(err, -r, "masking %s: no /dev/null yet", m->dst);
            place_close(&null);
        } else
            r = attach_clone(pl.fd, "", CLONE_TREE_TOP_ATTRS,
                             MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, &pl,
                             "making read-only", m->dst, NULL, err);
        place_close(&pl);
        return r < 0 ? -1 : 0;
    }
    }
    return ipb_error_set(err, EINVAL, "unknown mount step %u", m->kind);
}

int shim_build_root(const char *root, const ipb_mount_plan *plan, bool system, unsigned mount_fds, ipb_error **err) {
    int next_fd = SHIM_MOUNT_FD0, end_fd = SHIM_MOUNT_FD0 + (int)mount_fds;
    /* Nothing we mount may propagate back to the host. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return ipb_error_set(err, errno, "making mounts private");
    if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,nr_inodes=4096,mode=0755") < 0)
        return ipb_error_set(err, errno, "mounting the root tmpfs at %s", root);
    root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return ipb_error_set(err, errno, "opening the new root");
    for (size_t i = 0; i < plan->n; i++)
        if (do_step(&plan->m[i], system, &next_fd, end_fd, err) < 0)
            return -1;
    if (next_fd != end_fd)
        return ipb_error_set(err, EINVAL, "the monitor passed %u mounts for %d mount steps", mount_fds,
                             next_fd - SHIM_MOUNT_FD0);
    for (int fd = SHIM_MOUNT_FD0; fd < end_fd; fd++)
        close(fd);
    close(root_fd);
    root_fd = -1;
    /* The root tmpfs itself read-only: the sandbox writes only to /app, /tmp, /dev/shm, $HOME. */
    if (remount(root, root, MS_RDONLY | MS_NOSUID | MS_NODEV, err) < 0)
        return -1;
    if (chdir(root) < 0)
        return ipb_error_set(err, errno, "entering the new root");
    /* pivot_root(".", ".") stacks the old root under the new one; detaching it leaves no
     * path back to the host's tree. */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        return ipb_error_set(err, errno, "pivot_root");
    if (umount2(".", MNT_DETACH) < 0)
        return ipb_error_set(err, errno, "detaching the host's root");
    if (chdir("/") < 0)
        return ipb_error_set(err, errno, "entering /");
    return 0;
}
