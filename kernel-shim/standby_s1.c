#include "standby_s1.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "zygote_proto.h"

void shim_standby_init(shim_standby *sb, bool enabled) { *sb = (shim_standby){.enabled = enabled, .fd = -1}; }

void shim_standby_answered(shim_standby *sb, uint32_t gen) {
    sb->answered = true;
    sb->answered_gen = gen;
    sb->due = ipb_now_ms() + SHIM_STANDBY_DELAY_MS;
}

/* Whether a standby is wanted for the running kernel of generation gen, whenever it is due. */
static bool wanted(const shim_standby *sb, bool running, uint32_t gen) {
    return sb->enabled && sb->pid <= 0 && running && sb->answered && sb->answered_gen == gen &&
           !(sb->made && sb->made_for == gen);
}

int shim_standby_wait_ms(const shim_standby *sb, bool running, uint32_t gen) {
    if (!wanted(sb, running, gen))
        return -1;
    long left = sb->due - ipb_now_ms();
    return left <= 0 ? -1 : (int)left;
}

static void close_channel(shim_standby *sb) {
    if (sb->fd >= 0)
        close(sb->fd);
    sb->fd = -1;
    sb->prepared = false;
}

void shim_standby_forget(shim_standby *sb) {
    close_channel(sb);
    sb->pid = 0;
}

void shim_standby_maybe_make(shim_standby *sb, shim_zygote *z, bool running, uint32_t gen) {
    if (!wanted(sb, running, gen) || ipb_now_ms() < sb->due || z->ctl < 0 || z->state != SHIM_ZY_READY || z->fd < 0)
        return;
    /* Asked once for this kernel, whatever comes of it: a standby that kernel code kills is not
     * made again before the next kernel (that reset forks from the zygote). */
    sb->made = true;
    sb->made_for = gen;
    sb->serial++;
    int chan = -1;
    pid_t pid = shim_zygote_fork_standby(z, sb->serial, &chan);
    if (pid <= 1) {
        if (chan >= 0)
            close(chan);
        return;
    }
    sb->pid = pid;
    sb->fd = chan;
    sb->prepared = false;
}

int shim_standby_pollfd(const shim_standby *sb) { return sb->pid > 0 ? sb->fd : -1; }

/* SIGKILL to it; its reap comes later (SIGCHLD loop, or reap_standby). */
static void kill_standby(shim_standby *sb) {
    if (sb->pid > 1)
        kill(sb->pid, SIGKILL);
    close_channel(sb);
}

void shim_standby_service(shim_standby *sb) {
    if (sb->pid <= 0 || sb->fd < 0)
        return;
    zy_rec m;
    int r = zy_recv(sb->fd, &m, NULL, 0);
    if (r == 0)
        return;
    if (r == 1 && m.type == ZY_PREPARED && m.gen == sb->serial && !sb->prepared) {
        sb->prepared = true;
        return;
    }
    /* EOF, a malformed record, or one it had no business sending. */
    kill_standby(sb);
}

void shim_standby_reaped(shim_standby *sb, pid_t w) {
    if (sb->pid > 0 && w == sb->pid)
        shim_standby_forget(sb);
}

pid_t shim_standby_spared(const shim_standby *sb) { return sb->pid > 1 && sb->fd >= 0 ? sb->pid : 0; }

/* After kill_standby: waits for its end on its own pid only (other children's statuses stay
 * for the SIGCHLD loop), within SHIM_ZY_FORK_MS; then forgets it. One whose end is later (a
 * host tracer holds it) is reaped by the SIGCHLD loop, which ignores it: its pid cannot be
 * reused before that reap. SIGCHLD is blocked (S1's signalfd). */
static void reap_standby(shim_standby *sb) {
    pid_t pid = sb->pid;
    long deadline = ipb_now_ms() + SHIM_ZY_FORK_MS;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    while (pid > 1) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            break;
        long left = deadline - ipb_now_ms();
        if (left <= 0)
            break;
        long wait = left < 20 ? left : 20;
        struct timespec ts = {0, wait * 1000000L};
        sigtimedwait(&chld, NULL, &ts);
    }
    shim_standby_forget(sb);
}

pid_t shim_standby_activate(shim_standby *sb, uint32_t gen) {
    if (sb->pid <= 1) {
        shim_standby_forget(sb);
        return 0;
    }
    /* What it sent since the loop last looked (ZY_PREPARED, or EOF). */
    if (sb->fd >= 0 && !sb->prepared)
        shim_standby_service(sb);
    if (sb->fd < 0 || !sb->prepared)
        goto drop;
    /* Kernel code may have stopped it. */
    kill(sb->pid, SIGCONT);
    if (zy_send(sb->fd, ZY_ACTIVATE, gen, 0, -1) < 0)
        goto drop;
    zy_rec m;
    int r = zy_recv(sb->fd, &m, NULL, SHIM_ZY_FORK_MS);
    if (r == 1 && m.type == ZY_ACTIVE && m.gen == gen) {
        pid_t pid = sb->pid;
        shim_standby_forget(sb);
        return pid;
    }
    /* Declined (it exits by itself, but is killed and reaped anyway), EOF, late or bad. */
drop:
    kill_standby(sb);
    reap_standby(sb);
    return 0;
}
