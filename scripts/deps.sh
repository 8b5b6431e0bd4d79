#!/usr/bin/env bash
# Installs the Debian packages given as arguments when their commands are
# missing. Used by `make test` and `make demo`, so a fresh VM needs nothing else.
set -euo pipefail
declare -A cmd_of=([iproute2]=ip [ethtool]=ethtool [tcpdump]=tcpdump [tcpreplay]=tcpreplay
	[netsniff-ng]=trafgen [iperf3]=iperf3 [bpftool]=bpftool [tshark]=tshark)
missing=()
for pkg in "$@"; do
	c=${cmd_of[$pkg]:-$pkg}
	command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: missing ${missing[*]}; install them (apt-get install -y ${missing[*]}) or the privileged tests will skip, saying why" >&2
	exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
	apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
}
