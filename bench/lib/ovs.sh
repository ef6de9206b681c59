# shellcheck shell=bash
# bench/lib/ovs.sh - an Open vSwitch with DPDK of our own (OVS 3.1, Debian's
# openvswitch-switch-dpdk): hugepages, an ovsdb-server and an
# ovs-vswitchd-dpdk in a directory of our own, the userspace bridge br0, and
# putting all of it back. The one home of how this project starts and stops
# OVS-DPDK: bench/peers/ovs-dpdk.sh (the benchmark peer) and tests/vm/lib.sh
# (RS_VM_BACKEND=ovs) source it; what each adds (ports, flows, PMD
# settings) stays with them.
# Sourced, not run; needs nothing else. Needs root.
#
# Errors: a function that fails returns 1 and leaves one sentence in
# OVS_ERROR; the caller reports it its own way (ovs_log_tail shows the end
# of ovs-vswitchd's log).
# shellcheck disable=SC2034 # OVS_ERROR and the OVS_* state are read by the callers

OVS_VSWITCHD=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
# A command both daemons run under (ovs_start), e.g. (timeout -k 5 400) so
# that they end even if their caller is killed; empty: run them directly.
OVS_WRAP=()
# Seconds ovs_start waits for each daemon.
OVS_START_TIMEOUT=${OVS_START_TIMEOUT:-30}
OVS_ERROR=
OVS_DIR=          # ovs_start's directory: database, sockets, pid files, logs
OVS_OVSDB_JOB=    # the background job of each daemon (its wrapper's pid
OVS_VSWITCHD_JOB= # with OVS_WRAP, else the daemon's own): what ovs_stop stops
OVS_VSWITCHD_PID= # ovs-vswitchd-dpdk itself (its control socket, /proc)
OVS_HP_ORIG=      # vm.nr_hugepages before ovs_hugepages raised it
OVS_HP_MOUNT=     # the hugetlbfs mount point ovs_hugepages created
OVS_DPDK_PREFIX=  # DPDK's --file-prefix: /var/run/dpdk/PREFIX (its telemetry
                  # socket) is this instance's alone, and ovs_stop removes it

# ovs_hugepages DIR: at least 300 free 2 MiB hugepages (dpdk-socket-mem=512,
# see ovs_start, takes 256) and a hugetlbfs mount. OVS always runs DPDK with
# --in-memory, which DPDK refuses with --no-huge. Raises vm.nr_hugepages if
# fewer are free (OVS_HP_ORIG: the value before) and mounts hugetlbfs on
# DIR/huge if none is mounted (OVS_HP_MOUNT); ovs_hugepages_restore puts
# both back.
ovs_hugepages() {
	local dir=$1 free want
	free=$(awk '$1 == "HugePages_Free:" { print $2 }' /proc/meminfo)
	if ((${free:-0} < 300)); then
		[[ -n $OVS_HP_ORIG ]] || OVS_HP_ORIG=$(cat /proc/sys/vm/nr_hugepages)
		want=$(($(cat /proc/sys/vm/nr_hugepages) + 300 - ${free:-0}))
		if ! echo "$want" >/proc/sys/vm/nr_hugepages 2>/dev/null; then
			OVS_ERROR="cannot raise vm.nr_hugepages to $want (needs root)"
			return 1
		fi
		free=$(awk '$1 == "HugePages_Free:" { print $2 }' /proc/meminfo)
		if ((${free:-0} < 256)); then
			OVS_ERROR="only ${free:-0} free 2 MiB hugepages after raising vm.nr_hugepages to $want (too little free memory)"
			return 1
		fi
	fi
	if ! awk '$3 == "hugetlbfs" { f = 1 } END { exit !f }' /proc/mounts; then
		mkdir -p "$dir/huge"
		if ! mount -t hugetlbfs nodev "$dir/huge"; then
			OVS_ERROR="cannot mount hugetlbfs on $dir/huge"
			return 1
		fi
		OVS_HP_MOUNT=$dir/huge
	fi
}

