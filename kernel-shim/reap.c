#include "reap.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fdio.h"

/* Reaps what has ended; true when no child is left. */
static bool reap_ready(void) {
    for (;;) {
        pid_t w = waitpid(-1, NULL, WNOHANG);
        if (w > 0)
            continue;
        if (w < 0 && errno == EINTR)
            continue;
        return w < 0 && errno == ECHILD;
    }
}

bool shim_kill_all_bounded(int bound_ms) {
    kill(-1, SIGKILL);
    long deadline = ipb_now_ms() + bound_ms;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        if (reap_ready())
            return true;
        long left = deadline - ipb_now_ms();
        if (left <= 0)
            return false;
        /* Each end raises SIGCHLD (blocked, so it stays pending until taken here or by the
         * caller's signalfd); wake at least every 50 ms in case one was taken elsewhere. */
        long wait = left < 50 ? left : 50;
        struct timespec ts = {0, wait * 1000000L};
        sigtimedwait(&chld, NULL, &ts);
    }
}

/* The walk's guard: PID 1 of its namespace, and a /proc that is that namespace's. */
static bool own_namespace(void) {
    if (getpid() != 1)
        return false;
    char self[16];
    ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);
    if (n <= 0)
        return false;
    self[n] = '\0';
    return !strcmp(self, "1");
}

/* A /proc entry's pid, or 0 when the name is not a plain positive number. */
static pid_t entry_pid(const char *name) {
    if (name[0] < '1' || name[0] > '9' || strlen(name) > 10)
        return 0;
    char *end;
    long v = strtol(name, &end, 10);
    return *end || v <= 0 || v > 0x7fffffff ? 0 : (pid_t)v;
}

/* Whether pid is a zombie whose parent is spare: only spare can reap it, so the walk must not
 * wait for it (it would find it on every pass until the bound). */
static bool zombie_of(pid_t pid, pid_t spare) {
    char path[32], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (ipb_read_small(path, buf, sizeof(buf)) < 0)
        return false;
    /* "pid (comm) S ppid ...": comm may hold anything, so from the last ')'. */
    const char *end = strrchr(buf, ')');
    char state;
    int ppid;
    return end && sscanf(end + 1, " %c %d", &state, &ppid) == 2 && state == 'Z' && ppid == spare;
}

int shim_kill_all_sparing(pid_t spare, int bound_ms, bool *spare_gone) {
    bool gone = false;
    if (spare_gone)
        *spare_gone = false;
    if (!own_namespace())
        return -EPERM;
    long deadline = ipb_now_ms() + bound_ms;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        /* Reap what ended: a pid is reused only after its reap, so what the walk below names
         * is a process of this namespace, or one that was born since (which must die too). */
        for (;;) {
            pid_t w = waitpid(-1, NULL, WNOHANG);
            if (w > 0) {
                if (spare > 1 && w == spare && !gone) {
                    gone = true;
                    if (spare_gone)
                        *spare_gone = true;
                }
                continue;
            }
            if (w < 0 && errno == EINTR)
                continue;
            break;
        }
        DIR *d = opendir("/proc");
        if (!d)
            return -errno;
        unsigned found = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            pid_t pid = entry_pid(e->d_name);
            if (pid <= 1 || (pid == spare && !gone))
                continue;
            kill(pid, SIGKILL);
            if (spare > 1 && !gone && zombie_of(pid, spare))
                continue;
            found++;
        }
        closedir(d);
        if (!found)
            return 1;
        long left = deadline - ipb_now_ms();
        if (left <= 0)
            return 0;
        /* What was found ends (or is a zombie to reap): wait for a SIGCHLD, 10 ms at most. */
        long wait = left < 10 ? left : 10;
        struct timespec ts = {0, wait * 1000000L};
        sigtimedwait(&chld, NULL, &ts);
    }
}
