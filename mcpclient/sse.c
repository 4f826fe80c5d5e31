#include "sse.h"

#include <errno.h>
#include <string.h>

#define DEFAULT_MAX_EVENT ((size_t)16 << 20)

static const char BOM[3] = {'\xef', '\xbb', '\xbf'};

void ipb_sse_init(ipb_sse *p, size_t max_event) {
    memset(p, 0, sizeof(*p));
    p->max_event = max_event ? max_event : DEFAULT_MAX_EVENT;
    p->retry = -1;
}

void ipb_sse_free(ipb_sse *p) {
    ipb_buf_free(&p->line);
    ipb_buf_free(&p->data);
    ipb_buf_free(&p->type);
    ipb_buf_free(&p->id);
}

static int set_buf(ipb_buf *b, const char *s, size_t len) {
    ipb_buf_reset(b);
    return ipb_buf_append(b, s, len);
}

static int dispatch(ipb_sse *p, ipb_sse_callback cb, void *ctx) {
    if (p->data.len == 0) {
        ipb_buf_reset(&p->type);
        return 0;
    }
    /* The data ends with the '\n' of its last line, which is not part of it. */
    p->data.len--;
    p->data.data[p->data.len] = '\0';
    ipb_sse_event ev = {
        .type = p->type.len ? ipb_buf_cstr(&p->type) : "message",
        .data = p->data.data,
        .data_len = p->data.len,
        .id = ipb_buf_cstr(&p->id),
    };
    int r = cb ? cb(ctx, &ev) : 0;
    ipb_buf_reset(&p->data);
    ipb_buf_reset(&p->type);
    return r < 0 ? r : 0;
}

static bool all_digits(const char *s, size_t len) {
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int process_line(ipb_sse *p, ipb_sse_callback cb, void *ctx) {
    const char *l = p->line.data;
    size_t len = p->line.len;
    if (len == 0)
        return dispatch(p, cb, ctx);
    if (l[0] == ':')
        return 0;
    const char *colon = memchr(l, ':', len);
    size_t flen = colon ? (size_t)(colon - l) : len;
    const char *val = colon ? colon + 1 : l + len;
    size_t vlen = len - flen - (colon ? 1 : 0);
    if (vlen && *val == ' ') {
        val++;
        vlen--;
    }
    if (flen == 5 && memcmp(l, "event", 5) == 0)
        return set_buf(&p->type, val, vlen);
    if (flen == 4 && memcmp(l, "data", 4) == 0) {
        int r = ipb_buf_append(&p->data, val, vlen);
        return r < 0 ? r : ipb_buf_append(&p->data, "\n", 1);
    }
    if (flen == 2 && memcmp(l, "id", 2) == 0) {
        if (memchr(val, '\0', vlen))
            return 0;
        return set_buf(&p->id, val, vlen);
    }
    if (flen == 5 && memcmp(l, "retry", 5) == 0 && all_digits(val, vlen)) {
        long ms = 0;
        for (size_t i = 0; i < vlen; i++)
            ms = ms > 100000000L ? ms : ms * 10 + (val[i] - '0');
        p->retry = ms;
    }
    return 0;
}

static int append_line(ipb_sse *p, const char *s, size_t n) {
    if (n == 0)
        return 0;
    if (p->line.len + p->data.len + n > p->max_event)
        return -EMSGSIZE;
    return ipb_buf_append(&p->line, s, n);
}

static int parse(ipb_sse *p, const char *buf, size_t len, ipb_sse_callback cb, void *ctx) {
    size_t i = 0;
    if (p->after_cr && len) {
        p->after_cr = false;
        if (buf[0] == '\n')
            i = 1;
    }
    while (i < len) {
        size_t j = i;
        while (j < len && buf[j] != '\n' && buf[j] != '\r')
            j++;
        int r = append_line(p, buf + i, j - i);
        if (r < 0)
            return r;
        if (j == len)
            return 0;
        r = process_line(p, cb, ctx);
        ipb_buf_reset(&p->line);
        if (r < 0)
            return r;
        if (p->line.len + p->data.len > p->max_event)
            return -EMSGSIZE;
        i = j + 1;
        if (buf[j] == '\r') {
            if (i == len)
                p->after_cr = true;
            else if (buf[i] == '\n')
                i++;
        }
    }
    return 0;
}

int ipb_sse_feed(ipb_sse *p, const char *buf, size_t len, ipb_sse_callback cb, void *ctx) {
    if (p->error)
        return p->error;
    /* One byte-order mark at the very start is dropped; the bytes of a partial one are held
     * until it is clear whether they are one. */
    while (!p->started && len) {
        if (*buf == BOM[p->bom_seen]) {
            buf++;
            len--;
            if (++p->bom_seen == sizeof(BOM))
                p->started = true;
            continue;
        }
        p->started = true;
        int r = parse(p, BOM, p->bom_seen, cb, ctx);
        if (r < 0)
            return p->error = r;
    }
    int r = parse(p, buf, len, cb, ctx);
    if (r < 0)
        p->error = r;
    return r;
}
