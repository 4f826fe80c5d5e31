/* Tool calls in flight: each runs on a thread of its own, so that calls to different servers
 * (and, with a concurrent client, to one server) never wait for each other, while the
 * supervisor's loop keeps serving its client, the kernel and the sandbox. Each call has its
 * own cancel fd; the loop learns that calls finished through one fd and takes them there.
 * (Connections are not made here: a stdio server's parent-death signal follows the thread
 * that started it, so each server is started by a long-lived thread of its own, see
 * mcp_servers.h.) */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

typedef struct ipb_callpool ipb_callpool;
typedef struct ipb_call ipb_call;

ipb_callpool *ipb_callpool_new(ipb_error **err);
/* Readable (POLLIN) while a finished call waits to be taken. */
int ipb_callpool_fd(const ipb_callpool *p);
/* Starts fn(arg, cancel_fd) on a new thread (which takes no signals). cancel_fd is readable once
 * the call was cancelled. NULL with *err when no thread could be started. */
ipb_call *ipb_callpool_start(ipb_callpool *p, void (*fn)(void *arg, int cancel_fd), void *arg, ipb_error **err);
/* Asks one call to give up (its cancel fd becomes readable). Any thread. */
void ipb_callpool_cancel(ipb_call *c);
/* Asks every call still running whose arg match(arg, ud) says true of (match NULL: every
 * call) to give up. */
void ipb_callpool_cancel_if(ipb_callpool *p, bool (*match)(void *arg, void *ud), void *ud);
/* The arg of a finished call (its thread is joined and the call gone), or NULL when none has
 * finished. */
void *ipb_callpool_take(ipb_callpool *p);
/* Calls started and not taken yet. */
size_t ipb_callpool_count(ipb_callpool *p);
/* Cancels every call and waits for all of them; each arg is given to done(ud, arg) as it is
 * taken (done NULL: dropped). */
void ipb_callpool_drain(ipb_callpool *p, void (*done)(void *ud, void *arg), void *ud);
/* Drains (done NULL: args dropped) and frees the pool. NULL is fine. */
void ipb_callpool_free(ipb_callpool *p, void (*done)(void *ud, void *arg), void *ud);
