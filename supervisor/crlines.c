#include "crlines.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A cell holds one character's bytes, the first in the low byte. A byte that starts no
 * valid sequence is kept alone, marked by 0xFF (never part of UTF-8) in the second byte, so
 * that whatever came in goes out byte for byte. */
#define RAW_MARK 0xFF00u

static size_t cell_len(uint32_t cell) {
    unsigned b0 = cell & 0xFF;
    if ((cell & 0xFF00u) == RAW_MARK || b0 < 0x80)
        return 1;
    return b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
}

/* The character at s: its byte count (its cell in *ret), or 0 when s ends inside what may
 * still become a valid sequence. */
static size_t decode(const unsigned char *s, size_t n, uint32_t *ret) {
    unsigned b0 = s[0];
    size_t need = b0 < 0x80                    ? 0
                  : (b0 >= 0xC2 && b0 <= 0xDF) ? 1
                  : (b0 >= 0xE0 && b0 <= 0xEF) ? 2
                  : (b0 >= 0xF0 && b0 <= 0xF4) ? 3
                                               : 9;
    if (need == 9) {
        *ret = b0 | RAW_MARK;
        return 1;
    }
    uint32_t cell = b0;
    for (size_t k = 1; k <= need; k++) {
        if (k >= n)
            return 0;
        if ((s[k] & 0xC0) != 0x80) {
            *ret = b0 | RAW_MARK;
            return 1;
        }
        cell |= (uint32_t)s[k] << (8 * k);
    }
    *ret = cell;
    return need + 1;
}

/* Appends the held line and empties it. */
static int commit(ipb_crlines *c, ipb_buf *out) {
    if (c->bytes.len) {
        int r = ipb_buf_append(out, c->bytes.data, c->bytes.len);
        ipb_buf_reset(&c->bytes);
        c->bytes_chars = 0;
        return r < 0 ? -ENOMEM : 0;
    }
    char chunk[4096];
    size_t n = 0;
    for (size_t i = 0; i < c->len; i++) {
        if (n + 4 > sizeof(chunk)) {
            if (ipb_buf_append(out, chunk, n) < 0)
                return -ENOMEM;
            n = 0;
        }
        uint32_t cell = c->cells[i];
        if (cell < 0x80) {
            chunk[n++] = (char)cell;
            continue;
        }
        size_t l = cell_len(cell);
        for (size_t k = 0; k < l; k++)
            chunk[n++] = (char)(cell >> (8 * k));
    }
    c->len = c->col = 0;
    return n && ipb_buf_append(out, chunk, n) < 0 ? -ENOMEM : 0;
}

/* Room for one more cell (the line is let out at IPB_CRLINES_HOLD_MAX, so never more). */
static int grow(ipb_crlines *c) {
    if (c->len < c->cap)
        return 0;
    if (c->cap >= IPB_CRLINES_HOLD_MAX)
        return -ENOMEM; /* (cannot happen: a full line is let out first) */
    size_t cap = c->cap ? 2 * c->cap : 256;
    if (cap > IPB_CRLINES_HOLD_MAX)
        cap = IPB_CRLINES_HOLD_MAX;
    uint32_t *n = realloc(c->cells, cap * sizeof(*n));
    if (!n)
        return -ENOMEM;
    c->cells = n;
    c->cap = cap;
    return 0;
}

static int put(ipb_crlines *c, uint32_t cell) {
    if (c->col < c->len) {
        c->cells[c->col++] = cell;
        return 0;
    }
    if (grow(c) < 0)
        return -ENOMEM;
    c->cells[c->len++] = cell;
    c->col = c->len;
    return 0;
}

/* The held bytes into cells (the cursor moves or a stray byte comes): each was appended as
 * one well-formed character, so decoding them again cuts them the same way. */
static int to_cells(ipb_crlines *c) {
    const unsigned char *b = (const unsigned char *)c->bytes.data;
    for (size_t i = 0; i < c->bytes.len;) {
        uint32_t cell;
        size_t k = decode(b + i, c->bytes.len - i, &cell);
        if (k == 0 || put(c, cell) < 0)
            return -ENOMEM; /* (k == 0 cannot happen: only whole characters are held) */
        i += k;
    }
    ipb_buf_reset(&c->bytes);
    c->bytes_chars = 0;
    return 0;
}

/* The length of the run of ASCII at s that holds no '\r' or '\n', eight bytes at a time. */
static size_t plain_ascii_run(const unsigned char *s, size_t n) {
#define HAS_ZERO_BYTE(v) (((v)-0x0101010101010101ULL) & ~(v)&0x8080808080808080ULL)
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t w;
        memcpy(&w, s + k, 8);
        if ((w & 0x8080808080808080ULL) | HAS_ZERO_BYTE(w ^ 0x0d0d0d0d0d0d0d0dULL) |
            HAS_ZERO_BYTE(w ^ 0x0a0a0a0a0a0a0a0aULL))
            break;
    }
#undef HAS_ZERO_BYTE
    while (k < n && s[k] < 0x80 && s[k] != '\r' && s[k] != '\n')
        k++;
    return k;
}

