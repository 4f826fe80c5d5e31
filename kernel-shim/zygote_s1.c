#include "zygote_s1.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "reap.h"
#include "shim_proto.h"
#include "zygote_proto.h"

static void boot(shim_zygote *z);

/* READY is due this long after ZY_BOOT: the first zygote's first kernel waits for it as for a
 * slow start, the supervisor's start bound covering both; later ones are a reset's fast path. */
static long boot_bound(const shim_zygote *z) { return z->started ? SHIM_ZY_BOOT_MS : SHIM_ZY_FIRST_BOOT_MS; }

void shim_zygote_init(shim_zygote *z, int ctl) {
    *z = (shim_zygote){.ctl = ctl, .fd = -1, .state = SHIM_ZY_OFF};
    if (ctl < 0)
        return;
    z->state = SHIM_ZY_NONE;
    shim_zygote_after_slow(z);
    /* The first zygote boots at once: the first kernel is forked from it, so that the two
     * share their pages (a kernel started the slow way beside a zygote holds its own copy of
     * every import, ~30 MiB more until the first reset). */
    boot(z);
}

int shim_zygote_pollfds(const shim_zygote *z, int fds[2]) {
    fds[0] = z->ctl;
    fds[1] = z->fd;
    return 2;
}

static void drop_channel(shim_zygote *z) {
    if (z->fd >= 0)
        close(z->fd);
    z->fd = -1;
}

/* The zygote misbehaved or missed a bound (why: SHIM_ZYGOTE_LATE or _BAD, told with its end;
 * 0: it is gone already), or its channel broke: S0 kills it; its end comes as ZY_ENDED. */
static void kill_zygote(shim_zygote *z, int why) {
    if (z->fd >= 0 || z->state == SHIM_ZY_BOOTING)
        z->killing_why = why;
    drop_channel(z);
    if (z->state != SHIM_ZY_OFF)
        z->state = SHIM_ZY_NONE;
    z->ending = zy_send(z->ctl, ZY_KILL, 0, 0, -1) == 0;
}

/* Lets the held zygote boot (ZY_BOOT to S0's child, which then execs it) once that is wanted
 * and its channel is here; READY is due within the boot bound from then. */
static void send_boot(shim_zygote *z) {
    if (!z->go || z->go_sent || z->fd < 0 || z->state != SHIM_ZY_BOOTING)
        return;
    if (zy_send(z->fd, ZY_BOOT, 0, 0, -1) < 0) {
        kill_zygote(z, 0);
        return;
    }
    z->go_sent = true;
    z->deadline = ipb_now_ms() + boot_bound(z);
}

static void on_ctl(shim_zygote *z, const zy_rec *m, int fd) {
    z->answers++;
    if (m->type == ZY_NEW) {
        drop_channel(z);
        z->fd = fd;
        z->booted = false;
        z->go_sent = false;
        if (z->state == SHIM_ZY_MAKING || z->state == SHIM_ZY_NONE)
            z->state = SHIM_ZY_BOOTING;
        send_boot(z);
        return;
    }
    if (fd >= 0)
        close(fd);
    if (m->type == ZY_NOTMADE) {
        /* S0 could not fork one (the pids limit: a kernel took the slot first). Nothing ended,
         * nothing to tell or count; the next START asks again, after KILL_ALL. */
        if (z->state == SHIM_ZY_MAKING)
            z->state = SHIM_ZY_NONE;
        return;
    }
    if (m->type != ZY_ENDED)
        return;
    drop_channel(z);
    z->ending = false;
    z->failed_boots = z->booted ? 0 : z->failed_boots + 1;
    z->booted = false;
    z->untold = true;
    z->status = m->a;
    z->why = z->killing_why;
    z->killing_why = 0;
    z->state = z->failed_boots >= 2 ? SHIM_ZY_OFF : SHIM_ZY_NONE;
}

/* One record from S0, waiting at most timeout_ms; false when none came. */
static bool read_ctl(shim_zygote *z, int timeout_ms) {
    zy_rec m;
    int fd = -1;
    int r = zy_recv(z->ctl, &m, &fd, timeout_ms);
    if (r == 1) {
        on_ctl(z, &m, fd);
        return true;
    }
    if (r < 0) {
        /* S0 is gone: the sandbox goes with it; no zygote meanwhile. */
        drop_channel(z);
        z->state = SHIM_ZY_OFF;
        z->ctl = -1;
    }
    return false;
}

/* After kill_zygote or a closed channel: its end, within the fork bound. */
static void await_end(shim_zygote *z) {
    long deadline = ipb_now_ms() + SHIM_ZY_FORK_MS;
    while (z->ctl >= 0 && z->ending) {
        long left = deadline - ipb_now_ms();
        if (left <= 0)
            break;
        read_ctl(z, (int)left);
    }
}

static void read_zygote(shim_zygote *z) {
    zy_rec m;
    int r = zy_recv(z->fd, &m, NULL, 0);
    if (r == 0)
        return;
    if (r == 1 && m.type == ZY_READY && z->state == SHIM_ZY_BOOTING && z->go_sent) {
        z->state = SHIM_ZY_READY;
        z->booted = true;
        z->failed_boots = 0;
        return;
    }
    /* EOF (it ended) or a record it had no business sending. */
    kill_zygote(z, r == 1 || r == -EBADMSG ? SHIM_ZYGOTE_BAD : 0);
    await_end(z);
}

