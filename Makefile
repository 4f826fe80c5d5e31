# ipybox-native build. Plain make; every library comes through pkg-config.
#   make            build bin/ipybox and libexec/ipybox-shim under $(BUILD)
#   make check      unit (with the fuzz harnesses over their seeds), integration, security, SDK
#                   and fault-injection tests
#   make check-system  the system service as installed, in a Debian 12 VM (root; tests/vm/)
#   make sanitize   the same tests with SANITIZE=address,undefined in build-san/
#   make check-fresh  ./start and ./test in a bare Debian 12 root (debootstrap; root, network)
#   make bench      benchmarks (bench/results.md, bench/egress.md, bench/daemon.md, bench/tools.md, bench/sdk.md)
#   make install    PREFIX=/usr/local DESTDIR=   (make uninstall, the same variables: removes it)
#   make format-check  the C sources against .clang-format (clang-format 14, as in Debian 12; CI runs it)

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec
# The system's /etc for the system prefixes (/usr, /usr/local: where a Debian administrator
# looks, and the default); $(PREFIX)/etc for any other, so that `make install PREFIX=DIR`
# writes nothing outside DIR. Compiled in as the system service's default configuration.
SYSCONFDIR ?= $(if $(filter /usr /usr/ /usr/local /usr/local/,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR    ?= $(PREFIX)/lib/systemd/system
MANDIR     ?= $(PREFIX)/share/man
DATADIR    ?= $(PREFIX)/share
# The Claude Code plugin (dist/claude-code-plugin/, its .mcp.json naming $(BINDIR)/ipybox) and
# the marketplace that lists it (dist/.claude-plugin/), in the same layout as in dist/.
PLUGINDIR  := $(DATADIR)/ipybox/claude-code-plugin
MARKETDIR  := $(DATADIR)/ipybox/.claude-plugin
DESTDIR    ?=
BUILD      ?= build
SANITIZE   ?=
CC         ?= cc
PKG_CONFIG ?= pkg-config
PYTHON     ?= /usr/bin/python3

PKGS      := libseccomp libcap jansson libzmq openssl libnftables libnl-route-3.0 libcurl
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS))
# libcurl is not linked: mcpclient/curl_load.c loads it at its first use (its headers are used).
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(filter-out libcurl,$(PKGS)))
# Check is needed by the unit tests only: asked for when a test binary is built (recursive
# variables), so that `make all` on a machine without Check says nothing about it.
CHECK_CFLAGS = $(shell $(PKG_CONFIG) --cflags check)
CHECK_LIBS   = $(shell $(PKG_CONFIG) --libs check)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wformat=2 -Wformat-security -Wpointer-arith -Wundef -Wwrite-strings \
        -Wcast-align -Wnull-dereference -Wimplicit-fallthrough -Wvla \
        -Wno-unused-parameter
HARDEN := -fstack-protector-strong -fPIE -D_FORTIFY_SOURCE=3
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARN) $(HARDEN) $(CFLAGS) $(PKG_CFLAGS) \
              -DIPYBOX_LIBEXECDIR='"$(LIBEXECDIR)"' -DIPYBOX_SYSCONFDIR='"$(SYSCONFDIR)"'
ALL_LDFLAGS := -pie -Wl,-z,relro,-z,now $(LDFLAGS)
ifneq ($(SANITIZE),)
ALL_CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -U_FORTIFY_SOURCE
ALL_LDFLAGS += -fsanitize=$(SANITIZE)
endif

# Dependency direction (architecture.md): each folder sees only the include paths it may use,
# so a wrong-way include does not compile.
INC_common     := -Icommon
INC_policy     := -Ipolicy -Icommon
INC_netfilter  := -Inetfilter -Ipolicy -Icommon
INC_proxy      := -Iproxy -Inetfilter -Ipolicy -Icommon
INC_kernel-shim := -Ikernel-shim -Inetfilter -Ipolicy -Icommon
INC_monitor    := -Imonitor -Ikernel-shim -Inetfilter -Ipolicy -Icommon
INC_mcpclient  := -Imcpclient -Ipolicy -Icommon
INC_toolgen    := -Itoolgen -Icommon
INC_supervisor := -Isupervisor -Imcpclient -Itoolgen -Imonitor -Iproxy -Ikernel-shim -Inetfilter -Ipolicy -Icommon
INC_daemon     := -Idaemon -Imcpclient -Itoolgen -Imonitor -Isupervisor -Iproxy -Ikernel-shim -Inetfilter -Ipolicy -Icommon
INC_client     := -Iclient -Idaemon -Imcpclient -Itoolgen -Imonitor -Isupervisor -Iproxy -Ikernel-shim -Inetfilter -Ipolicy -Icommon
INC_tests      := $(INC_client)

