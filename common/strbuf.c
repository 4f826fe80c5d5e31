#include "strbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(ipb_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->len + extra + 1) {
        if (ncap > ((size_t)1 << 40))
            return -ENOMEM;
        ncap *= 2;
    }
    char *n = realloc(b->data, ncap);
    if (!n)
        return -ENOMEM;
    b->data = n;
    b->cap = ncap;
    return 0;
}

int ipb_buf_append(ipb_buf *b, const void *data, size_t len) {
    int r = reserve(b, len);
    if (r < 0)
        return r;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int ipb_buf_appendf(ipb_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -ENOMEM;
    int r = ipb_buf_append(b, s, (size_t)n);
    free(s);
    return r;
}

void ipb_buf_consume(ipb_buf *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data)
        b->data[b->len] = '\0';
}

void ipb_buf_reset(ipb_buf *b) {
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void ipb_buf_free(ipb_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

const char *ipb_buf_cstr(ipb_buf *b) {
    if (reserve(b, 0) < 0)
        return "";
    b->data[b->len] = '\0';
    return b->data;
}

char *ipb_vstrdupf(const char *fmt, va_list ap) {
    char *s = NULL;
    return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

char *ipb_strdupf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = ipb_vstrdupf(fmt, ap);
    va_end(ap);
    return s;
}
