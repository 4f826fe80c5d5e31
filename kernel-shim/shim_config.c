#include "shim_proto.h"

#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "record.h"

/* Encoding: a sequence of records {u16 tag, u32 length, payload}. Strings are stored without
 * NUL; a mount record is {u32 kind, u32 flags, 3 x (u32 len or 0xffffffff for NULL, bytes)},
 * then, with IPB_MNT_SAME, {u64 dev, u64 ino}. */
enum {
    TAG_MODE = 1,
    TAG_UID,
    TAG_GID,
    TAG_ROOT,
    TAG_HOSTNAME,
    TAG_CWD,
    TAG_MOUNT,
    TAG_ARGV,
    TAG_ENV,
    TAG_BPF,
    TAG_SYSTEM,
    TAG_RLIMITS, /* {u64 nproc_max, u64 as_max} */
    TAG_ZYGOTE,  /* u32 1, kernel mode only; absent: no zygote */
    TAG_STANDBY, /* u32 1, with TAG_ZYGOTE only; absent: no standby kernel */
};
#define NULL_LEN 0xffffffffu

static int put(ipb_buf *b, uint16_t tag, const void *p, size_t len) {
    uint32_t l = (uint32_t)len;
    int r;
    if (len > SHIM_CONFIG_MAX)
        return -E2BIG;
    if ((r = ipb_buf_append(b, &tag, 2)) < 0 || (r = ipb_buf_append(b, &l, 4)) < 0 ||
        (r = ipb_buf_append(b, p, len)) < 0)
        return r;
    return 0;
}
static int put_u32(ipb_buf *b, uint16_t tag, uint32_t v) { return put(b, tag, &v, 4); }
static int put_str(ipb_buf *b, uint16_t tag, const char *s) { return s ? put(b, tag, s, strlen(s)) : 0; }

static int mount_str(ipb_buf *b, const char *s) {
    uint32_t l = s ? (uint32_t)strlen(s) : NULL_LEN;
    int r = ipb_buf_append(b, &l, 4);
    return r < 0 || !s ? r : ipb_buf_append(b, s, l);
}

int shim_config_encode(const shim_config *c, ipb_buf *out) {
    int r;
    if ((r = put_u32(out, TAG_MODE, c->mode)) < 0 || (r = put_u32(out, TAG_UID, c->uid)) < 0 ||
        (r = put_u32(out, TAG_GID, c->gid)) < 0 || (r = put_u32(out, TAG_SYSTEM, c->system)) < 0 ||
        (r = put_str(out, TAG_ROOT, c->root)) < 0 || (r = put_str(out, TAG_HOSTNAME, c->hostname)) < 0 ||
        (r = put_str(out, TAG_CWD, c->cwd)) < 0)
        return r;
    for (size_t i = 0; i < c->plan.n; i++) {
        const ipb_mount *m = &c->plan.m[i];
        ipb_buf tmp = {0};
        if ((r = ipb_buf_append(&tmp, &m->kind, 4)) < 0 || (r = ipb_buf_append(&tmp, &m->flags, 4)) < 0 ||
            (r = mount_str(&tmp, m->src)) < 0 || (r = mount_str(&tmp, m->dst)) < 0 ||
            (r = mount_str(&tmp, m->data)) < 0 ||
            ((m->flags & IPB_MNT_SAME) &&
             ((r = ipb_buf_append(&tmp, &m->id.dev, 8)) < 0 || (r = ipb_buf_append(&tmp, &m->id.ino, 8)) < 0)) ||
            (r = put(out, TAG_MOUNT, tmp.data, tmp.len)) < 0) {
            ipb_buf_free(&tmp);
            return r;
        }
        ipb_buf_free(&tmp);
    }
    for (size_t i = 0; i < c->argv.n; i++)
        if ((r = put_str(out, TAG_ARGV, c->argv.v[i])) < 0)
            return r;
    for (size_t i = 0; i < c->env.n; i++)
        if ((r = put_str(out, TAG_ENV, c->env.v[i])) < 0)
            return r;
    if (c->bpf_len && (r = put(out, TAG_BPF, c->bpf, c->bpf_len)) < 0)
        return r;
    if (c->nproc_max || c->as_max) {
        uint64_t rl[2] = {c->nproc_max, c->as_max};
        if ((r = put(out, TAG_RLIMITS, rl, sizeof(rl))) < 0)
            return r;
    }
    if (c->zygote && (r = put_u32(out, TAG_ZYGOTE, 1)) < 0)
        return r;
    if (c->standby && (r = put_u32(out, TAG_STANDBY, 1)) < 0)
        return r;
    return out->len > SHIM_CONFIG_MAX ? -E2BIG : 0;
}

