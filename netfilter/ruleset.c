/* The sandbox's nftables table, loaded with libnftables. Order matters: DNS first (to any
 * address, also the sandbox's own loopback), then every other TCP connection that leaves the
 * sandbox's loopback goes to the proxy. The filter chain drops all else on its way out, so
 * UDP, ICMP and raw packets fail at once with EPERM instead of vanishing; `ct status dnat`
 * lets the replies of redirected connections (addressed to the dialled address, which the
 * local default route made local) through. */
#include <errno.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <string.h>

#include "netns.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static const char ruleset[] =
    "table inet ipybox {\n"
    "  chain nat_out {\n"
    "    type nat hook output priority -100; policy accept;\n"
    "    meta l4proto { tcp, udp } th dport 53 redirect to :" STR(
        IPB_EGRESS_DNS_PORT) "\n"
                             "    ip daddr != 127.0.0.0/8 meta l4proto tcp redirect to :" STR(
                                 IPB_EGRESS_PROXY_PORT) "\n"
                                                        "    ip6 daddr != ::1 meta l4proto tcp redirect to :" STR(
                                                            IPB_EGRESS_PROXY_PORT) "\n"
                                                                                   "  }\n"
                                                                                   "  chain filter_out {\n"
                                                                                   "    type filter hook output "
                                                                                   "priority 0; policy drop;\n"
                                                                                   "    ip daddr 127.0.0.0/8 accept\n"
                                                                                   "    ip6 daddr ::1 accept\n"
                                                                                   "    ct status dnat accept\n"
                                                                                   "  }\n"
                                                                                   "}\n";

int ipb_netns_install_ruleset(ipb_error **err) {
    struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
    if (!nft)
        return ipb_error_set(err, ENOMEM, "creating an nftables context");
    nft_ctx_buffer_output(nft);
    nft_ctx_buffer_error(nft);
    int r = nft_run_cmd_from_buffer(nft, ruleset);
    if (r != 0) {
        const char *msg = nft_ctx_get_error_buffer(nft);
        char first[200] = "";
        if (msg) {
            size_t n = strcspn(msg, "\n");
            snprintf(first, sizeof(first), "%.*s", (int)(n < 199 ? n : 199), msg);
        }
        ipb_error_set(err, EPERM,
                      "loading the egress ruleset with nftables: %s (the host kernel needs nf_tables "
                      "with NAT, redirect and conntrack; as root: modprobe nft_redir nft_ct)",
                      first[0] ? first : "failed");
    }
    nft_ctx_free(nft);
    return r != 0 ? -1 : 0;
}
