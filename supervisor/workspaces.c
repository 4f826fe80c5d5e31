#include "workspaces.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdio.h"
#include "statedir.h"
#include "tree.h"
#include "wsname.h"

/* Where a prune moves a workspace while it removes it (never a valid name: it starts with '.'). */
#define PRUNING_PREFIX ".pruning-"

static int open_root(char **ret_root, int *ret_fd, int *ret_sessions, ipb_error **err) {
    cleanup_free char *state = NULL;
    if (ipb_state_dir(&state, err) < 0)
        return -1;
    if (asprintf(ret_root, "%s/workspaces", state) < 0)
        return ipb_error_set(err, ENOMEM, "workspaces");
    if (mkdir(*ret_root, 0700) < 0 && errno != EEXIST)
        return ipb_error_set(err, errno, "creating %s", *ret_root);
    *ret_fd = open(*ret_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*ret_fd < 0)
        return ipb_error_set(err, errno, "opening %s", *ret_root);
    if (ret_sessions) {
        cleanup_free char *sessions = NULL;
        if (asprintf(&sessions, "%s/sessions", state) < 0)
            return ipb_error_set(err, ENOMEM, "workspaces");
        /* Made if missing: without it, every unnamed workspace would count as in use. */
        if (mkdir(sessions, 0700) < 0 && errno != EEXIST)
            return ipb_error_set(err, errno, "creating %s", sessions);
        *ret_sessions = open(sessions, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    return 0;
}

/* Whether a session directory of the unnamed workspace's session exists: the session is being
 * made (its directory comes before its workspace and its hold), runs, or was killed and not
 * yet reaped. */
static bool session_dir_exists(int sessions, const char *name) {
    char id[17];
    struct stat st;
    if (!ipb_workspace_unnamed_id(name, id, NULL))
        return false;
    return sessions < 0 || fstatat(sessions, id, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const ipb_ws_entry *)a)->name, ((const ipb_ws_entry *)b)->name);
}

int ipb_workspaces_list(ipb_ws_list *ret, ipb_error **err) {
    memset(ret, 0, sizeof(*ret));
    int rootfd = -1, sessions = -1;
    if (open_root(&ret->root, &rootfd, &sessions, err) < 0) {
        if (rootfd >= 0)
            close(rootfd);
        if (sessions >= 0)
            close(sessions);
        free(ret->root);
        ret->root = NULL;
        return -1;
    }
    cleanup_close int sfd = sessions;
    DIR *dir = fdopendir(rootfd);
    if (!dir) {
        close(rootfd);
        ipb_ws_list_free(ret);
        return ipb_error_set(err, errno, "reading the workspaces");
    }
    struct dirent *de;
    size_t cap = 0;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.')
            continue; /* ".", "..", and a prune's work in progress */
        cleanup_close int fd =
            openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue; /* not a directory (nothing ipybox made) */
        if (ret->n == cap) {
            cap = cap ? cap * 2 : 16;
            ipb_ws_entry *v = realloc(ret->v, cap * sizeof(*v));
            if (!v)
                goto oom;
            ret->v = v;
        }
        ipb_ws_entry *e = &ret->v[ret->n];
        memset(e, 0, sizeof(*e));
        if (!(e->name = strdup(de->d_name)))
            goto oom;
        ret->n++;
        char id[17];
        e->unnamed = ipb_workspace_unnamed_id(e->name, id, NULL);
        /* In use: a live session holds it shared (an exclusive try fails), or, unnamed, its
         * session is being made. The try is let go at once. */
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            (void)flock(fd, LOCK_UN);
        else
            e->in_use = errno == EWOULDBLOCK;
        if (e->unnamed && !e->in_use && session_dir_exists(sfd, e->name))
            e->in_use = true;
        if (ipb_tree_usage_at(fd, &e->usage) < 0)
            e->usage.partial = true;
    }
    closedir(dir);
    if (ret->n)
        qsort(ret->v, ret->n, sizeof(*ret->v), by_name);
    return 0;
oom:
    closedir(dir);
    ipb_ws_list_free(ret);
    return ipb_error_set(err, ENOMEM, "the list of workspaces");
}

void ipb_ws_list_free(ipb_ws_list *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].name);
    free(l->v);
    free(l->root);
    memset(l, 0, sizeof(*l));
}

