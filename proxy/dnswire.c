#include "dnswire.h"

#include <string.h>
#include <sys/socket.h>

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

int ipb_dns_parse_query(const uint8_t *msg, size_t len, ipb_dns_query *q, int *rcode) {
    memset(q, 0, sizeof(*q));
    *rcode = IPB_DNS_NOERROR;
    if (len < 12)
        return -1;
    q->id = rd16(msg);
    q->flags = rd16(msg + 2);
    if (q->flags & 0x8000)
        return -1; /* a response: never answer one */
    unsigned opcode = (q->flags >> 11) & 0xf;
    if (opcode != 0) {
        *rcode = IPB_DNS_NOTIMP;
        return 1;
    }
    if (rd16(msg + 4) != 1 || rd16(msg + 6) != 0 || rd16(msg + 8) != 0) {
        *rcode = IPB_DNS_FORMERR;
        return 1;
    }
    /* The name: uncompressed labels. */
    size_t off = 12, out = 0;
    char text[IPB_NAME_MAX + 2];
    bool printable = true;
    for (;;) {
        if (off >= len) {
            *rcode = IPB_DNS_FORMERR;
            return 1;
        }
        uint8_t l = msg[off];
        if (l == 0) {
            off++;
            break;
        }
        if (l > 63 || off + 1 + l > len || out + l + 1 > IPB_NAME_MAX) {
            *rcode = IPB_DNS_FORMERR;
            return 1;
        }
        if (out)
            text[out++] = '.';
        for (size_t i = 0; i < l; i++) {
            uint8_t c = msg[off + 1 + i];
            if (c <= ' ' || c >= 0x7f || c == '.')
                printable = false;
            text[out++] = (char)c;
        }
        off += 1u + l;
    }
    if (off + 4 > len) {
        *rcode = IPB_DNS_FORMERR;
        return 1;
    }
    q->qtype = rd16(msg + off);
    q->qclass = rd16(msg + off + 2);
    off += 4;
    q->question_len = off - 12;
    memcpy(q->question, msg + 12, q->question_len);
    text[out] = '\0';
    q->name_ok = printable && out > 0 && ipb_name_normalize(text, out, q->name);
    return 0;
}

size_t ipb_dns_build_answer(const ipb_dns_query *q, int rcode, const ipb_addr *addrs, size_t n, uint32_t ttl,
                            uint8_t *out, size_t cap) {
    if (cap < 12 + q->question_len)
        return 0;
    wr16(out, q->id);
    /* QR, opcode 0, RD as asked, RA, rcode */
    wr16(out + 2, (uint16_t)(0x8000 | (q->flags & 0x0100) | 0x0080 | (rcode & 0xf)));
    wr16(out + 4, q->question_len ? 1 : 0);
    wr16(out + 6, 0);
    wr16(out + 8, 0);
    wr16(out + 10, 0);
    memcpy(out + 12, q->question, q->question_len);
    size_t off = 12 + q->question_len;
    if (rcode != IPB_DNS_NOERROR || q->qclass != IPB_DNS_CLASS_IN)
        return off;
    int fam = q->qtype == IPB_DNS_A ? AF_INET : q->qtype == IPB_DNS_AAAA ? AF_INET6 : 0;
    size_t alen = fam == AF_INET ? 4 : 16;
    uint16_t count = 0;
    for (size_t i = 0; fam && i < n && count < IPB_DNS_MAX_ANSWERS; i++) {
        if (addrs[i].family != fam)
            continue;
        if (off + 12 + alen > cap || off + 12 + alen > 512)
            break;
        wr16(out + off, 0xc00c); /* the question's name */
        wr16(out + off + 2, q->qtype);
        wr16(out + off + 4, IPB_DNS_CLASS_IN);
        wr16(out + off + 6, (uint16_t)(ttl >> 16));
        wr16(out + off + 8, (uint16_t)ttl);
        wr16(out + off + 10, (uint16_t)alen);
        memcpy(out + off + 12, addrs[i].b, alen);
        off += 12 + alen;
        count++;
    }
    wr16(out + 6, count);
    return off;
}
