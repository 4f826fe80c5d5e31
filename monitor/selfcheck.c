/* At the system service's start: the operations every sandbox needs, tried once in a
 * throwaway child, so that a unit (or a host) that forbids one is named at start instead of
 * failing each session later. */
#include "selfcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdio.h"

enum step {
    STEP_OPENAT2 = 1,
    STEP_NAMESPACES,
    STEP_IDMAP,
    STEP_HOSTNAME,
    STEP_PRIVATE,
    STEP_BIND_USR,
    STEP_PROC,
    STEP_DONE
};

static const char *const advice[] = {
    [STEP_OPENAT2] = "openat2 is refused: a seccomp filter is in the way (systemd's RestrictSUIDSGID=yes refuses "
                     "it with ENOSYS; so can a SystemCallFilter=). ipybox resolves every path a sandbox could "
                     "influence with it: remove the setting",
    [STEP_NAMESPACES] = "cannot make user, mount, pid, network, IPC, UTS and cgroup namespaces (systemd's "
                        "RestrictNamespaces=, or user.max_user_namespaces = 0?)",
    [STEP_IDMAP] = "cannot write a new user namespace's id map (CAP_SETUID, CAP_SETGID missing from the "
                   "unit's CapabilityBoundingSet=?)",
    [STEP_HOSTNAME] = "cannot name a sandbox in its own UTS namespace: sethostname is refused (systemd's "
                      "ProtectHostname=yes)",
    [STEP_PRIVATE] = "cannot make a private mount namespace",
    [STEP_BIND_USR] = "cannot bind /usr read-only into a sandbox (a seccomp filter refusing open_tree or "
                      "mount_setattr?)",
    [STEP_PROC] = "cannot mount a /proc for a sandbox's pid namespace: the kernel allows it only where the "
                  "service's own /proc is fully visible, and something is mounted over part of it (an "
                  "InaccessiblePaths= or BindPaths= under /proc in the unit?)",
};

static int write_str(const char *path, const char *s) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = ipb_write_all(fd, s, strlen(s));
    close(fd);
    return r;
}

static void report(int fd, int step, int e) {
    int msg[2] = {step, e};
    (void)!write(fd, msg, sizeof(msg));
}

/* In the new namespaces (its ids mapped by its parent, as a sandbox's are by the monitor):
 * the hostname and the mounts every sandbox makes. */
static void in_namespaces(int fd) {
    int step = STEP_HOSTNAME;
    if (sethostname("ipybox-check", 12) < 0)
        goto fail;
    step = STEP_PRIVATE;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        goto fail;
    step = STEP_BIND_USR;
    int t = (int)syscall(SYS_open_tree, AT_FDCWD, "/usr", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (t < 0 || syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
        goto fail;
    close(t);
    /* The first child is PID 1 of the new pid namespace: /proc is mounted there, over /tmp
     * of this private mount namespace. */
    step = STEP_PROC;
    pid_t pid = fork();
    if (pid == 0)
        _exit(mount("proc", "/tmp", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ? errno : 0);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        goto fail;
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        errno = WIFEXITED(st) ? WEXITSTATUS(st) : EIO;
        goto fail;
    }
    report(fd, STEP_DONE, 0);
    return;
fail:
    report(fd, step, errno);
}

static int write_map(pid_t pid, const char *file, const char *text) {
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
    return write_str(p, text);
}

/* In the child: openat2, then a grandchild in namespaces of every kind a sandbox has, whose ids
 * this child maps (root there is the overflow uid here: nothing of the host's). The failed
 * step and its errno, or STEP_DONE, go to fd. */
static void try_steps(int fd) {
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int t = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
    if (t < 0) {
        report(fd, STEP_OPENAT2, errno);
        return;
    }
    close(t);
    int go[2], ready[2];
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0) {
        report(fd, STEP_NAMESPACES, errno);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        char c = 0;
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                    CLONE_NEWCGROUP) < 0) {
            report(fd, STEP_NAMESPACES, errno);
            _exit(0);
        }
        if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1 || c != 'g')
            _exit(0); /* the parent reported */
        in_namespaces(fd);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    char c;
    if (pid < 0) {
        report(fd, STEP_NAMESPACES, errno);
        return;
    }
    if (read(ready[0], &c, 1) == 1) {
        if (write_map(pid, "setgroups", "deny") < 0 || write_map(pid, "uid_map", "0 65534 1") < 0 ||
            write_map(pid, "gid_map", "0 65534 1") < 0) {
            report(fd, STEP_IDMAP, errno);
            close(go[1]);
        } else {
            (void)!write(go[1], "g", 1);
        }
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

int ipbm_selfcheck(ipb_error **err) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return ipb_error_set(err, errno, "self-check");
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return ipb_error_set(err, errno, "self-check");
    }
    if (pid == 0) {
        close(p[0]);
        try_steps(p[1]);
        _exit(0);
    }
    close(p[1]);
    int msg[2] = {0, 0};
    size_t n = 0;
    int rr = ipb_read_all(p[0], msg, sizeof(msg), &n);
    close(p[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (rr < 0 || n != sizeof(msg) || msg[0] < STEP_OPENAT2 || msg[0] > STEP_DONE)
        return ipb_error_set(err, EIO, "self-check: the checking process ended without a word");
    if (msg[0] == STEP_DONE)
        return 0;
    return ipb_error_set(err, msg[1], "cannot build sandboxes here: %s", advice[msg[0]]);
}