/* Appends to the held bytes: n bytes that are `chars` well-formed characters. */
static int add_bytes(ipb_crlines *c, const unsigned char *s, size_t n, size_t chars, ipb_buf *out) {
    if (ipb_buf_append(&c->bytes, s, n) < 0)
        return -ENOMEM;
    c->bytes_chars += chars;
    return c->bytes_chars >= IPB_CRLINES_HOLD_MAX ? commit(c, out) : 0;
}

size_t ipb_crlines_plain_prefix(const ipb_crlines *c, const char *text, size_t len) {
    if (ipb_crlines_holding(c) || !len)
        return 0;
    const char *cr = memchr(text, '\r', len);
    const char *nl = memrchr(text, '\n', cr ? (size_t)(cr - text) : len);
    return nl ? (size_t)(nl - text) + 1 : 0;
}

static int feed(ipb_crlines *c, const unsigned char *s, size_t len, ipb_buf *out) {
    size_t i = 0;
    size_t next_cr = 0; /* where the next '\r' at or after i is (len: none); valid while >= i */
    bool cr_known = false;
    while (i < len) {
        if (c->len == 0 && c->bytes.len == 0) {
            /* Nothing held: whole lines before the next '\r' go out as they are. */
            if (!cr_known || next_cr < i) {
                const unsigned char *cr = memchr(s + i, '\r', len - i);
                next_cr = cr ? (size_t)(cr - s) : len;
                cr_known = true;
            }
            const unsigned char *nl = next_cr > i ? memrchr(s + i, '\n', next_cr - i) : NULL;
            if (nl) {
                size_t end = (size_t)(nl - s) + 1;
                if (ipb_buf_append(out, s + i, end - i) < 0)
                    return -ENOMEM;
                i = end;
                continue;
            }
        }
        unsigned char ch = s[i];
        if (ch == '\n') {
            if (commit(c, out) < 0 || ipb_buf_append(out, "\n", 1) < 0)
                return -ENOMEM;
            i++;
            continue;
        }
        if (ch == '\r') {
            if (c->bytes.len && to_cells(c) < 0)
                return -ENOMEM;
            c->col = 0;
            i++;
            continue;
        }
        if (ch < 0x80 && c->len == 0) {
            /* A line without '\r' so far: its bytes, copied as they are. */
            size_t room = IPB_CRLINES_HOLD_MAX - c->bytes_chars;
            size_t k = plain_ascii_run(s + i, len - i < room ? len - i : room);
            if (add_bytes(c, s + i, k, k, out) < 0)
                return -ENOMEM;
            i += k;
            continue;
        }
        if (ch < 0x80 && c->col == c->len) {
            /* ASCII at the end of the line (the usual long line): appended in a tight loop. */
            if (grow(c) < 0)
                return -ENOMEM;
            size_t k = 0, room = c->cap - c->len;
            for (; k < room && i + k < len; k++) {
                unsigned char b = s[i + k];
                if (b >= 0x80 || b == '\r' || b == '\n')
                    break;
                c->cells[c->len + k] = b;
            }
            c->len += k;
            c->col = c->len;
            i += k;
            if (c->len >= IPB_CRLINES_HOLD_MAX && commit(c, out) < 0)
                return -ENOMEM;
            continue;
        }
        uint32_t cell;
        size_t k = decode(s + i, len - i, &cell);
        if (k == 0) {
            memcpy(c->part, s + i, len - i);
            c->part_len = len - i;
            return 0;
        }
        if (c->len == 0 && (cell & 0xFF00u) != RAW_MARK) {
            if (add_bytes(c, s + i, k, 1, out) < 0)
                return -ENOMEM;
            i += k;
            continue;
        }
        if (c->bytes.len && to_cells(c) < 0)
            return -ENOMEM;
        if (put(c, cell) < 0)
            return -ENOMEM;
        i += k;
        /* A line this long is no progress bar: let it out as it stands. */
        if (c->len >= IPB_CRLINES_HOLD_MAX && commit(c, out) < 0)
            return -ENOMEM;
    }
    return 0;
}

int ipb_crlines_feed(ipb_crlines *c, const char *text, size_t len, ipb_buf *out) {
    if (!c->part_len)
        return feed(c, (const unsigned char *)text, len, out);
    /* A character was cut between pieces (rare): go on from its first bytes. */
    unsigned char *joined = malloc(c->part_len + len);
    if (!joined)
        return -ENOMEM;
    memcpy(joined, c->part, c->part_len);
    if (len)
        memcpy(joined + c->part_len, text, len);
    size_t n = c->part_len + len;
    c->part_len = 0;
    int r = feed(c, joined, n, out);
    free(joined);
    return r;
}

int ipb_crlines_finish(ipb_crlines *c, ipb_buf *out) {
    int r = 0;
    /* A sequence cut short by the end: its bytes are stray ones, written at the cursor. */
    for (size_t k = 0; k < c->part_len && r == 0; k++) {
        if (c->bytes.len)
            r = to_cells(c);
        if (r == 0)
            r = put(c, c->part[k] | RAW_MARK);
        if (r == 0 && c->len >= IPB_CRLINES_HOLD_MAX)
            r = commit(c, out);
    }
    c->part_len = 0;
    if (r == 0)
        r = commit(c, out);
    return r;
}

void ipb_crlines_free(ipb_crlines *c) {
    free(c->cells);
    ipb_buf_free(&c->bytes);
    memset(c, 0, sizeof(*c));
}
