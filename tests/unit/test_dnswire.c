/* proxy/dnswire.c: the DNS stub's wire format (queries parsed, answers built). Every input is
 * copied into a heap buffer of exactly its size, so a sanitizer build catches a read past the
 * end. */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnswire.h"
#include "run_suite.h"

typedef struct msg {
    uint8_t b[600];
    size_t n;
} msg;

static void m8(msg *m, unsigned v) { m->b[m->n++] = (uint8_t)v; }
static void m16(msg *m, unsigned v) {
    m8(m, v >> 8);
    m8(m, v & 0xff);
}

static void dns_header(msg *m, unsigned id, unsigned flags, unsigned qd, unsigned an, unsigned ns, unsigned ar) {
    m->n = 0;
    m16(m, id);
    m16(m, flags);
    m16(m, qd);
    m16(m, an);
    m16(m, ns);
    m16(m, ar);
}

/* A dotted name as labels (no escapes), then the root. */
static void dns_name(msg *m, const char *name) {
    while (*name) {
        size_t l = strcspn(name, ".");
        m8(m, (unsigned)l);
        memcpy(m->b + m->n, name, l);
        m->n += l;
        name += l;
        if (*name == '.')
            name++;
    }
    m8(m, 0);
}

static msg query(unsigned id, const char *name, unsigned qtype) {
    msg m;
    dns_header(&m, id, 0x0100, 1, 0, 0, 0);
    dns_name(&m, name);
    m16(&m, qtype);
    m16(&m, IPB_DNS_CLASS_IN);
    return m;
}

static int parse(const msg *m, ipb_dns_query *q, int *rcode) {
    uint8_t *copy = malloc(m->n ? m->n : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, m->b, m->n);
    int r = ipb_dns_parse_query(copy, m->n, q, rcode);
    free(copy);
    return r;
}

static ipb_addr addr(const char *s) {
    ipb_addr a;
    ck_assert_msg(ipb_addr_parse(s, strlen(s), &a), "not an address: %s", s);
    return a;
}

static unsigned get16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

START_TEST(dns_parse_query) {
    msg m = query(0xbeef, "Example.TEST.", IPB_DNS_A);
    ipb_dns_query q;
    int rcode = -1;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert_int_eq(rcode, IPB_DNS_NOERROR);
    ck_assert_uint_eq(q.id, 0xbeef);
    ck_assert_uint_eq(q.flags, 0x0100);
    ck_assert(q.name_ok);
    ck_assert_str_eq(q.name, "example.test");
    ck_assert_uint_eq(q.qtype, IPB_DNS_A);
    ck_assert_uint_eq(q.qclass, IPB_DNS_CLASS_IN);
    ck_assert_uint_eq(q.question_len, m.n - 12);
    ck_assert_mem_eq(q.question, m.b + 12, q.question_len);
    /* An EDNS OPT record in the additional section is fine. */
    m = query(1, "a.test", IPB_DNS_AAAA);
    m.b[11] = 1;
    static const uint8_t opt[] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};
    memcpy(m.b + m.n, opt, sizeof(opt));
    m.n += sizeof(opt);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert_str_eq(q.name, "a.test");
    ck_assert_uint_eq(q.qtype, IPB_DNS_AAAA);
    ck_assert_uint_eq(q.question_len, strlen("a.test") + 2 + 4);
}
END_TEST