static char *dup_str(const uint8_t *p, size_t len) {
    if (memchr(p, '\0', len))
        return NULL;
    return strndup((const char *)p, len);
}

static int take_mount_str(const uint8_t **p, size_t *left, char **ret) {
    uint32_t l;
    if (*left < 4)
        return -1;
    memcpy(&l, *p, 4);
    *p += 4;
    *left -= 4;
    if (l == NULL_LEN) {
        *ret = NULL;
        return 0;
    }
    if (l > *left)
        return -1;
    if (!(*ret = dup_str(*p, l)))
        return -1;
    *p += l;
    *left -= l;
    return 0;
}

static int decode_mount(const uint8_t *p, size_t len, ipb_mount_plan *plan) {
    uint32_t kind, flags;
    char *src = NULL, *dst = NULL, *data = NULL;
    if (len < 8)
        return -1;
    memcpy(&kind, p, 4);
    memcpy(&flags, p + 4, 4);
    p += 8;
    len -= 8;
    int r = -1;
    if (kind < IPB_MNT_BIND_RO || kind > IPB_MNT_DEVPTS)
        return -1;
    ipb_file_id id = {0, 0};
    if (take_mount_str(&p, &len, &src) < 0 || take_mount_str(&p, &len, &dst) < 0 || take_mount_str(&p, &len, &data) < 0)
        goto out;
    if (flags & IPB_MNT_SAME) {
        if (len != sizeof(id.dev) + sizeof(id.ino) || !src)
            goto out;
        memcpy(&id.dev, p, 8);
        memcpy(&id.ino, p + 8, 8);
        len = 0;
    }
    if (len != 0 || !dst || dst[0] != '/')
        goto out;
    r = ipb_mount_plan_add(plan, kind, flags, src, dst, data) < 0 ? -1 : 0;
    if (r == 0)
        plan->m[plan->n - 1].id = id;
out:
    free(src);
    free(dst);
    free(data);
    return r;
}

