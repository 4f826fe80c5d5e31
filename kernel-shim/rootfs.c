#include "rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
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
    if (s.f_flag & ST_NOSUID) f |= MS_NOSUID;
    if (s.f_flag & ST_NODEV) f |= MS_NODEV;
    if (s.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
    if (s.f_flag & ST_NOATIME) f |= MS_NOATIME;
    if (s.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
    if (s.f_flag & ST_RELATIME) f |= MS_RELATIME;
    if (s.f_flag & ST_RDONLY) f |= MS_RDONLY;
    return f;
}

static int remount(const char *path, unsigned long flags, ipb_error **err) {
    if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | flags | locked_flags(path), NULL) < 0)
        return ipb_error_set(err, errno, "remounting %s", path);
    return 0;
}

static int parent_dirs(const char *path, ipb_error **err) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", path);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return 0;
    *slash = '\0';
    int r = ipb_mkdir_p(buf, 0755);
    return r < 0 ? ipb_error_set(err, -r, "creating %s", buf) : 0;
}

static int make_mountpoint(const char *dst, bool dir, ipb_error **err) {
    if (parent_dirs(dst, err) < 0)
        return -1;
    if (dir) {
        if (mkdir(dst, 0755) < 0 && errno != EEXIST)
            return ipb_error_set(err, errno, "creating mount point %s", dst);
        return 0;
    }
    int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST)
        return ipb_error_set(err, errno, "creating mount point %s", dst);
    if (fd >= 0)
        close(fd);
    return 0;
}

/* A tree the monitor made an idmapped mount of (system mode): attached where it belongs. Its
 * flags (read-only, nosuid, nodev) were set by the monitor. */
static int do_bind_fd(const ipb_mount *m, int mfd, const char *dst, ipb_error **err) {
    struct stat st;
    if (fstat(mfd, &st) < 0)
        return ipb_error_set(err, errno, "the mount for %s", m->dst);
    if (make_mountpoint(dst, S_ISDIR(st.st_mode), err) < 0)
        return -1;
    if (syscall(SYS_move_mount, mfd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return ipb_error_set(err, errno, "attaching %s at %s", m->src ? m->src : "a bind", m->dst);
    return 0;
}

static int do_bind(const ipb_mount *m, const char *dst, bool system, ipb_error **err) {
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
        if (parent_dirs(dst, err) < 0)
            return -1;
        if (symlink(target, dst) < 0)
            return ipb_error_set(err, errno, "creating symlink %s", m->dst);
        return 0;
    }
    if (stat(m->src, &st) < 0) {
        if (errno == ENOENT && (m->flags & IPB_MNT_OPTIONAL))
            return 0;
        return ipb_error_set(err, errno, "bind source %s", m->src);
    }
    if (m->kind == IPB_MNT_BIND_DEV && !S_ISCHR(st.st_mode))
        return ipb_error_set(err, 0, "%s is not a character device", m->src);
    if (make_mountpoint(dst, S_ISDIR(st.st_mode), err) < 0)
        return -1;
    if (mount(m->src, dst, NULL, MS_BIND, NULL) < 0)
        return ipb_error_set(err, errno, "binding %s at %s", m->src, m->dst);
    unsigned long flags = MS_NOSUID;
    /* In system mode only the monitor's idmapped mounts may be written through: a path bind
     * is read-only whatever the plan says. */
    if (m->kind == IPB_MNT_BIND_RO || (system && m->kind == IPB_MNT_BIND_RW))
        flags |= MS_RDONLY | MS_NODEV;
    else if (m->kind == IPB_MNT_BIND_RW)
        flags |= MS_NODEV;
    else
        /* Device I/O still works on a read-only bind; chmod/utimes of the host's node do not. */
        flags |= MS_NOEXEC | MS_RDONLY;
    return remount(dst, flags, err);
}

static int do_tmpfs(const char *dst, const char *data, unsigned long extra, ipb_error **err) {
    if (make_mountpoint(dst, true, err) < 0)
        return -1;
    if (mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV | extra, data) < 0)
        return ipb_error_set(err, errno, "mounting tmpfs at %s (%s)", dst, data ? data : "");
    return 0;
}