START_TEST(dns_dropped_and_refused) {
    ipb_dns_query q;
    int rcode;
    msg m = query(7, "a.test", IPB_DNS_A);
    m.b[2] |= 0x80; /* a response */
    ck_assert_int_eq(parse(&m, &q, &rcode), -1);
    for (size_t n = 0; n < 12; n++) {
        msg s = m;
        s.n = n;
        ck_assert_int_eq(parse(&s, &q, &rcode), -1);
    }
    /* Two questions. */
    m = query(7, "a.test", IPB_DNS_A);
    m.b[5] = 2;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    ck_assert_uint_eq(q.id, 7);
    ck_assert_uint_eq(q.question_len, 0);
    /* No question; answers or authorities in a query. */
    m.b[5] = 0;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    m = query(7, "a.test", IPB_DNS_A);
    m.b[7] = 1;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    m = query(7, "a.test", IPB_DNS_A);
    m.b[9] = 1;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    /* Opcodes other than QUERY (IQUERY, STATUS, NOTIFY, UPDATE). */
    static const unsigned opcodes[] = {1, 2, 4, 5, 15};
    for (size_t i = 0; i < sizeof(opcodes) / sizeof(*opcodes); i++) {
        m = query(9, "a.test", IPB_DNS_A);
        m.b[2] = (uint8_t)(m.b[2] | opcodes[i] << 3);
        ck_assert_int_eq(parse(&m, &q, &rcode), 1);
        ck_assert_int_eq(rcode, IPB_DNS_NOTIMP);
        ck_assert_uint_eq(q.id, 9);
    }
}
END_TEST

