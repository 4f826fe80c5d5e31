/* Terminal injection: ioctl(fd, TIOCSTI / TIOCLINUX) through the raw syscall, also with high
 * bits set in the 64-bit request (the kernel truncates the command to 32 bits, so a filter
 * comparing all 64 bits would miss it). Usage: ttyinject FD. Prints one JSON object:
 *   {"isatty":1,"TCGETS":{"ret":0,"errno":0},"TIOCSTI":{"ret":-1,"errno":1},...}
 * TCGETS is the control: ioctl itself stays allowed. TIOCSCTTY is attempted first so that,
 * were the filter missing, the tty layer would accept the injection. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

static int fd;
static void attempt(const char *name, unsigned long req, void *arg) {
    long r = syscall(SYS_ioctl, (long)fd, req, arg);
    printf(",\"%s\":{\"ret\":%ld,\"errno\":%d}", name, r, r < 0 ? errno : 0);
}

int main(int argc, char **argv) {
    fd = argc > 1 ? atoi(argv[1]) : 0;
    static char inject[] = "Z";
    struct termios t;
    char linux_arg[2] = {2 /* TIOCL_SETSEL... any subcode */, 0};
    printf("{\"isatty\":%d", isatty(fd));
    attempt("TCGETS", TCGETS, &t);
    /* Make the terminal our controlling tty first (we lead our own session in the sandbox),
     * so that without the filter TIOCSTI would be allowed by the tty layer itself. */
    attempt("TIOCSCTTY", TIOCSCTTY, 0);
    attempt("TIOCSTI", TIOCSTI, inject);
    attempt("TIOCSTI_hi", (1UL << 32) | TIOCSTI, inject);
    attempt("TIOCSTI_hi2", 0xdeadbeef00000000UL | TIOCSTI, inject);
    attempt("TIOCLINUX", TIOCLINUX, linux_arg);
    attempt("TIOCLINUX_hi", (1UL << 63) | TIOCLINUX, linux_arg);
    printf("}\n");
    return 0;
}
