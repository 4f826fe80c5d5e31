#include "nofile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

long ipb_nofile_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return -1;
    return (long)rl.rlim_cur;
}

long ipb_nofile_raise(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    return ipb_nofile_limit();
}

const char *ipb_nofile_strerror(int errnum, char *buf, unsigned size) {
    long n = errnum == EMFILE ? ipb_nofile_limit() : -1;
    if (errnum == EMFILE && n >= 0)
        snprintf(buf, size, "too many open files (the limit is %ld)", n);
    else if (errnum == EMFILE)
        snprintf(buf, size, "too many open files");
    else if (errnum == ENFILE)
        snprintf(buf, size, "too many open files in the system (the limit is /proc/sys/fs/file-max)");
    else
        snprintf(buf, size, "%s", strerror(errnum));
    return buf;
}