START_TEST(dns_bad_names) {
    ipb_dns_query q;
    int rcode;
    msg m;
    /* A label longer than 63. */
    char label[70];
    memset(label, 'a', 64);
    strcpy(label + 64, ".t");
    m = query(1, label, IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    /* The name runs past the end; the question stops short. */
    m = query(1, "abc.test", IPB_DNS_A);
    for (size_t n = 12; n < m.n; n++) {
        msg s = m;
        s.n = n;
        ck_assert_msg(parse(&s, &q, &rcode) == 1 && rcode == IPB_DNS_FORMERR, "length %zu", n);
    }
    /* A compression pointer (and the reserved label types). */
    static const unsigned tops[] = {0xc0, 0x80, 0x40};
    for (size_t i = 0; i < sizeof(tops) / sizeof(*tops); i++) {
        dns_header(&m, 1, 0, 1, 0, 0, 0);
        m8(&m, 1);
        m8(&m, 'a');
        m8(&m, tops[i]);
        m8(&m, 12);
        m16(&m, IPB_DNS_A);
        m16(&m, IPB_DNS_CLASS_IN);
        ck_assert_int_eq(parse(&m, &q, &rcode), 1);
        ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    }
    /* Labels with a space or a dot byte, non-ASCII: parsed, but not a host name. */
    static const char *const odd[] = {"\003a b\004test", "\003a.b\004test", "\003a\200b\004test", "\001*\004test"};
    for (size_t i = 0; i < sizeof(odd) / sizeof(*odd); i++) {
        dns_header(&m, 1, 0, 1, 0, 0, 0);
        memcpy(m.b + m.n, odd[i], strlen(odd[i]) + 1);
        m.n += strlen(odd[i]) + 1;
        m16(&m, IPB_DNS_A);
        m16(&m, IPB_DNS_CLASS_IN);
        ck_assert_int_eq(parse(&m, &q, &rcode), 0);
        ck_assert_msg(!q.name_ok, "name_ok for %zu", i);
        ck_assert_uint_eq(q.question_len, strlen(odd[i]) + 1 + 4);
    }
    /* The root, and an address in disguise. */
    m = query(1, "", IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert(!q.name_ok);
    ck_assert_uint_eq(q.question_len, 5);
    m = query(1, "1.2.3.4", IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert(!q.name_ok);
}
END_TEST

/* labels of 63, 63, 63 and `last` bytes: a name of 192 + last characters. */
static msg long_query(size_t last, unsigned qtype) {
    char name[300];
    size_t n = 0;
    size_t ls[4] = {63, 63, 63, last};
    for (size_t i = 0; i < 4; i++) {
        if (i)
            name[n++] = '.';
        memset(name + n, 'a' + (int)i, ls[i]);
        n += ls[i];
    }
    name[n] = '\0';
    return query(0x1234, name, qtype);
}

START_TEST(dns_longest_name) {
    ipb_dns_query q;
    int rcode;
    /* 253 characters: 255 bytes on the wire, the most RFC 1035 allows. */
    msg m = long_query(61, IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ck_assert(q.name_ok);
    ck_assert_uint_eq(strlen(q.name), IPB_NAME_MAX);
    ck_assert_uint_eq(q.question_len, 255 + 4);
    ck_assert_uint_le(q.question_len, sizeof(q.question));
    ck_assert_mem_eq(q.question, m.b + 12, q.question_len);
    /* 254 characters (256 bytes on the wire) is too long, and must not overflow question. */
    m = long_query(62, IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
    ck_assert_uint_eq(q.question_len, 0);
    m = long_query(63, IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    ck_assert_int_eq(rcode, IPB_DNS_FORMERR);
}
END_TEST

START_TEST(dns_answer_a) {
    msg m = query(0xabcd, "a.test", IPB_DNS_A);
    ipb_dns_query q;
    int rcode;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ipb_addr addrs[3] = {addr("192.0.2.1"), addr("2001:db8::1"), addr("198.51.100.7")};
    uint8_t out[512];
    size_t n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 0x01020304, out, sizeof(out));
    size_t qend = 12 + q.question_len;
    ck_assert_uint_eq(n, qend + 2 * 16);
    ck_assert_uint_eq(get16(out), 0xabcd);
    ck_assert_uint_eq(get16(out + 2), 0x8180); /* QR, RD copied, RA, NOERROR */
    ck_assert_uint_eq(get16(out + 4), 1);
    ck_assert_uint_eq(get16(out + 6), 2);
    ck_assert_uint_eq(get16(out + 8), 0);
    ck_assert_uint_eq(get16(out + 10), 0);
    ck_assert_mem_eq(out + 12, m.b + 12, q.question_len);
    static const uint8_t rr1[] = {0xc0, 0x0c, 0, 1, 0, 1, 1, 2, 3, 4, 0, 4, 192, 0, 2, 1};
    static const uint8_t rr2[] = {0xc0, 0x0c, 0, 1, 0, 1, 1, 2, 3, 4, 0, 4, 198, 51, 100, 7};
    ck_assert_mem_eq(out + qend, rr1, sizeof(rr1));
    ck_assert_mem_eq(out + qend + 16, rr2, sizeof(rr2));
    /* RD not asked: not set. */
    m.b[2] = 0;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 60, out, sizeof(out));
    ck_assert_uint_eq(get16(out + 2), 0x8080);
    ck_assert_uint_eq(get16(out + 6), 2);
    /* Too small for the question: nothing. Too small for the answers: fewer. */
    ck_assert_uint_eq(ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 60, out, qend - 1), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 60, out, qend + 16 + 15);
    ck_assert_uint_eq(n, qend + 16);
    ck_assert_uint_eq(get16(out + 6), 1);
}
END_TEST

START_TEST(dns_answer_aaaa_nxdomain_and_others) {
    msg m = query(0x0102, "v6.test", IPB_DNS_AAAA);
    ipb_dns_query q;
    int rcode;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    ipb_addr addrs[3] = {addr("192.0.2.1"), addr("2001:db8::1"), addr("::ffff:192.0.2.9")};
    uint8_t out[512];
    size_t qend = 12 + q.question_len;
    size_t n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(n, qend + 28);
    ck_assert_uint_eq(get16(out + 6), 1);
    static const uint8_t rr[] = {0xc0, 0x0c, 0, 28, 0, 1, 0, 0, 1, 44, 0, 16};
    ck_assert_mem_eq(out + qend, rr, sizeof(rr));
    ck_assert_mem_eq(out + qend + 12, addrs[1].b, 16);
    /* NXDOMAIN: the question, no answers. */
    n = ipb_dns_build_answer(&q, IPB_DNS_NXDOMAIN, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(n, qend);
    ck_assert_uint_eq(get16(out + 2), 0x8183);
    ck_assert_uint_eq(get16(out + 4), 1);
    ck_assert_uint_eq(get16(out + 6), 0);
    /* No address of the family: NOERROR, no answers. */
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 1, 300, out, sizeof(out));
    ck_assert_uint_eq(n, qend);
    ck_assert_uint_eq(get16(out + 6), 0);
    /* Other types (MX) and classes (CH): no answers. */
    m = query(3, "v6.test", 15);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(get16(out + 6), 0);
    ck_assert_uint_eq(n, 12 + q.question_len);
    m = query(3, "v6.test", IPB_DNS_A);
    m.b[m.n - 1] = 3;
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(get16(out + 6), 0);
    /* FORMERR for a message with two questions: the header alone. */
    m = query(0x4242, "v6.test", IPB_DNS_A);
    m.b[5] = 2;
    ck_assert_int_eq(parse(&m, &q, &rcode), 1);
    n = ipb_dns_build_answer(&q, rcode, addrs, 3, 300, out, sizeof(out));
    ck_assert_uint_eq(n, 12);
    ck_assert_uint_eq(get16(out), 0x4242);
    ck_assert_uint_eq(get16(out + 2), 0x8181);
    ck_assert_uint_eq(get16(out + 4), 0);
}
END_TEST

START_TEST(dns_answers_capped) {
    ipb_addr addrs[40];
    char text[32];
    for (int i = 0; i < 20; i++) {
        snprintf(text, sizeof(text), "192.0.2.%d", i + 1);
        addrs[i] = addr(text);
        snprintf(text, sizeof(text), "2001:db8::%d", i + 1);
        addrs[20 + i] = addr(text);
    }
    ipb_dns_query q;
    int rcode;
    uint8_t out[1024];
    msg m = query(5, "a.test", IPB_DNS_A);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    size_t n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 40, 60, out, sizeof(out));
    ck_assert_uint_eq(get16(out + 6), IPB_DNS_MAX_ANSWERS);
    ck_assert_uint_eq(n, 12 + q.question_len + IPB_DNS_MAX_ANSWERS * 16);
    ck_assert_uint_le(n, 512);
    m = query(5, "a.test", IPB_DNS_AAAA);
    ck_assert_int_eq(parse(&m, &q, &rcode), 0);
    n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 40, 60, out, sizeof(out));
    ck_assert_uint_le(n, 512);
    ck_assert_uint_eq(get16(out + 6), IPB_DNS_MAX_ANSWERS);
    ck_assert_uint_eq(n, 12 + q.question_len + IPB_DNS_MAX_ANSWERS * 28);
    /* The longest name: 512 bytes still bound the answer even with a larger buffer. */
    for (unsigned t = 0; t < 2; t++) {
        m = long_query(61, t ? IPB_DNS_AAAA : IPB_DNS_A);
        ck_assert_int_eq(parse(&m, &q, &rcode), 0);
        n = ipb_dns_build_answer(&q, IPB_DNS_NOERROR, addrs, 40, 60, out, sizeof(out));
        ck_assert_uint_le(n, 512);
        size_t rr = t ? 28 : 16, fit = (512 - 12 - q.question_len) / rr;
        ck_assert_uint_lt(fit, IPB_DNS_MAX_ANSWERS);
        ck_assert_uint_eq(get16(out + 6), fit);
        ck_assert_uint_eq(n, 12 + q.question_len + get16(out + 6) * rr);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("dnswire");
    TCase *d = tcase_create("dnswire");
    tcase_add_test(d, dns_parse_query);
    tcase_add_test(d, dns_dropped_and_refused);
    tcase_add_test(d, dns_bad_names);
    tcase_add_test(d, dns_longest_name);
    tcase_add_test(d, dns_answer_a);
    tcase_add_test(d, dns_answer_aaaa_nxdomain_and_others);
    tcase_add_test(d, dns_answers_capped);
    suite_add_tcase(s, d);
    return ipb_run_suite(s);
}
