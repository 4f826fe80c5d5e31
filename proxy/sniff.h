/* What a connection's first bytes say about where it wants to go: the server name of a TLS
 * ClientHello, the Host of an HTTP/1.x request, or the authority of an explicit CONNECT.
 * Pure functions over a buffer; the proxy calls ipb_sniff again as more bytes arrive. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "egress.h"

/* The most bytes the proxy buffers before deciding: a ClientHello (which may span records,
 * and with post-quantum key shares exceeds 1 KiB) or an HTTP request head. */
#define IPB_SNIFF_MAX (32 * 1024)

enum ipb_sniff_kind {
    IPB_SNIFF_MORE,    /* not enough bytes yet */
    IPB_SNIFF_TLS,     /* a ClientHello; host is its server name, or empty without one */
    IPB_SNIFF_HTTP,    /* an HTTP/1.x request; host/port from its Host (empty for HTTP/1.0 without) */
    IPB_SNIFF_CONNECT, /* an HTTP CONNECT; host/port from its authority, head_len its length */
    IPB_SNIFF_OTHER,   /* neither: only the dialled address can decide */
    IPB_SNIFF_BAD,     /* looks like TLS or HTTP but is malformed or ambiguous; why says how */
};

typedef struct ipb_sniff {
    enum ipb_sniff_kind kind;
    char host[IPB_NAME_MAX + 1]; /* a name or an address literal (IPv6 without brackets) */
    uint16_t port;               /* from the Host or authority; 0 when none */
    size_t head_len;             /* CONNECT: bytes up to and including the blank line */
    const char *why;             /* BAD: a sentence fragment */
} ipb_sniff;

enum ipb_sniff_kind ipb_sniff_bytes(const uint8_t *buf, size_t len, ipb_sniff *out);
/* Splits "host", "host:port", "[v6]" or "[v6]:port" (port 1-65535); false when malformed. */
bool ipb_sniff_split_authority(const char *s, size_t len, char *host, size_t host_size, uint16_t *port);
