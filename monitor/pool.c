#include "pool.h"

#include <stdlib.h>
#include <string.h>

#include "mon_proto.h"

int ipbm_pool_init(ipbm_pool *p, uint32_t start, uint32_t size) {
    p->start = start;
    p->size = size;
    p->next = 0;
    p->used = calloc(size ? size : 1, 1);
    return p->used ? 0 : -1;
}

void ipbm_pool_free(ipbm_pool *p) {
    free(p->used);
    p->used = NULL;
}

int ipbm_pool_take(ipbm_pool *p) {
    for (uint32_t k = 0; k < p->size; k++) {
        uint32_t i = (p->next + k) % p->size;
        if (!p->used[i]) {
            p->used[i] = 1;
            p->next = (i + 1) % p->size;
            return (int)i;
        }
    }
    return -1;
}

void ipbm_pool_put(ipbm_pool *p, int slot) {
    if (slot >= 0 && (uint32_t)slot < p->size)
        p->used[slot] = 0;
}

uint32_t ipbm_pool_uid(const ipbm_pool *p, int slot) { return p->start + (uint32_t)slot * IPBM_RANGE; }

int ipbm_pool_slot_of(const ipbm_pool *p, uint32_t uid) {
    if (uid < p->start)
        return -1;
    uint64_t i = (uint64_t)(uid - p->start) / IPBM_RANGE;
    return i < p->size ? (int)i : -1;
}

unsigned ipbm_pool_subid_clash(const ipbm_pool *p, const char *text) {
    uint64_t lo = p->start, hi = (uint64_t)p->start + (uint64_t)p->size * IPBM_RANGE; /* [lo, hi) */
    unsigned line = 0;
    for (const char *s = text; *s;) {
        line++;
        const char *eol = strchrnul(s, '\n');
        const char *c1 = memchr(s, ':', (size_t)(eol - s));
        if (c1) {
            char *end;
            unsigned long long start = strtoull(c1 + 1, &end, 10);
            if (end > c1 + 1 && *end == ':') {
                char *end2;
                unsigned long long count = strtoull(end + 1, &end2, 10);
                if (end2 > end + 1 && end2 <= eol && count && start < hi && start + count > lo)
                    return line;
            }
        }
        s = *eol ? eol + 1 : eol;
    }
    return 0;
}
