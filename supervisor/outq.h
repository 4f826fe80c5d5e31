/* The MCP server's output to its client: whole JSON-RPC lines, queued and written as far as
 * the client takes them, never blocking the supervisor. Two lanes: `urgent` lines (answers to
 * ping, errors, approval questions, cancellations) go out before `bulk` ones (progress and
 * tools/call results) at the next line boundary, so a client that reads again gets them first.
 * The supervisor bounds what it queues (mcp_server.c: IPB_OUTQ_HIGH), so its memory does not
 * grow with output a client does not read. */
#pragma once
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

#include "strbuf.h"

/* Above this much queued, the kernel's output waits (it is not read from the kernel). */
#define IPB_OUTQ_HIGH (4u << 20)
/* One kernel message may take the queue past IPB_OUTQ_HIGH (it is streamed whole); past this
 * much more, the rest of it is not streamed (it stays in the result). The launcher's messages
 * are about 1 MiB of text; only a kernel that bypasses it gets here. */
#define IPB_OUTQ_OVERSHOOT (16u << 20)

typedef struct ipb_outq {
    int fd;      /* what is written to: our own non-blocking open file description where one
                   * could be made, else the given fd */
    int poll_fd; /* polled for POLLOUT (the given fd) */
    bool own_fd; /* fd was opened here */
    bool sock;   /* a socket: send(MSG_DONTWAIT) */
    bool small;  /* a pipe in blocking mode: at most PIPE_BUF bytes per write after POLLOUT */
    ipb_buf cur; /* whole lines being written */
    size_t off;
    ipb_buf urgent, bulk;
    bool broken;
} ipb_outq;

void ipb_outq_init(ipb_outq *q, int fd);
/* Queues one whole line (the iovecs joined; the caller ends it with '\n') and writes what the
 * client takes now. Returns -1 once the output is broken (the client is gone). */
int ipb_outq_push(ipb_outq *q, const struct iovec *iov, int n, bool urgent);
/* Writes what the client takes now; called when poll_fd is writable. -1: broken. */
int ipb_outq_flush(ipb_outq *q);
/* Bytes queued and not yet written. */
size_t ipb_outq_len(const ipb_outq *q);
/* Writes everything, waiting for the client, until it is written, the output breaks, *stop is
 * set or timeout_ms passes (-1: no limit). Returns 0 when all was written. */
int ipb_outq_finish(ipb_outq *q, int timeout_ms, volatile sig_atomic_t *stop);
/* Bytes written to the fd and not yet read by the client (a pipe or socket), or 0. */
size_t ipb_outq_unread(const ipb_outq *q);
void ipb_outq_free(ipb_outq *q);