int shim_config_decode(const void *data, size_t len, shim_config *ret, ipb_error **err) {
    shim_config c;
    memset(&c, 0, sizeof(c));
    const uint8_t *p = data;
    while (len > 0) {
        uint16_t tag;
        uint32_t l;
        if (len < 6)
            goto bad;
        memcpy(&tag, p, 2);
        memcpy(&l, p + 2, 4);
        p += 6;
        len -= 6;
        if (l > len)
            goto bad;
        char **slot = NULL;
        switch (tag) {
        case TAG_MODE:
        case TAG_UID:
        case TAG_GID:
        case TAG_SYSTEM:
            if (l != 4)
                goto bad;
            memcpy(tag == TAG_MODE ? &c.mode : tag == TAG_UID ? &c.uid : tag == TAG_GID ? &c.gid : &c.system, p, 4);
            break;
        case TAG_ROOT:
            slot = &c.root;
            break;
        case TAG_HOSTNAME:
            slot = &c.hostname;
            break;
        case TAG_CWD:
            slot = &c.cwd;
            break;
        case TAG_MOUNT:
            if (decode_mount(p, l, &c.plan) < 0)
                goto bad;
            break;
        case TAG_ARGV:
        case TAG_ENV: {
            char *s = dup_str(p, l);
            if (!s)
                goto bad;
            int r = ipb_strv_push(tag == TAG_ARGV ? &c.argv : &c.env, s);
            free(s);
            if (r < 0)
                goto bad;
            break;
        }
        case TAG_BPF:
            if (c.bpf || l == 0 || l % 8 != 0)
                goto bad;
            if (!(c.bpf = malloc(l)))
                goto bad;
            memcpy(c.bpf, p, l);
            c.bpf_len = l;
            break;
        case TAG_RLIMITS: {
            uint64_t rl[2];
            if (l != sizeof(rl))
                goto bad;
            memcpy(rl, p, sizeof(rl));
            c.nproc_max = rl[0];
            c.as_max = rl[1];
            break;
        }
        case TAG_ZYGOTE: {
            uint32_t v;
            if (l != 4 || c.zygote)
                goto bad;
            memcpy(&v, p, 4);
            if (v != 1)
                goto bad;
            c.zygote = 1;
            break;
        }
        case TAG_STANDBY: {
            uint32_t v;
            if (l != 4 || c.standby)
                goto bad;
            memcpy(&v, p, 4);
            if (v != 1)
                goto bad;
            c.standby = 1;
            break;
        }
        default:
            goto bad;
        }
        if (slot) {
            if (*slot || !(*slot = dup_str(p, l)))
                goto bad;
        }
        p += l;
        len -= l;
    }
    if ((c.mode != SHIM_MODE_KERNEL && c.mode != SHIM_MODE_RUN) || !c.root || c.root[0] != '/' || c.argv.n == 0 ||
        !c.bpf || (c.zygote && c.mode != SHIM_MODE_KERNEL) || (c.standby && !c.zygote))
        goto bad;
    *ret = c;
    return 0;
bad:
    shim_config_free(&c);
    return ipb_error_set(err, EBADMSG, "malformed sandbox configuration");
}

void shim_config_free(shim_config *c) {
    free(c->root);
    free(c->hostname);
    free(c->cwd);
    ipb_mount_plan_free(&c->plan);
    ipb_strv_free(&c->argv);
    ipb_strv_free(&c->env);
    free(c->bpf);
    memset(c, 0, sizeof(*c));
}

static void fill_msg(struct shim_msg *m, uint32_t type, int32_t arg, int32_t err, uint32_t gen, const char *step,
                     const char *text) {
    memset(m, 0, sizeof(*m));
    m->type = type;
    m->arg = arg;
    m->err = err;
    m->gen = gen;
    if (step)
        strncpy(m->step, step, sizeof(m->step) - 1);
    if (text)
        strncpy(m->text, text, sizeof(m->text) - 1);
}

int shim_send_fds(int fd, uint32_t type, int32_t arg, const int *fds, size_t nfds) {
    struct shim_msg m;
    fill_msg(&m, type, arg, 0, 0, NULL, NULL);
    if (nfds > SHIM_MAX_FDS)
        return -EINVAL;
    return ipb_record_send(fd, &m, sizeof(m), fds, nfds, 0);
}

int shim_send(int fd, uint32_t type, int32_t arg, int32_t err, uint32_t gen, const char *step, const char *text) {
    struct shim_msg m;
    fill_msg(&m, type, arg, err, gen, step, text);
    return ipb_record_send(fd, &m, sizeof(m), NULL, 0, 0);
}

int shim_recv_fds(int fd, struct shim_msg *m, int *fds, size_t max, size_t *nfds) {
    int r = ipb_record_recv(fd, m, sizeof(*m), fds, max, nfds, 0);
    if (r != 1) {
        ipb_record_close_fds(fds, *nfds);
        *nfds = 0;
    }
    if (r == 1) {
        m->step[sizeof(m->step) - 1] = '\0';
        m->text[sizeof(m->text) - 1] = '\0';
    }
    return r;
}

int shim_recv(int fd, struct shim_msg *m) {
    size_t n;
    return shim_recv_fds(fd, m, NULL, 0, &n);
}
