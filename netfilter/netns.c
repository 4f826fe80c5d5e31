#include "netns.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "cleanup.h"

int ipb_netns_loopback_up(ipb_error **err) {
    cleanup_close int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ipb_error_set(err, errno, "bringing up loopback: socket");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
        return ipb_error_set(err, errno, "bringing up loopback: reading flags");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
        return ipb_error_set(err, errno, "bringing up loopback");
    return 0;
}
