/* Errors that read as sentences: functions return < 0 and fill *err with what failed and
 * why; callers add context on the way up with ipb_error_wrap(). */
#pragma once
#include <stdarg.h>

typedef struct ipb_error {
    int errnum; /* errno of the root cause, 0 if none */
    char *msg;  /* full sentence, owned */
} ipb_error;

/* Sets *err (if err != NULL and *err is NULL) to "fmt: strerror(errnum)" (or just fmt when
 * errnum is 0). Always returns -1 so that callers can `return ipb_error_set(...)`. */
int ipb_error_set(ipb_error **err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prepends "context: " to an existing error. Returns -1. */
int ipb_error_wrap(ipb_error **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ipb_error_free(ipb_error *err);
void ipb_error_freep(ipb_error **err);
const char *ipb_error_msg(const ipb_error *err);