/* Removes rootfd/name, held exclusively at fd: renamed aside first, then emptied on fds. */
static int remove_held(int rootfd, const char *name, int fd, char *why, size_t why_size) {
    struct stat st, at;
    if (fstat(fd, &st) < 0 || fstatat(rootfd, name, &at, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != at.st_dev ||
        st.st_ino != at.st_ino) {
        snprintf(why, why_size, "it changed while it was being removed; left alone");
        return -1;
    }
    char aside[64];
    if (strncmp(name, PRUNING_PREFIX, strlen(PRUNING_PREFIX))) {
        unsigned char rnd[8];
        char hex[17];
        if (ipb_random(rnd, sizeof(rnd)) < 0) {
            snprintf(why, why_size, "drawing a random name to move it aside: %s", strerror(errno));
            return -1;
        }
        ipb_hex(rnd, sizeof(rnd), hex);
        snprintf(aside, sizeof(aside), PRUNING_PREFIX "%s", hex);
        if (renameat2(rootfd, name, rootfd, aside, RENAME_NOREPLACE) < 0) {
            snprintf(why, why_size, "moving it aside: %s", strerror(errno));
            return -1;
        }
        name = aside;
    }
    /* Sandbox code may have taken the write bit off the top. */
    (void)fchmod(fd, 0700);
    int r = ipb_empty_dir_at(fd);
    if (r == 0 && unlinkat(rootfd, name, AT_REMOVEDIR) < 0)
        r = -errno;
    if (r < 0) {
        snprintf(why, why_size, "removing it: %s (what is left is %s, removed by the next prune)", strerror(-r), name);
        return -1;
    }
    return 0;
}

/* One candidate: 1 when it failed, else 0. */
static int prune_one(int rootfd, int sessions, const char *name, long older_than, ipb_prune_report report, void *ctx) {
    char why[512] = "";
    ipb_tree_usage u = {0};
    bool aside = !strncmp(name, PRUNING_PREFIX, strlen(PRUNING_PREFIX));
    if (!aside && session_dir_exists(sessions, name)) {
        report(ctx, name, IPB_PRUNE_IN_USE, &u, NULL);
        return 0;
    }
    cleanup_close int fd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, sizeof(why), "%s",
                 errno == ENOENT                      ? "no such workspace"
                 : errno == ELOOP || errno == ENOTDIR ? "not a directory (nothing ipybox made); left alone"
                                                      : strerror(errno));
        report(ctx, name, IPB_PRUNE_FAILED, &u, why);
        return 1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK) {
            report(ctx, name, IPB_PRUNE_IN_USE, &u, NULL);
            return 0;
        }
        /* No flock here: nothing could tell whether a session uses it. */
        snprintf(why, sizeof(why), "cannot lock it (%s), so cannot tell whether a session uses it; left alone",
                 strerror(errno));
        report(ctx, name, IPB_PRUNE_FAILED, &u, why);
        return 1;
    }
    (void)ipb_tree_usage_at(fd, &u);
    if (!aside && older_than > 0 && u.newest > time(NULL) - older_than) {
        report(ctx, name, IPB_PRUNE_RECENT, &u, NULL);
        return 0;
    }
    if (remove_held(rootfd, name, fd, why, sizeof(why)) < 0) {
        report(ctx, name, IPB_PRUNE_FAILED, &u, why);
        return 1;
    }
    if (!aside)
        report(ctx, name, IPB_PRUNE_REMOVED, &u, NULL);
    return 0;
}

int ipb_workspaces_prune(long older_than, char *const *names, size_t n_names, ipb_prune_report report, void *ctx,
                         ipb_error **err) {
    /* Session directories of supervisors that are gone first: their workspaces are no one's. */
    (void)ipb_session_dirs_reap_stale();
    cleanup_free char *root = NULL;
    int rootfd = -1, sessions = -1;
    if (open_root(&root, &rootfd, &sessions, err) < 0) {
        if (rootfd >= 0)
            close(rootfd);
        if (sessions >= 0)
            close(sessions);
        return -1;
    }
    cleanup_close int sfd = sessions;
    int failed = 0;
    if (names) {
        for (size_t i = 0; i < n_names; i++)
            failed += prune_one(rootfd, sfd, names[i], older_than, report, ctx);
        close(rootfd);
        return failed;
    }
    DIR *dir = fdopendir(rootfd);
    if (!dir) {
        close(rootfd);
        return ipb_error_set(err, errno, "reading %s", root);
    }
    /* Collected first: removing while readdir runs could skip or repeat entries. */
    ipb_strv todo = {0};
    struct dirent *de;
    char id[17];
    while ((de = readdir(dir)))
        if ((ipb_workspace_unnamed_id(de->d_name, id, NULL) ||
             !strncmp(de->d_name, PRUNING_PREFIX, strlen(PRUNING_PREFIX))) &&
            ipb_strv_push(&todo, de->d_name) < 0) {
            closedir(dir);
            ipb_strv_free(&todo);
            return ipb_error_set(err, ENOMEM, "pruning");
        }
    for (size_t i = 0; i < todo.n; i++)
        failed += prune_one(dirfd(dir), sfd, todo.v[i], older_than, report, ctx);
    closedir(dir);
    ipb_strv_free(&todo);
    return failed;
}
