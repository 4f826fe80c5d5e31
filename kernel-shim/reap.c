#include "reap.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "clock.h"

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
