/* The pool of sandbox uid ranges: slot i is host uids pool_start + i * IPBM_RANGE onwards.
 * Pure bookkeeping. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

typedef struct ipbm_pool {
    uint32_t start, size; /* first uid, number of slots */
    uint8_t *used;        /* size entries */
    uint32_t next;        /* where the search for a free slot starts (round robin, so a
                           * just-freed range is not handed out again at once) */
} ipbm_pool;

int ipbm_pool_init(ipbm_pool *p, uint32_t start, uint32_t size);
void ipbm_pool_free(ipbm_pool *p);
/* A free slot, or -1 when every one is taken. */
int ipbm_pool_take(ipbm_pool *p);
void ipbm_pool_put(ipbm_pool *p, int slot);
uint32_t ipbm_pool_uid(const ipbm_pool *p, int slot);
/* The slot whose range holds uid, or -1. */
int ipbm_pool_slot_of(const ipbm_pool *p, uint32_t uid);
/* The first line of an /etc/subuid or /etc/subgid text ("name:start:count") whose range meets
 * the pool, or 0 when none does. Lines that do not parse are skipped (they grant nothing). */
unsigned ipbm_pool_subid_clash(const ipbm_pool *p, const char *text);
