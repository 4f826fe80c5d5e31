#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nofile.h"

static char *vformat(const char *fmt, va_list ap) {
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        return NULL;
    return s;
}

int ipb_error_set(ipb_error **err, int errnum, const char *fmt, ...) {
    if (!err || *err)
        return -1;
    ipb_error *e = calloc(1, sizeof(*e));
    if (!e)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *base = vformat(fmt, ap);
    va_end(ap);
    e->errnum = errnum;
    if (base && errnum) {
        char why[128];
        if (asprintf(&e->msg, "%s: %s", base, ipb_nofile_strerror(errnum, why, sizeof(why))) < 0)
            e->msg = NULL;
        free(base);
    } else {
        e->msg = base;
    }
    *err = e;
    return -1;
}

int ipb_error_wrap(ipb_error **err, const char *fmt, ...) {
    if (!err || !*err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *ctx = vformat(fmt, ap);
    va_end(ap);
    char *joined = NULL;
    if (ctx && asprintf(&joined, "%s: %s", ctx, (*err)->msg ? (*err)->msg : "unknown error") >= 0) {
        free((*err)->msg);
        (*err)->msg = joined;
    }
    free(ctx);
    return -1;
}

void ipb_error_free(ipb_error *err) {
    if (!err)
        return;
    free(err->msg);
    free(err);
}

void ipb_error_freep(ipb_error **err) {
    if (err) {
        ipb_error_free(*err);
        *err = NULL;
    }
}

const char *ipb_error_msg(const ipb_error *err) {
    if (!err)
        return "no error";
    return err->msg ? err->msg : "out of memory while reporting an error";
}
