/* ipybox-monitor: the private monitor of root's own ipybox (`ipyboxd --private-monitor
 * worker|frontend`, monitor.c), as a program of its own. It is the monitor's code alone, linked
 * with none of the libraries the rest of ipybox needs (curl, ZeroMQ, nftables, ...), so that it
 * starts in about a millisecond instead of ten: root's sessions wait for it before their
 * sandbox is built. Started by ipybox with its channel on fd 3; not meant to be run by hand. */
#include <stdio.h>
#include <string.h>

#include "monitor.h"

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--private-monitor")) {
        fprintf(stderr, "ipybox-monitor: this program is started by ipybox; it is not meant to be run by hand\n");
        return 2;
    }
    return ipbm_main(argc, argv);
}
