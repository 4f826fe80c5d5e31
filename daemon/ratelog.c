/* Warnings that a peer can cause at will (refused connections, dropped idle ones) are logged at
 * a bounded rate: the first at once, then at most one line per period, a count of the others. */
#include <stdarg.h>
#include <stdio.h>

#include "daemon_int.h"
#include "log.h"

void ipbd_ratelog(struct ipbd_ratelog *rl, const char *fmt, ...) {
    long now = ipbd_now_ms();
    if (rl->last_ms && now - rl->last_ms < IPBD_RATELOG_MS) {
        rl->suppressed++;
        return;
    }
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (rl->suppressed)
        log_warn("%s (and %u more %s since the last such line)", line, rl->suppressed, rl->what);
    else
        log_warn("%s", line);
    rl->suppressed = 0;
    rl->last_ms = now;
}

void ipbd_ratelog_flush(struct ipbd_ratelog *rl) {
    long now = ipbd_now_ms();
    if (!rl->suppressed || now - rl->last_ms < IPBD_RATELOG_MS)
        return;
    log_warn("%u more %s in the last %ld s", rl->suppressed, rl->what, (now - rl->last_ms + 500) / 1000);
    rl->suppressed = 0;
    rl->last_ms = now;
}
