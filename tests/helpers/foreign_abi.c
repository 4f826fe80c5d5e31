/* Foreign syscall ABIs: a forked child makes one syscall through the i386 entry (int $0x80)
 * or with the x32 bit set; the parent prints how the child ended as one JSON line:
 *   {"mode":"int80","exited":false,"signal":31,"status":0,"ret":null}
 * "ret" is what the syscall returned when the child survived (it writes it through a pipe).
 * Modes: native (control: plain getpid), int80 (i386 getpid), x32 (x32 getpid),
 *        int80-mkdir / x32-unshare (a harmful call through the foreign ABI). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define X32_BIT 0x40000000L

static long raw64(long nr, long a1) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a1) : "rcx", "r11", "memory");
    return ret;
}

static long int80(long nr, long a1) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a1) : "memory");
    return ret;
}

static char low_buf[64]; /* static data of a non-PIE static binary sits below 4 GiB */

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: foreign_abi native|int80|x32|int80-mkdir|x32-unshare\n");
        return 2;
    }
    const char *mode = argv[1];
    int p[2];
    if (pipe(p) < 0)
        return 3;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 3;
    if (pid == 0) {
        close(p[0]);
        long r;
        if (!strcmp(mode, "native"))
            r = raw64(39 /* getpid */, 0);
        else if (!strcmp(mode, "int80"))
            r = int80(20 /* i386 getpid */, 0);
        else if (!strcmp(mode, "x32"))
            r = raw64(X32_BIT | 39 /* getpid */, 0);
        else if (!strcmp(mode, "int80-mkdir")) {
            strcpy(low_buf, "/app/int80-made-this");
            r = int80(39 /* i386 mkdir */, (long)(unsigned long)low_buf);
        } else if (!strcmp(mode, "x32-unshare"))
            r = raw64(X32_BIT | 272 /* unshare */, 0x10000000 /* CLONE_NEWUSER */);
        else
            _exit(2);
        char out[32];
        int n = snprintf(out, sizeof(out), "%ld", r);
        if (write(p[1], out, (size_t)n) != n)
            _exit(4);
        _exit(0);
    }
    close(p[1]);
    char buf[32] = "";
    ssize_t n = read(p[0], buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 3;
    printf("{\"mode\":\"%s\",\"exited\":%s,\"signal\":%d,\"status\":%d,\"ret\":%s}\n", mode,
           WIFEXITED(status) ? "true" : "false", WIFSIGNALED(status) ? WTERMSIG(status) : 0,
           WIFEXITED(status) ? WEXITSTATUS(status) : -1, n > 0 ? buf : "null");
    return 0;
}