LAYERS := common policy netfilter proxy kernel-shim monitor mcpclient toolgen supervisor daemon
srcs = $(wildcard $(1)/*.c) $(wildcard $(1)/*.S)
objs = $(patsubst %.S,$(BUILD)/obj/%.o,$(patsubst %.c,$(BUILD)/obj/%.o,$(call srcs,$(1))))

LIB_common     := $(BUILD)/lib/libcommon.a
LIB_policy     := $(BUILD)/lib/libpolicy.a
LIB_netfilter  := $(BUILD)/lib/libnetfilter.a
LIB_proxy      := $(BUILD)/lib/libproxy.a
LIB_kernel-shim := $(BUILD)/lib/libshim.a
LIB_monitor    := $(BUILD)/lib/libmonitor.a
LIB_supervisor := $(BUILD)/lib/libsupervisor.a
LIB_mcpclient  := $(BUILD)/lib/libmcpclient.a
LIB_toolgen    := $(BUILD)/lib/libtoolgen.a
LIB_daemon     := $(BUILD)/lib/libdaemon.a
# link order: dependents first
LIBS_ALL := $(LIB_daemon) $(LIB_supervisor) $(LIB_toolgen) $(LIB_mcpclient) $(LIB_monitor) $(LIB_kernel-shim) $(LIB_proxy) $(LIB_netfilter) $(LIB_policy) $(LIB_common)

IPYBOX := $(BUILD)/bin/ipybox
# ipyboxd is the same program (it looks at its name), so sessions re-execute that one binary.
IPYBOXD := $(BUILD)/bin/ipyboxd
SHIM   := $(BUILD)/libexec/ipybox/ipybox-shim
# The monitor's code alone, for root's private monitor (monitor/main/monitor_main.c).
MONITOR := $(BUILD)/libexec/ipybox/ipybox-monitor
CLIENT_OBJS := $(call objs,client)

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
HELPER_SRCS := $(wildcard tests/helpers/*.c)
HELPER_BINS := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(HELPER_SRCS))
FUZZ_SRCS  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRCS))
FUZZ_BINS  := $(patsubst %,$(BUILD)/tests/fuzz/fuzz_%,$(FUZZ_NAMES))
# Host-side test programs (drive one library from Python tests): tests/tools/*.c
TOOL_SRCS  := $(wildcard tests/tools/*.c)
TOOL_BINS  := $(patsubst tests/tools/%.c,$(BUILD)/tests/tools/%,$(TOOL_SRCS))

.PHONY: all check check-fresh check-system unit integration sanitize bench bench-egress bench-daemon bench-system bench-tools bench-sdk bench-faults install uninstall clean fuzz format-check
all: $(IPYBOX) $(IPYBOXD) $(SHIM) $(MONITOR)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_$(firstword $(subst /, ,$<))) -MMD -MP -c $< -o $@

# Assembly: toolgen/runtime.S embeds the Python runtime (.incbin, paths from the project root).
$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_$(firstword $(subst /, ,$<))) -MMD -MP -c $< -o $@
$(BUILD)/obj/toolgen/runtime.o: toolgen/mcptools_init.py toolgen/mcptools_runtime.py
$(BUILD)/obj/supervisor/kernel_launch.o: supervisor/kernel_launch.py supervisor/kernel_zygote.py \
	supervisor/kernel_standby.py supervisor/kernel_output.py

# What uses the compiled-in paths is rebuilt when they change (make install PREFIX=...
# after make): a stamp rewritten only when LIBEXECDIR or SYSCONFDIR differ from the last build.
PATHS_STAMP := $(BUILD)/gen/paths
$(PATHS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' 'LIBEXECDIR=$(LIBEXECDIR)' 'SYSCONFDIR=$(SYSCONFDIR)' >$@.new
	@if cmp -s $@.new $@; then rm -f $@.new; else mv -f $@.new $@; fi
$(BUILD)/obj/kernel-shim/locate.o $(BUILD)/obj/monitor/monitor.o $(BUILD)/obj/daemon/main.o: $(PATHS_STAMP)
.PHONY: FORCE
FORCE:

define layer_lib
$(LIB_$(1)): $(call objs,$(1))
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call layer_lib,$(l))))

$(IPYBOX): $(CLIENT_OBJS) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $(CLIENT_OBJS) $(LIBS_ALL) $(PKG_LIBS)

$(IPYBOXD): $(IPYBOX)
	ln -f $(IPYBOX) $(IPYBOXD)

$(SHIM): $(BUILD)/obj/kernel-shim/main/shim_main.o $(LIB_kernel-shim) $(LIB_netfilter) $(LIB_policy) $(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/obj/kernel-shim/main/%.o: kernel-shim/main/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_kernel-shim) -MMD -MP -c $< -o $@

# --as-needed: only the libraries the monitor's code calls (libc alone today), whatever the
# toolchain's default; the start of root's sessions waits for this program's.
$(MONITOR): $(BUILD)/obj/monitor/main/monitor_main.o $(LIB_monitor) $(LIB_kernel-shim) $(LIB_netfilter) $(LIB_policy) \
	$(LIB_common)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -Wl,--as-needed -o $@ $^ $(PKG_LIBS)

$(BUILD)/obj/monitor/main/%.o: monitor/main/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_monitor) -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/unit/%.c $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(INC_tests) $(ALL_LDFLAGS) -o $@ $< $(LIBS_ALL) $(PKG_LIBS) $(CHECK_LIBS)

$(BUILD)/tests/tools/%: tests/tools/%.c $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_tests) $(ALL_LDFLAGS) -o $@ $< $(LIBS_ALL) $(PKG_LIBS)

# Attack helpers run inside the sandbox; static so they need nothing from the sandbox's /usr.
$(BUILD)/tests/helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -Wall -Werror -static -o $@ $<

# The fuzz harnesses without libFuzzer: each tests/fuzz/fuzz_X.c with tests/fuzz/driver.c (a
# main() that runs each input once, as libFuzzer's -runs=0), linked with the FUZZ_SOURCES and
# FUZZ_PKGS its header names (the same lines tests/fuzz/run builds from), built with this
# compiler and these flags plus FUZZ_SANITIZE (empty: none). The unit tier runs each over
# tests/fuzz/seeds/X/ and tests/fuzz/regressions/X/ (tests/lib/run_all.py). Objects go to
# $(BUILD)/tests/fuzz/obj/, instrumented unlike $(BUILD)/obj/.
FUZZ_SANITIZE ?= address,undefined
FUZZ_OBJ      := $(BUILD)/tests/fuzz/obj
FUZZ_INC      := -Icommon -Ipolicy -Ikernel-shim -Inetfilter -Iproxy -Isupervisor -Imonitor -Imcpclient
FUZZ_CFLAGS   := $(ALL_CFLAGS)
FUZZ_LDFLAGS  := $(ALL_LDFLAGS)
ifneq ($(FUZZ_SANITIZE),)
FUZZ_CFLAGS  += -fsanitize=$(FUZZ_SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer -U_FORTIFY_SOURCE
FUZZ_LDFLAGS += -fsanitize=$(FUZZ_SANITIZE)
endif
# FUZZ_SOURCES_X and FUZZ_PKGS_X from the first such line of each harness's header, read by one
# awk for all harnesses ("@@" stands for a newline until $(eval)).
define fuzz_newline


endef
FUZZ_META := $(shell awk 'FNR == 1 { n = FILENAME; sub(/^.*\/fuzz_/, "", n); sub(/\.c$$/, "", n); s = p = 0 } \
    /^ *\* *FUZZ_SOURCES:/ && !s { s = 1; v = $$0; sub(/^ *\* *FUZZ_SOURCES:[ ]*/, "", v); printf "FUZZ_SOURCES_%s := %s@@", n, v } \
    /^ *\* *FUZZ_PKGS:/ && !p { p = 1; v = $$0; sub(/^ *\* *FUZZ_PKGS:[ ]*/, "", v); printf "FUZZ_PKGS_%s := %s@@", n, v }' $(FUZZ_SRCS))
