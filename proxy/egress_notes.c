#include "egress_notes.h"

#include <stdio.h>
#include <string.h>

static bool plain_byte(unsigned char c, bool keep_space) {
    return (c > ' ' && c < 0x7f && c != '\\') || (keep_space && c == ' ');
}

char *ipb_egress_escape(const char *s, size_t len, bool keep_space, char *out, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    if (cap < 4) {
        if (cap)
            out[0] = '\0';
        return out;
    }
    size_t total = 0;
    for (size_t i = 0; i < len; i++)
        total += plain_byte((unsigned char)s[i], keep_space) ? 1 : 4;
    /* All of it, or whole units up to room for "...". */
    size_t room = total <= cap - 1 ? cap - 1 : cap - 4, o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool plain = plain_byte(c, keep_space);
        if (o + (plain ? 1 : 4) > room)
            break;
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (total > cap - 1) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

static uint64_t fnv(uint64_t h, const void *p, size_t len) {
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t key_hash(const char *host, bool dns, uint16_t port, const char *why) {
    uint64_t h = 14695981039346656037ULL;
    h = fnv(h, host, strlen(host) + 1);
    h = fnv(h, &dns, sizeof(dns));
    h = fnv(h, &port, sizeof(port));
    return fnv(h, why, strlen(why) + 1);
}

ipb_egress_note *ipb_egress_notes_add(ipb_egress_notes *n, const char *host, size_t host_len, bool dns, uint16_t port,
                                      const char *why) {
    char h[IPB_EGRESS_NOTE_HOST], w[IPB_EGRESS_NOTE_WHY];
    ipb_egress_escape(host, host_len, false, h, sizeof(h));
    ipb_egress_escape(why, strlen(why), true, w, sizeof(w));
    if (dns)
        port = 0;
    for (size_t i = 0; i < n->n; i++) {
        ipb_egress_note *e = &n->list[i];
        if (e->dns == dns && e->port == port && !strcmp(e->host, h) && !strcmp(e->why, w)) {
            e->count++;
            return NULL;
        }
    }
    if (n->n < IPB_EGRESS_NOTES_MAX) {
        ipb_egress_note *e = &n->list[n->n++];
        memset(e, 0, sizeof(*e));
        memcpy(e->host, h, sizeof(h));
        memcpy(e->why, w, sizeof(w));
        e->dns = dns;
        e->port = port;
        e->count = 1;
        return e;
    }
    uint64_t k = key_hash(h, dns, port, w);
    for (size_t i = 0; i < n->nseen; i++)
        if (n->seen[i] == k)
            return NULL;
    if (n->nseen < IPB_EGRESS_NOTES_SEEN)
        n->seen[n->nseen++] = k;
    else
        n->more_at_least = true; /* told apart no more: each counts, the count is a bound */
    if (n->more < 1000000)
        n->more++;
    return NULL;
}

void ipb_egress_notes_take(ipb_egress_notes *n, ipb_egress_notes *out) {
    memset(out, 0, sizeof(*out));
    for (size_t i = n->told; i < n->n; i++)
        out->list[out->n++] = n->list[i];
    n->told = n->n;
    out->more = n->more - n->more_told;
    out->more_at_least = n->more_at_least;
    n->more_told = n->more;
}

void ipb_egress_notes_clear(ipb_egress_notes *n) { memset(n, 0, sizeof(*n)); }

bool ipb_egress_notes_any(const ipb_egress_notes *n) { return n->n > 0 || n->more > 0; }

void ipb_egress_note_line(const ipb_egress_note *e, char *buf, size_t len) {
    char dest[IPB_EGRESS_NOTE_HOST + 32], times[32] = "", tail[IPB_EGRESS_NOTE_ALLOW + 96] = "";
    if (!e->host[0])
        snprintf(dest, sizeof(dest), "a connection"); /* no destination: a cap */
    else if (e->dns)
        snprintf(dest, sizeof(dest), "DNS lookup of %s", e->host);
    else if (e->is_addr && strchr(e->host, ':'))
        snprintf(dest, sizeof(dest), "[%s]:%u", e->host, e->port);
    else
        snprintf(dest, sizeof(dest), "%s:%u", e->host, e->port);
    if (e->count > 1)
        snprintf(times, sizeof(times), " (%u times)", e->count);
    if (e->allow[0])
        snprintf(tail, sizeof(tail), "; allow it with %s%s", e->allow,
                 e->starts_list ? " (with no list now, that starts one: list every destination needed)" : "");
    else if (e->no_option)
        snprintf(tail, sizeof(tail), "; no option allows it");
    snprintf(buf, len, "[ipybox] egress refused: %s%s \xe2\x80\x94 %s%s", dest, times, e->why, tail);
}

void ipb_egress_notes_more_line(const ipb_egress_notes *n, char *buf, size_t len) {
    if (!n->more) {
        if (len)
            buf[0] = '\0';
        return;
    }
    snprintf(buf, len, "[ipybox] egress refused: ... and %s%u more destination%s (the host's log has them)",
             n->more_at_least ? "at least " : "", n->more, n->more == 1 ? "" : "s");
}