static int do_step(const char *root, const ipb_mount *m, bool system, int *next_fd, ipb_error **err) {
    char dst[PATH_MAX];
    /* Every step stays below the new root: no relative path, no ".." component. */
    bool up = false;
    for (const char *dd = m->dst; dd && (dd = strstr(dd, "..")); dd += 2)
        up = up || (dd > m->dst && dd[-1] == '/' && (dd[2] == '/' || dd[2] == '\0'));
    if (!m->dst || m->dst[0] != '/' || up)
        return ipb_error_set(err, EINVAL, "mount step destination '%s' leaves the root", m->dst ? m->dst : "");
    if (snprintf(dst, sizeof(dst), "%s%s", root, m->dst) >= (int)sizeof(dst))
        return ipb_error_set(err, ENAMETOOLONG, "%s", m->dst);
    switch (m->kind) {
    case IPB_MNT_BIND_RO:
    case IPB_MNT_BIND_RW:
    case IPB_MNT_BIND_DEV:
        if (m->flags & IPB_MNT_FD) {
            if (!system || m->kind == IPB_MNT_BIND_DEV)
                return ipb_error_set(err, EINVAL, "a mount fd for %s outside system mode", m->dst);
            return do_bind_fd(m, (*next_fd)++, dst, err);
        }
        return do_bind(m, dst, system, err);
    case IPB_MNT_TMPFS:
        return do_tmpfs(dst, m->data, 0, err);
    case IPB_MNT_DIR:
        return make_mountpoint(dst, true, err);
    case IPB_MNT_FILE: {
        if (parent_dirs(dst, err) < 0)
            return -1;
        const char *d = m->data ? m->data : "";
        int r = ipb_write_file(dst, d, strlen(d), 0644);
        return r < 0 ? ipb_error_set(err, -r, "writing %s", m->dst) : 0;
    }
    case IPB_MNT_SYMLINK:
        if (parent_dirs(dst, err) < 0)
            return -1;
        if (symlink(m->src, dst) < 0)
            return ipb_error_set(err, errno, "creating symlink %s", m->dst);
        return 0;
    case IPB_MNT_PROC:
        if (make_mountpoint(dst, true, err) < 0)
            return -1;
        if (mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
            return ipb_error_set(err, errno, "mounting a fresh /proc (the host's /proc may be partly hidden, "
                                             "as inside some containers)");
        return 0;
    case IPB_MNT_DEVPTS:
        if (make_mountpoint(dst, true, err) < 0)
            return -1;
        /* A new instance: the sandbox's ptys are its own, the host's are not visible. */
        if (mount("devpts", dst, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") < 0)
            return ipb_error_set(err, errno, "mounting devpts at %s", m->dst);
        return 0;
    case IPB_MNT_MASK: {
        struct stat st;
        if (lstat(dst, &st) < 0)
            return (errno == ENOENT && (m->flags & IPB_MNT_OPTIONAL)) ? 0 : ipb_error_set(err, errno, "masking %s", m->dst);
        if (S_ISDIR(st.st_mode))
            return do_tmpfs(dst, "size=4k,nr_inodes=1,mode=0555", MS_RDONLY | MS_NOEXEC, err);
        char null[PATH_MAX];
        snprintf(null, sizeof(null), "%s/dev/null", root);
        if (mount(null, dst, NULL, MS_BIND, NULL) < 0)
            return ipb_error_set(err, errno, "masking %s", m->dst);
        return remount(dst, MS_RDONLY | MS_NOSUID | MS_NOEXEC, err);
    }
    case IPB_MNT_READONLY: {
        struct stat st;
        if (lstat(dst, &st) < 0)
            return (errno == ENOENT && (m->flags & IPB_MNT_OPTIONAL)) ? 0 : ipb_error_set(err, errno, "%s", m->dst);
        if (mount(dst, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
            return ipb_error_set(err, errno, "making %s read-only", m->dst);
        return remount(dst, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, err);
    }
    }
    return ipb_error_set(err, EINVAL, "unknown mount step %u", m->kind);
}

int shim_build_root(const char *root, const ipb_mount_plan *plan, bool system, ipb_error **err) {
    int next_fd = SHIM_MOUNT_FD0;
    /* Nothing we mount may propagate back to the host. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return ipb_error_set(err, errno, "making mounts private");
    if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,nr_inodes=4096,mode=0755") < 0)
        return ipb_error_set(err, errno, "mounting the root tmpfs at %s", root);
    for (size_t i = 0; i < plan->n; i++)
        if (do_step(root, &plan->m[i], system, &next_fd, err) < 0)
            return -1;
    for (int fd = SHIM_MOUNT_FD0; fd < next_fd; fd++)
        close(fd);
    /* The root tmpfs itself read-only: the sandbox writes only to /app, /tmp, /dev/shm, $HOME. */
    if (remount(root, MS_RDONLY | MS_NOSUID | MS_NODEV, err) < 0)
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