void shim_zygote_service(shim_zygote *z) {
    if (z->ctl < 0)
        return;
    struct pollfd p[2] = {{z->ctl, POLLIN, 0}, {z->fd, POLLIN, 0}};
    if (poll(p, 2, 0) <= 0)
        return;
    /* Whether S0 had made the current one (its channel came): READY, booting or held. */
    bool had = z->fd >= 0;
    if (p[0].revents)
        read_ctl(z, 0);
    if (z->fd >= 0 && p[1].revents && z->fd == p[1].fd)
        read_zygote(z);
    /* A zygote lost while a kernel runs (OOM, the host): its place in the pids limit is taken
     * again at once by a held Zpre, or the running kernel could fork into it until the next
     * START. So for any zygote S0 had made (READY, booting, or held: a booting one can be
     * starved or OOM-killed too; given up, a new one that never boots). Not after a failed
     * make (no channel came: the kernel filled the slot first): that is not retried before
     * the next START, which makes one after KILL_ALL, so no ZY_MAKE storm. */
    if (had && z->fd < 0 && !z->ending && (z->state == SHIM_ZY_NONE || z->state == SHIM_ZY_OFF)) {
        shim_zygote_after_slow(z);
        z->after_loss = z->after_loss || z->state == SHIM_ZY_MAKING;
    }
}

static void wait_ready(shim_zygote *z) {
    while (z->state == SHIM_ZY_MAKING || z->state == SHIM_ZY_BOOTING) {
        long left = z->deadline - ipb_now_ms();
        if (left <= 0) {
            if (z->fd >= 0 || z->state == SHIM_ZY_BOOTING) {
                kill_zygote(z, SHIM_ZYGOTE_LATE);
                await_end(z);
            }
            z->state = z->state == SHIM_ZY_OFF ? SHIM_ZY_OFF : SHIM_ZY_NONE;
            return;
        }
        struct pollfd p[2] = {{z->ctl, POLLIN, 0}, {z->fd, POLLIN, 0}};
        int r = poll(p, 2, (int)left);
        if (r < 0 && errno != EINTR)
            return;
        if (r <= 0)
            continue;
        if (p[0].revents)
            read_ctl(z, 0);
        if (z->fd >= 0 && z->fd == p[1].fd && p[1].revents)
            read_zygote(z);
    }
}

