#!/bin/sh
# setup.sh - prepares a Debian 12 machine to build execserver and builds it.
#
# Installs the build dependencies with apt-get where they are missing (as
# root, or through sudo), bootstraps autotools and builds in ./build (after
# `make distclean` of a build configured in the tree itself, which would
# stop configure there).  Run by demo.sh and test.sh; safe to run again.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)

# Debian packages: build tools, libraries, and what the tests and the demo
# use (curl, procps for pgrep, valgrind for the memcheck pass, openssl to
# make the TLS tests' certificates, clang with libFuzzer for the fuzz pass,
# clang-format for make check-style, haproxy as the load balancer of the
# multi-instance tests, iproute2 for the network namespaces of the
# pipe-address test and of the test bed of hosts, nftables for the bed's
# lossy links, systemd for systemd-analyze, which checks the installed
# unit, spin for the model check of model/), what `make bench` needs (the
# gearmand peer and its library, gnuplot for the plots, util-linux for lscpu,
# linux-perf where the kernel allows it), and execdispatch's: libpq to build it, PostgreSQL and
# PgBouncer for its tests.
PACKAGES="build-essential autoconf automake libtool pkg-config
libevent-dev libjson-c-dev libcurl4-openssl-dev libcunit1-dev libyaml-dev
libssl-dev libwslay-dev libhttp-parser-dev
curl procps valgrind openssl clang libclang-rt-14-dev clang-format haproxy iproute2 nftables systemd spin
gearman-job-server libgearman-dev gnuplot-nox util-linux linux-perf
libpq-dev postgresql postgresql-contrib pgbouncer"
# python3-prometheus-client: the parsers (Prometheus text and OpenMetrics)
# that test_metrics feeds both daemons' /metrics to; 200 KB, where the
# prometheus package's promtool would bring 96 MB and a server
PACKAGES="$PACKAGES python3-prometheus-client"
# chromium, chromium-driver and python3-selenium: the consoles' browser
# tests (tests/browser/, headless) and scripts/screenshots.sh
PACKAGES="$PACKAGES chromium chromium-driver python3-selenium"

missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "setup: installing$missing"
	if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
	$SUDO apt-get update -q
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $missing
fi

cd "$top"
# A build configured in the tree itself (the README's Install: ./configure;
# make install) makes autoconf refuse every other build directory ("source
# directory already configured"), and its objects would be found through
# VPATH.  What it installed stays installed; its build products go.
if [ -f config.status ]; then
	echo "setup: the tree holds an in-tree build (config.status): make distclean there first"
	if [ ! -f Makefile ] || ! make distclean > /dev/null; then
		echo "setup: make distclean failed in $top: remove the in-tree build by hand" >&2
		exit 1
	fi
fi
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
	autoreconf -fi
fi
mkdir -p build
cd build
if [ ! -f Makefile ] || [ ../configure -nt config.status ]; then
	../configure ${CONFIGURE_FLAGS:-}
fi
make -j"$(nproc)"
