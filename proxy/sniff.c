#include "sniff.h"

#include <string.h>
#include <strings.h>

static enum ipb_sniff_kind bad(ipb_sniff *o, const char *why) {
    o->kind = IPB_SNIFF_BAD;
    o->why = why;
    return IPB_SNIFF_BAD;
}

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be24(const uint8_t *p) { return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]; }

/* ---- TLS ---- */

/* The server_name extension body: a list of (type, name); the first host_name counts. */
static enum ipb_sniff_kind parse_sni_ext(const uint8_t *p, size_t n, ipb_sniff *o) {
    if (n < 2 || be16(p) != n - 2)
        return bad(o, "malformed TLS server_name extension");
    p += 2;
    n -= 2;
    while (n) {
        if (n < 3)
            return bad(o, "malformed TLS server_name extension");
        uint8_t type = p[0];
        size_t l = be16(p + 1);
        if (n < 3 + l)
            return bad(o, "malformed TLS server_name extension");
        if (type == 0) {
            if (l == 0 || l > IPB_NAME_MAX || memchr(p + 3, 0, l))
                return bad(o, "bad TLS server name");
            memcpy(o->host, p + 3, l);
            o->host[l] = '\0';
            return IPB_SNIFF_TLS;
        }
        p += 3 + l;
        n -= 3 + l;
    }
    return IPB_SNIFF_TLS;
}

static enum ipb_sniff_kind parse_client_hello(const uint8_t *p, size_t n, ipb_sniff *o) {
    o->kind = IPB_SNIFF_TLS;
    /* version (2), random (32) */
    if (n < 34)
        return bad(o, "short TLS ClientHello");
    p += 34;
    n -= 34;
    /* session id */
    if (n < 1 || n < 1u + p[0] || p[0] > 32)
        return bad(o, "malformed TLS ClientHello");
    n -= 1u + p[0];
    p += 1u + p[0];
    /* cipher suites */
    if (n < 2)
        return bad(o, "malformed TLS ClientHello");
    size_t l = be16(p);
    if (l < 2 || (l & 1) || n < 2 + l)
        return bad(o, "malformed TLS ClientHello");
    p += 2 + l;
    n -= 2 + l;
    /* compression methods */
    if (n < 1 || p[0] < 1 || n < 1u + p[0])
        return bad(o, "malformed TLS ClientHello");
    n -= 1u + p[0];
    p += 1u + p[0];
    if (n == 0)
        return IPB_SNIFF_TLS; /* no extensions, so no server name */
    if (n < 2 || be16(p) != n - 2)
        return bad(o, "malformed TLS extensions");
    p += 2;
    n -= 2;
    bool seen_sni = false;
    enum ipb_sniff_kind k = IPB_SNIFF_TLS;
    while (n) {
        if (n < 4)
            return bad(o, "malformed TLS extensions");
        uint32_t type = be16(p);
        size_t el = be16(p + 2);
        if (n < 4 + el)
            return bad(o, "malformed TLS extensions");
        if (type == 0) {
            if (seen_sni)
                return bad(o, "two TLS server_name extensions");
            seen_sni = true;
            k = parse_sni_ext(p + 4, el, o);
            if (k == IPB_SNIFF_BAD)
                return k;
        }
        p += 4 + el;
        n -= 4 + el;
    }
    return k;
}

/* Handshake messages may span records: gather the fragments of the first message. */
static enum ipb_sniff_kind sniff_tls(const uint8_t *buf, size_t len, ipb_sniff *o) {
    static __thread uint8_t hs[IPB_SNIFF_MAX];
    size_t hl = 0, off = 0;
    while (off + 5 <= len) {
        const uint8_t *r = buf + off;
        if (r[0] != 0x16 || r[1] != 3)
            return bad(o, "TLS record that is not a handshake");
        size_t rl = be16(r + 3);
        if (rl == 0 || rl > 16384 + 2048)
            return bad(o, "bad TLS record length");
        size_t have = len - off - 5 < rl ? len - off - 5 : rl;
        if (hl + have > sizeof(hs))
            return bad(o, "TLS ClientHello too large");
        memcpy(hs + hl, r + 5, have);
        hl += have;
        if (hl >= 4) {
            if (hs[0] != 1)
                return bad(o, "TLS handshake that is not a ClientHello");
            size_t ml = be24(hs + 1);
            if (ml + 4 > sizeof(hs))
                return bad(o, "TLS ClientHello too large");
            if (hl >= ml + 4)
                return parse_client_hello(hs + 4, ml, o);
        }
        if (have < rl)
            break;
        off += 5 + rl;
    }
    if (len >= IPB_SNIFF_MAX)
        return bad(o, "TLS ClientHello too large");
    return IPB_SNIFF_MORE;
}

