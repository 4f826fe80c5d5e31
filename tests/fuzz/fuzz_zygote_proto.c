/* libFuzzer harness: the 16-byte records between a sandbox's PID 1, its zygote and S0
 * (kernel-shim/zygote_proto.c).
 *
 * zy_parse() on arbitrary bytes (an exact-size heap copy), and the same bytes sent as one
 * record over a SOCK_SEQPACKET socketpair to zy_recv(). Invariants:
 * - accepted only at exactly ZY_REC_SIZE bytes, with a known type, b == 0, and gen and a as
 *   the type allows (FORK, STANDBY, PREPARED, ACTIVATE, ACTIVE a == 0; STARTED a > 1;
 *   FAILED, DECLINED a > 0; NOTMADE gen == 0, a > 0; ENDED gen == 0; the others gen == a == 0);
 * - an accepted record rebuilt with zy_build() is the same bytes;
 * - zy_recv() agrees with zy_parse() (1 and the same record, or a negative error), never
 *   hands out a descriptor when none was sent, and never returns a ZY_NEW without one.
 *
 * FUZZ_SOURCES: kernel-shim/zygote_proto.c
 * FUZZ_PKGS:
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zygote_proto.h"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_zygote_proto: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);              \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096)
        return 0;
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    zy_rec r;
    memset(&r, 0xa5, sizeof(r));
    int p = zy_parse(copy, size, &r);
    CHECK(p == 0 || p == -EBADMSG);
    if (p == 0) {
        CHECK(size == ZY_REC_SIZE);
        CHECK(r.b == 0);
        switch (r.type) {
        case ZY_FORK:
        case ZY_STANDBY:
        case ZY_PREPARED:
        case ZY_ACTIVATE:
        case ZY_ACTIVE:
            CHECK(r.a == 0);
            break;
        case ZY_STARTED:
            CHECK(r.a > 1);
            break;
        case ZY_FAILED:
        case ZY_DECLINED:
            CHECK(r.a > 0);
            break;
        case ZY_NOTMADE:
            CHECK(r.gen == 0 && r.a > 0);
            break;
        case ZY_ENDED:
            CHECK(r.gen == 0);
            break;
        case ZY_READY:
        case ZY_BOOT:
        case ZY_MAKE:
        case ZY_KILL:
        case ZY_NEW:
        case ZY_GO:
            CHECK(r.gen == 0 && r.a == 0);
            break;
        default:
            CHECK(!"unknown type accepted");
        }
        uint8_t again[ZY_REC_SIZE];
        zy_build(again, r.type, r.gen, r.a);
        CHECK(!memcmp(again, copy, ZY_REC_SIZE));
    }
    int sp[2];
    if (size > 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0) {
        if (send(sp[0], copy, size, MSG_DONTWAIT) == (ssize_t)size) {
            zy_rec got;
            int fd = -2;
            int n = zy_recv(sp[1], &got, &fd, 1000);
            if (p == 0 && r.type != ZY_NEW) {
                CHECK(n == 1);
                CHECK(!memcmp(&got, &r, sizeof(r)));
            } else {
                CHECK(n < 0);
            }
            CHECK(fd == -1);
        }
        close(sp[0]);
        close(sp[1]);
    }
    free(copy);
    return 0;
}