# ovs_hugepages_restore: undo ovs_hugepages (after ovs_stop: pages in use
# are not given back); warnings on stderr. Safe to call more than once.
ovs_hugepages_restore() {
	if [[ -n $OVS_HP_MOUNT ]]; then
		umount "$OVS_HP_MOUNT" 2>/dev/null || echo "warning: could not unmount $OVS_HP_MOUNT" >&2
		rmdir "$OVS_HP_MOUNT" 2>/dev/null || true
		OVS_HP_MOUNT=
	fi
	if [[ -n $OVS_HP_ORIG ]]; then
		echo "$OVS_HP_ORIG" >/proc/sys/vm/nr_hugepages 2>/dev/null ||
			echo "warning: could not put vm.nr_hugepages back to $OVS_HP_ORIG" >&2
		OVS_HP_ORIG=
	fi
}

ovs_vsctl() { ovs-vsctl --timeout=20 "--db=unix:$OVS_DIR/db.sock" "$@"; }
ovs_appctl() { ovs-appctl --timeout=20 -t "$OVS_DIR/ovs-vswitchd-dpdk.$OVS_VSWITCHD_PID.ctl" "$@"; }
# ovs_ofctl COMMAND ARGS...: on bridge br0.
ovs_ofctl() { ovs-ofctl --timeout=20 "$1" "unix:$OVS_DIR/br0.mgmt" "${@:2}"; }

# ovs_log_tail N: the last N lines of ovs-vswitchd's log, cut to 220 columns.
ovs_log_tail() { tail -n "$1" "$OVS_DIR/vswitchd.log" 2>/dev/null | cut -c1-220; }

# ovs_version: OVS's version (e.g. 3.1.0), and DPDK's after a space once
# ovs-vswitchd runs (e.g. "3.1.0 22.11.4").
ovs_version() {
	local v d
	v=$("$OVS_VSWITCHD" --version 2>/dev/null | awk 'NR == 1 { print $NF }')
	d=$(ovs_vsctl get Open_vSwitch . dpdk_version 2>/dev/null | tr -d '"' | awk '{ print $NF }') || true
	echo "${v:-unknown}${d:+ $d}"
}

# ovs_until WHAT SECS COMMAND...: until COMMAND succeeds (0); 2 from it
# means it will never succeed (its OVS_ERROR says why).
ovs_until() {
	local what=$1 deadline=$((SECONDS + $2)) rc
	shift 2
	while :; do
		rc=0
		"$@" || rc=$?
		((rc == 0)) && return 0
		((rc == 2)) && return 1
		if ((SECONDS >= deadline)); then
			OVS_ERROR="$what not ready after ${OVS_START_TIMEOUT}s"
			return 1
		fi
		sleep 0.1
	done
}

ovs_ovsdb_up() {
	if ! kill -0 "$OVS_OVSDB_JOB" 2>/dev/null; then
		OVS_ERROR="ovsdb-server exited during start-up ($(tail -n 3 "$OVS_DIR/ovsdb.log" 2>/dev/null | tr '\n' ' '))"
		return 2
	fi
	[[ -S $OVS_DIR/db.sock ]]
}

ovs_vswitchd_up() {
	if ! kill -0 "$OVS_VSWITCHD_JOB" 2>/dev/null; then
		OVS_ERROR="ovs-vswitchd-dpdk exited during start-up ($(tail -n 3 "$OVS_DIR/vswitchd.out" 2>/dev/null | tr '\n' ' '))"
		return 2
	fi
	[[ -n $OVS_VSWITCHD_PID ]] || OVS_VSWITCHD_PID=$(cat "$OVS_DIR/vswitchd.pid" 2>/dev/null) || return 1
	grep -q 'DPDK Enabled - initialized' "$OVS_DIR/vswitchd.log" 2>/dev/null &&
		[[ -S $OVS_DIR/ovs-vswitchd-dpdk.$OVS_VSWITCHD_PID.ctl ]]
}