/* The standby's channel must be what S1 reads records from: a SOCK_SEQPACKET socket. */
static bool seqpacket(int fd) {
    int type = 0;
    socklen_t len = sizeof(type);
    return fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

/* Asks the READY zygote for a fork (ZY_FORK: a kernel; ZY_STANDBY: a standby, whose channel
 * comes with ZY_STARTED into *chan) and awaits its answer within SHIM_ZY_FORK_MS. Returns the
 * pid (> 1), 0 when it could not fork (ZY_FAILED), or -1 when it was killed (a late, bad or
 * missing answer). */
static pid_t ask_fork(shim_zygote *z, uint32_t type, uint32_t gen, int *chan) {
    if (chan)
        *chan = -1;
    if (zy_send(z->fd, type, gen, 0, -1) < 0) {
        kill_zygote(z, 0);
        await_end(z);
        return -1;
    }
    long deadline = ipb_now_ms() + SHIM_ZY_FORK_MS;
    long left = deadline - ipb_now_ms();
    zy_rec m;
    int fd = -1;
    int r = left > 0 ? zy_recv(z->fd, &m, chan ? &fd : NULL, (int)left) : 0;
    if (r == 1 && m.type == ZY_STARTED && m.gen == gen && (!chan || seqpacket(fd))) {
        if (chan)
            *chan = fd;
        return m.a;
    }
    if (fd >= 0)
        close(fd);
    if (r == 1 && m.type == ZY_FAILED && m.gen == gen)
        return 0; /* it could not fork (the pids limit): the slow way, which says why */
    /* A standby's STARTED without its channel (or with another kind of descriptor) is as bad as
     * any other record. */
    kill_zygote(z, r == 0 ? SHIM_ZYGOTE_LATE : r == 1 || r == -EBADMSG ? SHIM_ZYGOTE_BAD : 0);
    await_end(z);
    return -1;
}

static pid_t fork_kernel(shim_zygote *z, uint32_t gen) { return ask_fork(z, ZY_FORK, gen, NULL); }

pid_t shim_zygote_fork_standby(shim_zygote *z, uint32_t serial, int *chan) {
    *chan = -1;
    if (z->ctl < 0 || z->state != SHIM_ZY_READY || z->fd < 0)
        return 0;
    pid_t pid = ask_fork(z, ZY_STANDBY, serial, chan);
    if (pid < 0 && z->fd < 0 && !z->ending && (z->state == SHIM_ZY_NONE || z->state == SHIM_ZY_OFF)) {
        /* Lost while a kernel runs, as in shim_zygote_service: its slot in the pids limit is
         * taken again at once by a held Zpre, which boots once the next kernel answered. */
        shim_zygote_after_slow(z);
        z->after_loss = z->after_loss || z->state == SHIM_ZY_MAKING;
    }
    return pid > 1 ? pid : 0;
}

/* The zygote made (or being made) may boot now. */
static void boot(shim_zygote *z) {
    if ((z->state != SHIM_ZY_MAKING && z->state != SHIM_ZY_BOOTING) || z->go)
        return;
    z->go = true;
    z->deadline = ipb_now_ms() + boot_bound(z);
    send_boot(z);
}

/* Before a kernel starts the slow way: the zygote's place in the pids limit is taken now, while
 * P1 holds no process that could fork into it (the START follows KILL_ALL), and not after the
 * kernel started: a new held Zpre, or, once given up, one that is never let boot. S0's answer
 * (its channel, or its end) is awaited within the fork bound. */
static void await_channel(shim_zygote *z);

static void hold_slot(shim_zygote *z) {
    if (z->ctl < 0 || z->fd >= 0 || z->ending)
        return;
    if (z->state == SHIM_ZY_NONE) {
        shim_zygote_after_slow(z);
        if (z->state != SHIM_ZY_MAKING)
            return;
    } else if (z->state != SHIM_ZY_OFF || zy_send(z->ctl, ZY_MAKE, 0, 0, -1) < 0) {
        return;
    }
    await_channel(z);
}

/* S0's answer to a ZY_MAKE (the held Zpre's channel, or its end), within the fork bound. */
static void await_channel(shim_zygote *z) {
    unsigned answers = z->answers;
    long deadline = ipb_now_ms() + SHIM_ZY_FORK_MS;
    while (z->ctl >= 0 && z->fd < 0 && z->answers == answers) {
        long left = deadline - ipb_now_ms();
        if (left <= 0)
            break;
        read_ctl(z, (int)left);
    }
}

pid_t shim_zygote_start(shim_zygote *z, int sup_fd, uint32_t gen) {
    if (z->ctl < 0)
        return 0;
    shim_zygote_service(z);
    if (z->after_loss) {
        /* The zygote was lost while the last kernel ran: this kernel starts the slow way, as
         * after any loss; the Zpre held since then keeps the slot (its channel is awaited, or
         * the slow kernel could fork into the slot first) and boots once this kernel answered. */
        z->after_loss = false;
        if ((z->state == SHIM_ZY_MAKING || z->state == SHIM_ZY_BOOTING) && !z->go) {
            if (z->fd < 0)
                await_channel(z);
            goto slow;
        }
    }
    /* The first kernel waits for the first zygote's boot (begun at init), within its longer
     * bound. A later START lets a held zygote boot (after a lost one, the slow kernel died or
     * was reset before it answered) and waits for it, like one booting already, rather than
     * start one more Python beside it. */
    boot(z);
    wait_ready(z);
    z->started = true;
    if (z->state == SHIM_ZY_READY) {
        pid_t pid = fork_kernel(z, gen);
        if (pid > 1)
            return pid;
        if (pid < 0) {
            /* A kernel may have been forked before it failed: nothing half-made stays (every
             * process of P1 gets SIGKILL; the reap is bounded, stragglers go to pid1.c's loop). */
            shim_kill_all_bounded(SHIM_ZY_FORK_MS);
        }
    }
slow:
    z->started = true;
    if (z->untold) {
        bool give_up = z->state == SHIM_ZY_OFF && !z->gave_up_told;
        if (give_up)
            z->gave_up_told = true;
        if (z->state != SHIM_ZY_OFF || give_up)
            shim_send(sup_fd, SHIM_EV_ZYGOTE, z->status, (give_up ? SHIM_ZYGOTE_GIVEN_UP : 0) | z->why, gen, NULL,
                      NULL);
        z->why = 0;
        z->untold = false;
    }
    hold_slot(z);
    return 0;
}

void shim_zygote_after_slow(shim_zygote *z) {
    if (z->ctl < 0)
        return;
    /* Given up: S0 still holds the zygote's place in the pids limit with a held Zpre that is
     * never let boot, or the slot the limit was raised by would be the kernel's. */
    if (z->state == SHIM_ZY_OFF) {
        if (z->fd < 0 && !z->ending)
            zy_send(z->ctl, ZY_MAKE, 0, 0, -1);
        return;
    }
    if (z->state != SHIM_ZY_NONE)
        return;
    if (zy_send(z->ctl, ZY_MAKE, 0, 0, -1) < 0)
        return;
    z->state = SHIM_ZY_MAKING;
    z->deadline = ipb_now_ms() + SHIM_ZY_BOOT_MS;
    z->go = z->go_sent = false;
}

void shim_zygote_answered(shim_zygote *z) {
    /* Not a Zpre held after a loss while this kernel ran: the next START takes the slow way
     * and says so (SHIM_EV_ZYGOTE); that kernel's answer lets it boot. Booted on this kernel's
     * answer (a loss during its handshake), the next START forked from it and the loss was
     * never told. */
    if (z->ctl >= 0 && !z->after_loss)
        boot(z);
}
