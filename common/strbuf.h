/* A growable byte buffer with an optional cap. */
#pragma once
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ipb_buf {
    char *data;
    size_t len, cap;
} ipb_buf;

int ipb_buf_append(ipb_buf *b, const void *data, size_t len);
int ipb_buf_appendf(ipb_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes. */
void ipb_buf_consume(ipb_buf *b, size_t n);
void ipb_buf_reset(ipb_buf *b);
void ipb_buf_free(ipb_buf *b);
/* NUL-terminates (not counted in len) and returns data. */
const char *ipb_buf_cstr(ipb_buf *b);

/* A malloc'd formatted string, or NULL when out of memory. */
char *ipb_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *ipb_vstrdupf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