# ovs_start DIR PMD_CPU [KEY=VALUE...]: ovsdb-server and ovs-vswitchd-dpdk
# with their database, sockets and logs (ovsdb.log, vswitchd.log) in DIR
# (after ovs_hugepages), both as background jobs of the calling shell under
# OVS_WRAP; DPDK with 512 MiB of hugepages, no PCI devices, a file prefix of
# its own, its main lcore on CPU 0, one PMD thread on PMD_CPU; more Open_vSwitch other_config
# settings as KEY=VALUE (e.g. pmd-maxsleep=500). Then the bridge br0 with
# the userspace datapath (datapath_type=netdev), no ports, its default flow
# (NORMAL: a learning switch).
ovs_start() {
	local dir=$1 pmd_cpu=$2 kv cfg=()
	shift 2
	OVS_DIR=$dir
	OVS_VSWITCHD_PID=
	OVS_DPDK_PREFIX=rs-ovs-$BASHPID
	for kv in "$@"; do cfg+=("other_config:$kv"); done
	if [[ ! -x $OVS_VSWITCHD ]]; then
		OVS_ERROR="no $OVS_VSWITCHD (apt-get install openvswitch-switch-dpdk)"
		return 1
	fi
	# ovs-vsctl and ovs-appctl find the daemons here too.
	export OVS_RUNDIR=$dir OVS_LOGDIR=$dir OVS_DBDIR=$dir
	if ! ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema >"$dir/ovsdb-tool.out" 2>&1; then
		OVS_ERROR="ovsdb-tool create $dir/conf.db failed: $(head -n 2 "$dir/ovsdb-tool.out" | tr '\n' ' ')"
		return 1
	fi
	# Not --detach: both stay jobs of the caller's shell, in its process
	# group (or their wrapper's).
	"${OVS_WRAP[@]}" ovsdb-server "--remote=punix:$dir/db.sock" "--pidfile=$dir/ovsdb.pid" -vconsole:off \
		"--log-file=$dir/ovsdb.log" "$dir/conf.db" </dev/null >"$dir/ovsdb.out" 2>&1 &
	OVS_OVSDB_JOB=$!
	ovs_until "ovsdb-server (its socket $dir/db.sock)" "$OVS_START_TIMEOUT" ovs_ovsdb_up || return 1
	if ! ovs_vsctl --no-wait init ||
		! ovs_vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
			other_config:dpdk-extra="--no-pci --file-prefix=$OVS_DPDK_PREFIX" other_config:dpdk-socket-mem=512 \
			other_config:dpdk-socket-limit=512 \
			other_config:pmd-cpu-mask="$(printf '0x%x' $((1 << pmd_cpu)))" \
			other_config:dpdk-lcore-mask=0x1 "${cfg[@]}"; then
		OVS_ERROR="ovs-vsctl could not configure the database"
		return 1
	fi
	"${OVS_WRAP[@]}" "$OVS_VSWITCHD" "unix:$dir/db.sock" "--pidfile=$dir/vswitchd.pid" -vconsole:off \
		"--log-file=$dir/vswitchd.log" </dev/null >"$dir/vswitchd.out" 2>&1 &
	OVS_VSWITCHD_JOB=$!
	ovs_until "ovs-vswitchd-dpdk (DPDK initialised, control socket)" "$OVS_START_TIMEOUT" ovs_vswitchd_up || return 1
	if ! ovs_vsctl add-br br0 -- set bridge br0 datapath_type=netdev; then
		OVS_ERROR="ovs-vsctl add-br br0 (datapath_type=netdev) failed"
		return 1
	fi
}

# ovs_stop_job PID: SIGTERM to a background job, SIGKILL (to its process
# group if it leads one, as timeout(1) does) if it is still there after 10 s.
ovs_stop_job() {
	local job=$1 deadline=$((SECONDS + 10))
	kill -TERM "$job" 2>/dev/null || true
	while kill -0 "$job" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
	if kill -0 "$job" 2>/dev/null; then
		echo "warning: pid $job ignored SIGTERM for 10 s, sending SIGKILL" >&2
		kill -KILL -- "-$job" 2>/dev/null || kill -KILL "$job" 2>/dev/null || true
	fi
	wait "$job" 2>/dev/null || true
}

# ovs_stop: ovs-vswitchd-dpdk, then ovsdb-server (its database goes with
# DIR, which is the caller's). Safe to call more than once.
ovs_stop() {
	[[ -n $OVS_VSWITCHD_JOB ]] && ovs_stop_job "$OVS_VSWITCHD_JOB"
	[[ -n $OVS_OVSDB_JOB ]] && ovs_stop_job "$OVS_OVSDB_JOB"
	OVS_VSWITCHD_JOB=''
	OVS_OVSDB_JOB=''
	[[ -z $OVS_DPDK_PREFIX ]] || rm -rf -- "/var/run/dpdk/$OVS_DPDK_PREFIX"
	OVS_DPDK_PREFIX=''
}