$(eval $(subst @@,$(fuzz_newline),$(FUZZ_META)))

$(FUZZ_OBJ)/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) $(FUZZ_INC) -MMD -MP -c $< -o $@

$(FUZZ_OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) $(INC_$(firstword $(subst /, ,$<))) -MMD -MP -c $< -o $@

define fuzz_driver
ifeq ($$(strip $$(FUZZ_SOURCES_$(1))),)
$(BUILD)/tests/fuzz/fuzz_$(1):
	@echo "tests/fuzz/fuzz_$(1).c has no 'FUZZ_SOURCES:' line in its header (the project sources it links with)" >&2; false
else
$(BUILD)/tests/fuzz/fuzz_$(1): $(FUZZ_OBJ)/tests/fuzz/fuzz_$(1).o $(FUZZ_OBJ)/tests/fuzz/driver.o \
    $$(patsubst %.c,$(FUZZ_OBJ)/%.o,$$(FUZZ_SOURCES_$(1)))
	$$(CC) $$(FUZZ_LDFLAGS) -o $$@ $$^ $$(if $$(strip $$(FUZZ_PKGS_$(1))),$$(shell $$(PKG_CONFIG) --libs $$(FUZZ_PKGS_$(1))))
endif
endef
$(foreach n,$(FUZZ_NAMES),$(eval $(call fuzz_driver,$(n))))

