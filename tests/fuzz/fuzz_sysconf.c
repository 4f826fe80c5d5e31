/* libFuzzer harness: the system service's configuration file (monitor/sysconf.c).
 *
 * - ipbm_sysconf_parse() on the whole input (an exact-size copy, not NUL-terminated): it
 *   either fails with a message naming the file, or leaves a configuration that keeps every
 *   documented bound (defaults within their bounds, the pool inside the uid space and clear
 *   of uid_min..uid_max, a group name without '/', ':' or blanks).
 *
 * FUZZ_SOURCES: monitor/sysconf.c policy/options.c policy/wsname.c policy/egress.c policy/pathrules.c common/fdio.c common/strbuf.c common/error.c common/nofile.c
 * FUZZ_PKGS:
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mon_proto.h"
#include "sysconf.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_sysconf: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    ipbm_sysconf c;
    ipbm_sysconf_defaults(&c);
    ipb_error *err = NULL;
    int r = ipbm_sysconf_parse(&c, copy, size, "fuzz.conf", &err);
    free(copy);
    if (r < 0) {
        CHECK(err && strstr(ipb_error_msg(err), "fuzz.conf"));
        ipb_error_free(err);
        return 0;
    }
    CHECK(!err);
    CHECK(c.memory_max <= c.memory_max_bound && c.memory_max >= (16ull << 20));
    CHECK(c.pids_max <= c.pids_max_bound && c.pids_max >= 16);
    CHECK(c.cpu_weight <= c.cpu_weight_bound && c.cpu_weight >= 1 && c.cpu_weight_bound <= 10000);
    CHECK(c.uid_min <= c.uid_max);
    CHECK(c.pool_size >= 1 && (uint64_t)c.pool_start + (uint64_t)c.pool_size * IPBM_RANGE <= 0xffffffffull);
    CHECK(c.pool_start >= (uint64_t)c.uid_max + 1 ||
          (uint64_t)c.pool_start + (uint64_t)c.pool_size * IPBM_RANGE <= c.uid_min);
    CHECK(strlen(c.group) <= IPBM_GROUP_MAX && !strpbrk(c.group, "/: \t\n"));
    CHECK(c.idle_timeout_s >= 1);
    return 0;
}
