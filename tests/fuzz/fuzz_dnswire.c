/* libFuzzer harness: the DNS stub's wire format (proxy/dnswire.c).
 *
 * The input, in an exact-size heap buffer, is parsed as a query; whatever is answered is built
 * into an exact 512-byte buffer from a set of addresses (how many and which rcode chosen by the
 * input's last byte), and once more into a buffer too small for some of it. Invariants:
 * - parse returns -1 only for fewer than 12 bytes or a response; 1 only with FORMERR or NOTIMP,
 *   the id and flags filled and no question; 0 with NOERROR and a question of 5-259 bytes
 *   (a name of at most 255 on the wire) that is the input's own bytes, ending in qtype/qclass;
 * - a parsed name_ok name is a normalised host name (normalising it again gives itself);
 * - an answer is at most 512 bytes, at most cap, and starts with the query's id, QR set, the
 *   query's RD, one question when there was one, and ancount records of the question's type;
 * - the question echoed in the answer, put in a fresh query, parses to the same question.
 *
 * FUZZ_SOURCES: proxy/dnswire.c policy/egress.c common/error.c common/nofile.c
 * FUZZ_PKGS:
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dnswire.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_dnswire: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned rd16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

static int parse_exact(const uint8_t *msg, size_t len, ipb_dns_query *q, int *rcode) {
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact)
        abort();
    memcpy(exact, msg, len);
    int r = ipb_dns_parse_query(exact, len, q, rcode);
    free(exact);
    return r;
}

static void check_answer(const ipb_dns_query *q, int rcode, const ipb_addr *addrs, size_t n, size_t cap) {
    uint8_t *out = malloc(cap ? cap : 1);
    if (!out)
        abort();
    size_t len = ipb_dns_build_answer(q, rcode, addrs, n, 3600, out, cap);
    CHECK(len <= 512 && len <= cap);
    if (cap < 12 + q->question_len) {
        CHECK(len == 0);
        free(out);
        return;
    }
    CHECK(len >= 12 + q->question_len);
    CHECK(rd16(out) == q->id);
    unsigned flags = rd16(out + 2);
    CHECK(flags & 0x8000);
    CHECK((flags & 0x7800) == 0);
    CHECK((flags & 0x0100) == (q->flags & 0x0100u));
    CHECK((int)(flags & 0xf) == (rcode & 0xf));
    CHECK(rd16(out + 4) == (q->question_len ? 1u : 0u));
    CHECK(rd16(out + 8) == 0 && rd16(out + 10) == 0);
    CHECK(!memcmp(out + 12, q->question, q->question_len));
    unsigned an = rd16(out + 6);
    CHECK(an <= IPB_DNS_MAX_ANSWERS);
    if (an) {
        CHECK(rcode == IPB_DNS_NOERROR && q->qclass == IPB_DNS_CLASS_IN);
        CHECK(q->qtype == IPB_DNS_A || q->qtype == IPB_DNS_AAAA);
    }
    size_t alen = q->qtype == IPB_DNS_A ? 4 : 16;
    CHECK(len == 12 + q->question_len + an * (12 + alen));
    for (unsigned i = 0; i < an; i++) {
        const uint8_t *rr = out + 12 + q->question_len + i * (12 + alen);
        CHECK(rd16(rr) == 0xc00c && rd16(rr + 2) == q->qtype && rd16(rr + 4) == IPB_DNS_CLASS_IN);
        CHECK(rd16(rr + 8) == 3600 && rd16(rr + 10) == alen);
    }

    if (q->question_len && cap >= 512) {
        /* The echoed question in a fresh query parses to the same question. */
        uint8_t fresh[12 + sizeof(q->question)];
        memset(fresh, 0, 12);
        fresh[0] = out[0];
        fresh[1] = out[1];
        fresh[5] = 1;
        memcpy(fresh + 12, out + 12, q->question_len);
        ipb_dns_query q2;
        int rc2;
        CHECK(parse_exact(fresh, 12 + q->question_len, &q2, &rc2) == 0 && rc2 == IPB_DNS_NOERROR);
        CHECK(q2.id == q->id && q2.qtype == q->qtype && q2.qclass == q->qclass && q2.name_ok == q->name_ok);
        CHECK(q2.question_len == q->question_len && !memcmp(q2.question, q->question, q->question_len));
        CHECK(!q->name_ok || !strcmp(q2.name, q->name));
        /* The answer itself is a response: dropped. */
        CHECK(parse_exact(out, len, &q2, &rc2) == -1);
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ipb_dns_query q;
    int rcode = -7;
    int r = parse_exact(data, size, &q, &rcode);
    CHECK(r == -1 || r == 0 || r == 1);
    if (r == -1) {
        CHECK(size < 12 || (data[2] & 0x80));
        return 0;
    }
    CHECK(size >= 12 && !(data[2] & 0x80));
    CHECK(q.id == rd16(data) && q.flags == rd16(data + 2));
    if (r == 1) {
        CHECK(rcode == IPB_DNS_FORMERR || rcode == IPB_DNS_NOTIMP);
        CHECK(q.question_len == 0 && !q.name_ok);
    } else {
        CHECK(rcode == IPB_DNS_NOERROR);
        CHECK(((data[2] >> 3) & 0xf) == 0 && rd16(data + 4) == 1);
        CHECK(q.question_len >= 5 && q.question_len <= 255 + 4 && q.question_len <= sizeof(q.question));
        CHECK(12 + q.question_len <= size && !memcmp(q.question, data + 12, q.question_len));
        CHECK(rd16(q.question + q.question_len - 4) == q.qtype);
        CHECK(rd16(q.question + q.question_len - 2) == q.qclass);
        if (q.name_ok) {
            size_t n = strnlen(q.name, sizeof(q.name));
            CHECK(n >= 1 && n <= IPB_NAME_MAX);
            char again[IPB_NAME_MAX + 1];
            CHECK(ipb_name_normalize(q.name, n, again) && !strcmp(again, q.name));
        }
    }

    /* Addresses: 20 IPv4 and 20 IPv6, interleaved; the input's last byte picks how many are
     * offered and the rcode of a parsed query. */
    ipb_addr addrs[40];
    memset(addrs, 0, sizeof(addrs));
    for (int i = 0; i < 40; i++) {
        addrs[i].family = i % 2 ? AF_INET6 : AF_INET;
        addrs[i].b[0] = (uint8_t)(i % 2 ? 0x20 : 192);
        addrs[i].b[15] = addrs[i].b[3] = (uint8_t)(i + 1);
    }
    uint8_t last = data[size - 1];
    size_t n = last % 41;
    static const int rcodes[4] = {IPB_DNS_NOERROR, IPB_DNS_NOERROR, IPB_DNS_NXDOMAIN, IPB_DNS_REFUSED};
    int rc = r == 1 ? rcode : rcodes[last >> 6];
    check_answer(&q, rc, addrs, n, 512);
    check_answer(&q, rc, addrs, n, (size_t)last * 2);
    return 0;
}