unit: $(UNIT_BINS) $(FUZZ_BINS)
	@tests/run-unit $(UNIT_BINS) $(FUZZ_BINS)

check: all $(UNIT_BINS) $(FUZZ_BINS) $(HELPER_BINS) $(TOOL_BINS)
	@PYTHON=$(PYTHON) BUILD=$(BUILD) tests/run-all $(UNIT_BINS) $(FUZZ_BINS)

# The VM tier: a stock Debian 12 under qemu (KVM, else TCG) gets this checkout, builds and
# installs it and runs the system service under systemd with cgroup v2 (tests/vm/system.sh).
# Root; the image is cached in IPYBOX_VM_CACHE (default /var/cache/ipybox-vm).
check-system:
	@scripts/deps.sh system
	@tests/vm/boot.sh -t 2400 tests/vm/system.sh

sanitize:
	$(MAKE) BUILD=build-san SANITIZE=address,undefined check

# The README's quick start in a bare debootstrapped Debian 12 (tests/fresh/run.sh): ./start
# answers 1+1, ./test passes. Needs root; builds nothing here.
check-fresh:
	@tests/fresh/run.sh

# libFuzzer harnesses (clang); each runs for FUZZ_SECONDS (0: each seed and regression once).
FUZZ_SECONDS ?= 60
fuzz:
	@tests/fuzz/run $(FUZZ_SECONDS)

bench: all
	@PYTHON=$(PYTHON) BUILD=$(BUILD) $(PYTHON) bench/bench.py --out bench/results.md
	@BUILD=$(BUILD) $(PYTHON) bench/egress.py --out bench/egress.md
	@BUILD=$(BUILD) $(PYTHON) bench/daemon.py --out bench/daemon.md
	@BUILD=$(BUILD) $(PYTHON) bench/tools.py --out bench/tools.md
	@BUILD=$(BUILD) $(PYTHON) bench/sdk.py --out bench/sdk.md
	@BUILD=$(BUILD) $(PYTHON) bench/faults.py --out bench/faults.md

# The egress benchmark alone (root: it builds a network namespace).
bench-egress: all
	@BUILD=$(BUILD) $(PYTHON) bench/egress.py --out bench/egress.md

# The daemon benchmark alone (sessions per second, memory per session, the most sessions).
bench-daemon: all
	@BUILD=$(BUILD) $(PYTHON) bench/daemon.py --out bench/daemon.md

# What faults cost: memory with a stalled client, reset with held connections, tiny timeouts.
bench-faults: all
	@BUILD=$(BUILD) $(PYTHON) bench/faults.py --out bench/faults.md

bench-system: all
	@BUILD=$(BUILD) $(PYTHON) bench/system.py --out bench/system.md

# Tool calls from kernel code through ipybox against the same calls made by an SDK client.
bench-tools: all
	@BUILD=$(BUILD) $(PYTHON) bench/tools.py --out bench/tools.md

