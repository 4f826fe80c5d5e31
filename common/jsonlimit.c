#include "jsonlimit.h"

#include <stddef.h>
#include <string.h>

size_t ipb_json_values_bound(const char *s, size_t len, size_t stop) {
    size_t n = 1;
    const char *p = s, *end = s + len;
    while (p < end) {
        /* The next byte that matters outside a string. */
        const char *q = p;
        while (q < end && *q != '"' && *q != '{' && *q != '[' && *q != ',')
            q++;
        if (q == end)
            break;
        if (*q != '"') {
            if (++n > stop)
                return n;
            p = q + 1;
            continue;
        }
        /* Inside a string: to its closing quote (an escaped one does not close it). */
        q++;
        for (;;) {
            const char *quote = memchr(q, '"', (size_t)(end - q));
            if (!quote)
                return n;
            size_t slashes = 0;
            while (quote - slashes > q && quote[-(ptrdiff_t)slashes - 1] == '\\')
                slashes++;
            q = quote + 1;
            if (slashes % 2 == 0)
                break;
        }
        p = q;
    }
    return n;
}

bool ipb_json_values_ok(const char *s, size_t len, size_t max) { return ipb_json_values_bound(s, len, max) <= max; }
