/* Error sentences and small helpers shared by the MCP client's files. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "mcpc_internal.h"

int mcpc_fail(ipb_error **err, int errnum, const char *fmt, ...) {
    if (!err || *err)
        return -1;
    ipb_error *e = calloc(1, sizeof(*e));
    if (!e)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&e->msg, fmt, ap) < 0)
        e->msg = NULL;
    va_end(ap);
    e->errnum = errnum;
    *err = e;
    return -1;
}

void mcpc_reword(ipb_error **err, const char *fmt, ...) {
    if (!err || !*err)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) >= 0) {
        free((*err)->msg);
        (*err)->msg = s;
    }
    va_end(ap);
}

long mcpc_ms_left(long deadline) {
    long left = deadline - ipb_now_ms();
    return left > 0 ? left : 0;
}

void mcpc_excerpt(const char *s, size_t len, char *out, size_t max) {
    size_t n = len < max ? len : max;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : (c == '\n' || c == '\r' || c == '\t') ? ' ' : '?';
    }
    /* Trailing spaces from line ends read badly at the end of a sentence. */
    while (o > 0 && out[o - 1] == ' ')
        o--;
    if (len > max) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

bool mcpc_cancelled(int fd) {
    if (fd < 0)
        return false;
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}
