#include "tmpmark.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

#define PREFIX ".ipybox-tmp-"
#define PREFIX_LEN 12
/* How deep the sweep goes below a tree's root (each level holds two fds). */
#define SWEEP_DEPTH 64
/* Trees this process counts its named temporaries in; past that, a mark stays until swept. */
#define TRACKED 32

bool ipb_tmp_name_is_ours(const char *name) {
    if (strncmp(name, PREFIX, PREFIX_LEN))
        return false;
    const char *h = name + PREFIX_LEN;
    size_t n = 0;
    for (; h[n]; n++)
        if (!((h[n] >= '0' && h[n] <= '9') || (h[n] >= 'a' && h[n] <= 'f')))
            return false;
    return n == 16;
}

static int marks_fd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tracked {
    dev_t dev;
    ino_t ino;
    int n;
} tracked[TRACKED];

int ipb_tmp_marks_open(const char *state) {
    cleanup_close int sfd = open(state, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sfd < 0)
        return -errno;
    if (mkdirat(sfd, "tmp-pending", 0700) < 0 && errno != EEXIST)
        return -errno;
    int fd = openat(sfd, "tmp-pending", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    pthread_mutex_lock(&lock);
    if (marks_fd >= 0)
        close(marks_fd);
    marks_fd = fd;
    pthread_mutex_unlock(&lock);
    return 0;
}

static void mark_name(char out[80], dev_t dev, ino_t ino, long pid) {
    snprintf(out, 80, "%llx-%llx.%ld", (unsigned long long)dev, (unsigned long long)ino, pid);
}

static void mark_prefix(char out[80], dev_t dev, ino_t ino) {
    snprintf(out, 80, "%llx-%llx.", (unsigned long long)dev, (unsigned long long)ino);
}

static struct tracked *find(dev_t dev, ino_t ino, bool add) {
    struct tracked *free_slot = NULL;
    for (int i = 0; i < TRACKED; i++) {
        if (tracked[i].n > 0 && tracked[i].dev == dev && tracked[i].ino == ino)
            return &tracked[i];
        if (tracked[i].n == 0 && !free_slot)
            free_slot = &tracked[i];
    }
    if (add && free_slot) {
        free_slot->dev = dev;
        free_slot->ino = ino;
    }
    return add ? free_slot : NULL;
}

void ipb_tmp_mark(int tree_fd) {
    struct stat st;
    if (tree_fd < 0 || fstat(tree_fd, &st) < 0)
        return;
    char name[80];
    mark_name(name, st.st_dev, st.st_ino, (long)getpid());
    pthread_mutex_lock(&lock);
    struct tracked *t = find(st.st_dev, st.st_ino, true);
    if (marks_fd >= 0 && (!t || t->n == 0)) {
        int fd = openat(marks_fd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
    }
    if (t)
        t->n++;
    pthread_mutex_unlock(&lock);
}

void ipb_tmp_unmark(int tree_fd) {
    struct stat st;
    if (tree_fd < 0 || fstat(tree_fd, &st) < 0)
        return;
    char name[80];
    mark_name(name, st.st_dev, st.st_ino, (long)getpid());
    pthread_mutex_lock(&lock);
    struct tracked *t = find(st.st_dev, st.st_ino, false);
    if (t && --t->n == 0 && marks_fd >= 0)
        unlinkat(marks_fd, name, 0);
    pthread_mutex_unlock(&lock);
}

/* Removes ours in the directory dfd and below, staying on device dev. */
static int sweep_dir(int dfd, dev_t dev, int depth) {
    int lfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lfd < 0)
        return 0;
    DIR *d = fdopendir(lfd);
    if (!d) {
        close(lfd);
        return 0;
    }
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        struct stat st;
        if (ipb_tmp_name_is_ours(name)) {
            /* The name in the directory held, never followed; only a regular file. */
            if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && unlinkat(dfd, name, 0) == 0)
                removed++;
            continue;
        }
        if ((de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) || depth >= SWEEP_DEPTH)
            continue;
        int sfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (sfd < 0)
            continue;
        if (fstat(sfd, &st) == 0 && st.st_dev == dev)
            removed += sweep_dir(sfd, dev, depth + 1);
        close(sfd);
    }
    closedir(d);
    return removed;
}

int ipb_tmp_sweep_tree(int tree_fd) {
    cleanup_close int fd = openat(tree_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return 0;
    return sweep_dir(fd, st.st_dev, 0);
}

int ipb_tmp_sweep(int tree_fd) {
    struct stat st;
    if (fstat(tree_fd, &st) < 0)
        return 0;
    pthread_mutex_lock(&lock);
    int mfd = marks_fd >= 0 ? openat(marks_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    pthread_mutex_unlock(&lock);
    DIR *d = mfd >= 0 ? fdopendir(mfd) : NULL;
    if (!d) {
        if (mfd >= 0)
            close(mfd);
        return 0;
    }
    char prefix[80], mine[80];
    mark_prefix(prefix, st.st_dev, st.st_ino);
    mark_name(mine, st.st_dev, st.st_ino, (long)getpid());
    size_t plen = strlen(prefix);
    int removed = -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, prefix, plen) || !strcmp(de->d_name, mine))
            continue;
        if (removed < 0)
            removed = ipb_tmp_sweep_tree(tree_fd);
        /* Swept: the marks of processes that are gone go (no live session holds the tree). */
        unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
    return removed < 0 ? 0 : removed;
}
