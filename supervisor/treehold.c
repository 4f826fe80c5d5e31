#include "treehold.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "tmpmark.h"
#include "wsname.h"

/* How long a start waits for a tree that another process holds exclusively (a start
 * sweeping it, which is quick). Past that, the session starts without holding it: anyone who
 * can read the directory can flock it, and that must not keep a session from starting. */
#define HOLD_WAIT_MS 2000

/* flock(op | LOCK_NB) again and again for up to HOLD_WAIT_MS: 0, or -errno. */
static int lock_waiting(int fd, int op) {
    struct timespec pause = {0, 10 * 1000 * 1000};
    for (int waited = 0;; waited += 10) {
        if (flock(fd, op | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
        if (waited >= HOLD_WAIT_MS)
            return -EWOULDBLOCK;
        nanosleep(&pause, NULL);
    }
}

static int hold(int fd, const char *what, const char *path, bool must, int *ret_fd, ipb_error **err) {
    *ret_fd = -1;
    cleanup_close int lfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lfd < 0)
        return errno == ENOTDIR ? 0 : ipb_error_set(err, errno, "%s %s", what, path);
    int r;
    if (flock(lfd, LOCK_EX | LOCK_NB) == 0) {
        /* No live session uses it: what a killed one left can go. */
        ipb_tmp_sweep(lfd);
        r = lock_waiting(lfd, LOCK_SH);
    } else if (errno == EWOULDBLOCK || errno == EINTR) {
        r = lock_waiting(lfd, LOCK_SH);
    } else {
        return 0; /* no flock on this file system */
    }
    if (r == -EWOULDBLOCK && must)
        return ipb_error_set(
            err, 0,
            "%s %s: another process keeps it locked exclusively (`ipybox workspaces prune` "
            "removing it, or another start sweeping it), and a workspace of the state directory is never used without "
            "a hold, since a prune would remove it under the session: start again",
            what, path);
    if (r == -EWOULDBLOCK) {
        log_warn("%s %s: another process keeps it locked (flock, exclusively); the session starts without "
                 "holding it, so temporary files a killed session leaves there may be swept later",
                 what, path);
        return 0;
    }
    if (r < 0)
        return 0;
    struct stat st;
    if (fstat(lfd, &st) == 0 && st.st_nlink == 0)
        return ipb_error_set(err, 0, "%s %s was removed while the session started; start again", what, path);
    *ret_fd = steal_fd(lfd);
    return 0;
}

int ipb_tree_hold(int fd, const char *what, const char *path, int *ret_fd, ipb_error **err) {
    return hold(fd, what, path, false, ret_fd, err);
}

int ipb_tree_hold_state_workspace(int fd, const char *what, const char *path, int *ret_fd, ipb_error **err) {
    return hold(fd, what, path, true, ret_fd, err);
}

int ipb_default_workspaces_sweep(const char *state) {
    cleanup_close int sfd = open(state, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sfd < 0)
        return 0;
    cleanup_close int sessions = openat(sfd, "sessions", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int wsroot = openat(sfd, "workspaces", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (wsroot < 0)
        return 0;
    DIR *dir = fdopendir(wsroot);
    if (!dir) {
        close(wsroot);
        return 0;
    }
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        struct stat st;
        char id[17];
        if (!ipb_workspace_unnamed_id(de->d_name, id, NULL))
            continue;
        /* A session of that id is being made (its directory comes before its workspace), runs,
         * or was killed and waits for its reaping: not now. */
        if (sessions < 0 || fstatat(sessions, id, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
            continue;
        cleanup_close int fd = openat(wsroot, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        /* Held by nobody (also not named again with --workspace): rmdir removes it only if
         * empty, and a symlink never (ENOTDIR). */
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && unlinkat(wsroot, de->d_name, AT_REMOVEDIR) == 0)
            removed++;
    }
    closedir(dir);
    return removed;
}
