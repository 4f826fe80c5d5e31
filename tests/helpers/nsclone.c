/* Namespace creation through raw clone() and clone3(), which Python cannot call safely.
 * Prints one JSON object: for each attempt the return value and errno, e.g.
 *   {"clone3_plain":{"ret":-1,"errno":38}, "clone_newuser":{"ret":-1,"errno":1}, ...}
 * A child that does get created (ret 0 in the child) exits at once with status 99, so the
 * parent can report "child":99 and the test sees the hole. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static int first = 1;

static void report(const char *name, long ret, int err) {
    int child = -1;
    if (ret > 0) {
        int st;
        if (waitpid((pid_t)ret, &st, __WALL) == (pid_t)ret)
            child = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    printf("%s\"%s\":{\"ret\":%ld,\"errno\":%d,\"child\":%d}", first ? "" : ",", name, ret < 0 ? -1L : ret,
           ret < 0 ? err : 0, child);
    first = 0;
    fflush(stdout);
}

/* Raw clone(flags|SIGCHLD) with a NULL stack: the child continues on a copy of our stack
 * like fork(), and leaves at once. */
static void try_clone(const char *name, unsigned long flags) {
    fflush(stdout);
    long r = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
    if (r == 0)
        _exit(99);
    report(name, r, errno);
}

static void try_clone3(const char *name, uint64_t flags) {
    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.flags = flags;
    ca.exit_signal = SIGCHLD;
    fflush(stdout);
    long r = syscall(SYS_clone3, &ca, sizeof(ca));
    if (r == 0)
        _exit(99);
    report(name, r, errno);
}

int main(void) {
    printf("{");
    try_clone("clone_plain", 0); /* control: plain fork through clone() must work */
    try_clone("clone_newuser", CLONE_NEWUSER);
    try_clone("clone_newns", CLONE_NEWNS);
    try_clone("clone_newpid", CLONE_NEWPID);
    try_clone("clone_newnet", CLONE_NEWNET);
    try_clone("clone_newipc", CLONE_NEWIPC);
    try_clone("clone_newuts", CLONE_NEWUTS);
    try_clone("clone_newcgroup", CLONE_NEWCGROUP);
    try_clone("clone_newtime", CLONE_NEWTIME);
    try_clone("clone_newuser_hibits", CLONE_NEWUSER | (1UL << 40));
    try_clone3("clone3_plain", 0);
    try_clone3("clone3_newuser", CLONE_NEWUSER);
    try_clone3("clone3_newns", CLONE_NEWNS);
    printf("}\n");
    return 0;
}
