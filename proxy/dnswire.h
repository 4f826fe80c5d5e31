/* The DNS stub's wire format: one question in, A/AAAA answers out (RFC 1035). Pure functions;
 * nothing here ever forwards a query. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress.h"

#define IPB_DNS_A 1
#define IPB_DNS_AAAA 28
#define IPB_DNS_CLASS_IN 1
#define IPB_DNS_NOERROR 0
#define IPB_DNS_FORMERR 1
#define IPB_DNS_SERVFAIL 2
#define IPB_DNS_NXDOMAIN 3
#define IPB_DNS_NOTIMP 4
#define IPB_DNS_REFUSED 5
/* Answers fit the classic 512-byte UDP limit: at most this many addresses. */
#define IPB_DNS_MAX_ANSWERS 16

typedef struct ipb_dns_query {
    uint16_t id;
    uint16_t flags;
    uint16_t qtype, qclass;
    bool name_ok; /* the name is a valid host name (normalised in name) */
    char name[IPB_NAME_MAX + 1];
    uint8_t question[IPB_NAME_MAX + 2 + 4]; /* the question as sent, echoed in the answer */
    size_t question_len;
} ipb_dns_query;

/* Parses a query. Returns 0 for a query with one question, 1 for a message that deserves a
 * FORMERR/NOTIMP answer (id and flags filled, *rcode set), -1 for one to drop (too short, or
 * a response). */
int ipb_dns_parse_query(const uint8_t *msg, size_t len, ipb_dns_query *q, int *rcode);
/* Builds the answer: rcode, and for NOERROR the addresses of the question's family (others
 * skipped, at most IPB_DNS_MAX_ANSWERS). Returns its length (at most 512), 0 if out is too small. */
size_t ipb_dns_build_answer(const ipb_dns_query *q, int rcode, const ipb_addr *addrs, size_t n, uint32_t ttl,
                            uint8_t *out, size_t cap);