/* ---- HTTP ---- */

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"};

static bool tchar(uint8_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* What a recipient may take for the SP of a request line, or skip before it: RFC 9112, 3
 * allows HTAB, VT, FF and a bare CR; Python's http.server splits the line (as Latin-1) at any
 * whitespace, which adds 0x1c-0x1f, 0x85 and 0xa0. */
static bool line_space(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' || (c >= 0x1c && c <= 0x1f) || c == 0x85 ||
           c == 0xa0;
}

bool ipb_sniff_split_authority(const char *s, size_t len, char *host, size_t host_size, uint16_t *port) {
    const char *h = s, *end = s + len;
    size_t hl;
    const char *rest;
    *port = 0;
    if (len && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return false;
        h = s + 1;
        hl = (size_t)(close - h);
        rest = close + 1;
    } else {
        const char *colon = memchr(s, ':', len);
        hl = colon ? (size_t)(colon - s) : len;
        rest = s + hl;
    }
    if (hl == 0 || hl >= host_size)
        return false;
    if (rest < end) {
        if (*rest != ':' || rest + 1 == end || end - rest > 6)
            return false;
        unsigned v = 0;
        for (const char *q = rest + 1; q < end; q++) {
            if (*q < '0' || *q > '9')
                return false;
            v = v * 10 + (unsigned)(*q - '0');
        }
        if (v == 0 || v > 65535)
            return false;
        *port = (uint16_t)v;
    }
    for (size_t i = 0; i < hl; i++)
        if ((uint8_t)h[i] <= ' ' || h[i] == '/' || h[i] == '@' || (uint8_t)h[i] >= 0x7f)
            return false;
    memcpy(host, h, hl);
    host[hl] = '\0';
    return true;
}

static enum ipb_sniff_kind sniff_http(const uint8_t *buf, size_t len, size_t mlen, ipb_sniff *o) {
    const char *b = (const char *)buf;
    const char *end = memmem(b, len, "\r\n\r\n", 4);
    /* A line ended by a bare LF: servers differ on it, so it is refused, not guessed. */
    size_t scan = end ? (size_t)(end - b) + 4 : len;
    for (size_t q = 0; q < scan; q++)
        if (buf[q] == '\n' && (q == 0 || buf[q - 1] != '\r'))
            return bad(o, "an HTTP request line or header ended by a bare LF");
    if (!end)
        return len >= IPB_SNIFF_MAX ? bad(o, "HTTP request head too large") : IPB_SNIFF_MORE;
    size_t head = (size_t)(end - b) + 4;
    bool connect = mlen == 7 && !memcmp(b, "CONNECT", 7);
    o->kind = connect ? IPB_SNIFF_CONNECT : IPB_SNIFF_HTTP;
    /* request line: METHOD SP target SP HTTP/1.x */
    const char *eol = memmem(b, head, "\r\n", 2);
    for (const char *q = b; q < eol; q++)
        if ((uint8_t)*q < ' ' || *q == 0x7f || (*q != ' ' && line_space((uint8_t)*q)))
            return bad(o, "control character or odd whitespace in the HTTP request line");
    const char *target = b + mlen + 1;
    const char *sp = memchr(target, ' ', (size_t)(eol - target));
    if (!sp || sp == target)
        return bad(o, "malformed HTTP request line");
    size_t tl = (size_t)(sp - target);
    if (eol - (sp + 1) != 8 || memcmp(sp + 1, "HTTP/1.", 7) || (sp[8] != '0' && sp[8] != '1'))
        return bad(o, "not an HTTP/1.x request");
    bool http11 = sp[8] == '1';
    char auth_host[IPB_NAME_MAX + 1] = "";
    uint16_t auth_port = 0;
    if (connect) {
        if (!ipb_sniff_split_authority(target, tl, auth_host, sizeof(auth_host), &auth_port) || !auth_port)
            return bad(o, "CONNECT needs host:port");
    } else if (tl > 7 && !strncasecmp(target, "http://", 7)) {
        const char *a = target + 7;
        size_t al = strcspn(a, "/?#");
        if (al > tl - 7)
            al = tl - 7;
        if (memchr(a, '@', al) || !ipb_sniff_split_authority(a, al, auth_host, sizeof(auth_host), &auth_port))
            return bad(o, "malformed absolute URI");
    } else if (target[0] != '/' && !(tl == 1 && target[0] == '*')) {
        return bad(o, "malformed HTTP request target");
    }
    /* header fields */
    char host[IPB_NAME_MAX + 1] = "";
    uint16_t host_port = 0;
    int n_host = 0;
    const char *line = eol + 2;
    while (line < end + 2) {
        const char *le = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
        if (le == line)
            break;
        if (*line == ' ' || *line == '\t')
            return bad(o, "folded HTTP header");
        const char *colon = memchr(line, ':', (size_t)(le - line));
        if (!colon || colon == line)
            return bad(o, "malformed HTTP header");
        for (const char *q = line; q < colon; q++)
            if (!tchar((uint8_t)*q))
                return bad(o, "malformed HTTP header name");
        for (const char *q = colon; q < le; q++)
            if (*q == '\0' || *q == '\r' || *q == '\n')
                return bad(o, "control character in an HTTP header");
        if (colon - line == 4 && !strncasecmp(line, "host", 4)) {
            if (++n_host > 1)
                return bad(o, "more than one Host header");
            const char *v = colon + 1, *ve = le;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (!ipb_sniff_split_authority(v, (size_t)(ve - v), host, sizeof(host), &host_port))
                return bad(o, "malformed Host header");
        }
        line = le + 2;
    }
    if (auth_host[0] && host[0] && strcasecmp(auth_host, host))
        return bad(o, connect ? "the Host header does not match the CONNECT authority"
                              : "the Host header does not match the request URI");
    if (!connect && !auth_host[0] && !host[0] && http11)
        return bad(o, "HTTP/1.1 request without a Host header");
    if (auth_host[0]) {
        strcpy(o->host, auth_host);
        o->port = auth_port;
    } else {
        strcpy(o->host, host);
        o->port = host_port;
    }
    if (connect)
        o->head_len = head;
    return o->kind;
}

enum ipb_sniff_kind ipb_sniff_bytes(const uint8_t *buf, size_t len, ipb_sniff *o) {
    memset(o, 0, sizeof(*o));
    o->kind = IPB_SNIFF_MORE;
    if (len == 0)
        return IPB_SNIFF_MORE;
    if (buf[0] == 0x16) {
        if (len < 2)
            return IPB_SNIFF_MORE;
        if (buf[1] == 3)
            return o->kind = sniff_tls(buf, len, o);
        return o->kind = IPB_SNIFF_OTHER;
    }
    /* Empty lines before a request line, which HTTP servers skip (RFC 9112, 2.2), and blanks
     * some servers skip too (line_space): judged as the request that follows them, or the name
     * in it would pass unread. */
    size_t crlf = 0;
    while (crlf < len && (buf[crlf] == '\n' || line_space(buf[crlf])))
        crlf++;
    if (crlf) {
        if (crlf > 64) {
            o->why = "too many empty lines before a request";
            return o->kind = IPB_SNIFF_BAD;
        }
        if (crlf == len)
            return IPB_SNIFF_MORE;
        enum ipb_sniff_kind k = ipb_sniff_bytes(buf + crlf, len - crlf, o);
        if (o->head_len)
            o->head_len += crlf;
        return k;
    }
    /* An HTTP method followed by one space. */
    size_t i = 0;
    while (i < len && i < 8 && buf[i] >= 'A' && buf[i] <= 'Z')
        i++;
    if (i == len && i < 8) {
        for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++)
            if (!strncmp((const char *)buf, methods[m], i))
                return IPB_SNIFF_MORE; /* a prefix of a method */
    }
    if (i < len && buf[i] == ' ')
        for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++)
            if (strlen(methods[m]) == i && !memcmp(buf, methods[m], i))
                return o->kind = sniff_http(buf, len, i, o);
    /* Any other method, in any case (servers accept extension methods, some lower case): a
     * first line shaped "token SP target SP HTTP/" is a request too, judged by its Host, and
     * with other whitespace for an SP it is refused (sniff_http allows no control character).
     * Until that line ends it may still become one, however long its method or target (servers
     * set no limit on a method, and their line limits exceed 8 KiB): as long as the head. */
    size_t t = 0;
    while (t < len && tchar(buf[t]))
        t++;
    if (t == 0 || (t < len && !line_space(buf[t])))
        return o->kind = IPB_SNIFF_OTHER;
    const uint8_t *nl = t < len ? memchr(buf + t, '\n', len - t) : NULL;
    if (!nl)
        return len < IPB_SNIFF_MAX ? IPB_SNIFF_MORE : bad(o, "HTTP request line too large");
    size_t ll = (size_t)(nl - buf);
    for (size_t q = t; q + 6 <= ll; q++)
        if (line_space(buf[q]) && !strncasecmp((const char *)buf + q + 1, "HTTP/", 5))
            return o->kind = sniff_http(buf, len, t, o); /* refuses any but SP */
    return o->kind = IPB_SNIFF_OTHER;
}