# The Python SDK against a raw MCP client, on one sandbox (sdk/python).
bench-sdk: all
	@BUILD=$(BUILD) $(PYTHON) bench/sdk.py --out bench/sdk.md

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR)/ipybox $(DESTDIR)$(UNITDIR) \
	    $(DESTDIR)$(SYSCONFDIR)/ipybox $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(IPYBOX) $(DESTDIR)$(BINDIR)/ipybox
	ln -f $(DESTDIR)$(BINDIR)/ipybox $(DESTDIR)$(BINDIR)/ipyboxd
	install -m 0755 $(SHIM) $(DESTDIR)$(LIBEXECDIR)/ipybox/ipybox-shim
	install -m 0755 $(MONITOR) $(DESTDIR)$(LIBEXECDIR)/ipybox/ipybox-monitor
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' dist/ipyboxd.service.in \
	    >$(DESTDIR)$(UNITDIR)/ipyboxd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/ipyboxd.service
	# An administrator's configuration is never overwritten.
	test -e $(DESTDIR)$(SYSCONFDIR)/ipybox/ipyboxd.conf || \
	    install -m 0644 dist/ipyboxd.conf $(DESTDIR)$(SYSCONFDIR)/ipybox/ipyboxd.conf
	install -m 0644 man/ipybox.1 $(DESTDIR)$(MANDIR)/man1/ipybox.1
	install -m 0644 man/ipyboxd.8 $(DESTDIR)$(MANDIR)/man8/ipyboxd.8
	install -d $(DESTDIR)$(MARKETDIR) $(DESTDIR)$(PLUGINDIR)/.claude-plugin $(DESTDIR)$(PLUGINDIR)/skills/code-actions
	install -m 0644 dist/.claude-plugin/marketplace.json $(DESTDIR)$(MARKETDIR)/marketplace.json
	install -m 0644 dist/claude-code-plugin/.claude-plugin/plugin.json $(DESTDIR)$(PLUGINDIR)/.claude-plugin/plugin.json
	install -m 0644 dist/claude-code-plugin/skills/code-actions/SKILL.md \
	    $(DESTDIR)$(PLUGINDIR)/skills/code-actions/SKILL.md
	# The server entry names the installed binary, whatever the client's PATH.
	sed -e 's|"command": "ipybox"|"command": "$(BINDIR)/ipybox"|' dist/claude-code-plugin/.mcp.json \
	    >$(DESTDIR)$(PLUGINDIR)/.mcp.json
	grep -qF '"command": "$(BINDIR)/ipybox"' $(DESTDIR)$(PLUGINDIR)/.mcp.json
	chmod 0644 $(DESTDIR)$(PLUGINDIR)/.mcp.json

# What install wrote, with the same PREFIX, SYSCONFDIR and DESTDIR. The configuration goes
# only when it is still the shipped one (an administrator's edits are kept, as on install);
# ipybox's own directories go when empty, shared ones (bin, man1, ...) stay.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ipybox $(DESTDIR)$(BINDIR)/ipyboxd $(DESTDIR)$(LIBEXECDIR)/ipybox/ipybox-shim \
	    $(DESTDIR)$(LIBEXECDIR)/ipybox/ipybox-monitor \
	    $(DESTDIR)$(UNITDIR)/ipyboxd.service $(DESTDIR)$(MANDIR)/man1/ipybox.1 $(DESTDIR)$(MANDIR)/man8/ipyboxd.8
	rm -f $(DESTDIR)$(PLUGINDIR)/.claude-plugin/plugin.json $(DESTDIR)$(PLUGINDIR)/.mcp.json \
	    $(DESTDIR)$(PLUGINDIR)/skills/code-actions/SKILL.md $(DESTDIR)$(MARKETDIR)/marketplace.json
	# Directories go only when empty: nothing a user put there is removed.
	rmdir $(DESTDIR)$(PLUGINDIR)/skills/code-actions $(DESTDIR)$(PLUGINDIR)/skills \
	    $(DESTDIR)$(PLUGINDIR)/.claude-plugin $(DESTDIR)$(PLUGINDIR) $(DESTDIR)$(MARKETDIR) \
	    $(DESTDIR)$(DATADIR)/ipybox 2>/dev/null || true
	if cmp -s dist/ipyboxd.conf $(DESTDIR)$(SYSCONFDIR)/ipybox/ipyboxd.conf; then \
	    rm -f $(DESTDIR)$(SYSCONFDIR)/ipybox/ipyboxd.conf; \
	elif test -e $(DESTDIR)$(SYSCONFDIR)/ipybox/ipyboxd.conf; then \
	    echo "kept $(DESTDIR)$(SYSCONFDIR)/ipybox/ipyboxd.conf (changed since install)"; fi
	rmdir $(DESTDIR)$(LIBEXECDIR)/ipybox $(DESTDIR)$(SYSCONFDIR)/ipybox 2>/dev/null; true

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/obj $(FUZZ_OBJ) -name '*.d' 2>/dev/null)
