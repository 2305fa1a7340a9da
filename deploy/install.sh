#!/bin/sh
# Installs rmq-namesrv as a systemd service, from a built checkout.
#
#   cargo build --release && sudo deploy/install.sh     # onto this machine (needs root)
#   (with TLS on the server's ports: cargo build --release --features tls, then the same)
#   deploy/install.sh DESTDIR=/tmp/rmq-stage            # stage every file under a directory:
#                                                       # no root, nothing else touched
#   sudo deploy/install.sh PREFIX=/opt/rmq              # binaries in /opt/rmq/bin
#
# Settings, as NAME=value arguments or environment variables:
#   DESTDIR  staging root (packaging, or trying the script out). Files go to $DESTDIR/...;
#            no user is created, nothing is chowned, systemctl is not called, and root is
#            not needed. Empty (the default): install onto this machine, as root.
#   PREFIX   where the binaries go: $PREFIX/bin (default /usr/local). The unit's ExecStart
#            is written to match.
#   BIN_DIR  where the built binaries are; default: $CARGO_TARGET_DIR/release or
#            target/release, else ${CARGO_HOME:-$HOME/.cargo}/bin (`cargo install --path .`).
#
# Safe to run again: upgrades the binaries and the unit, never overwrites an existing
# namesrv.conf (the shipped example is put next to it as namesrv.conf.example).
# Config, state, log and unit paths are the ones the unit names: /etc/rmq-namesrv,
# /var/lib/rmq-namesrv, /var/log/rmq-namesrv, /etc/systemd/system (under DESTDIR if set).
set -eu

usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//'
}

for arg in "$@"; do
    case $arg in
        DESTDIR=*) DESTDIR=${arg#DESTDIR=} ;;
        PREFIX=*) PREFIX=${arg#PREFIX=} ;;
        BIN_DIR=*) BIN_DIR=${arg#BIN_DIR=} ;;
        -h | --help) usage; exit 0 ;;
        *)
            echo "install.sh: unknown argument '$arg' (DESTDIR=, PREFIX=, BIN_DIR= or --help)" >&2
            exit 2
            ;;
    esac
done

repo_dir=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
service_user=rmq
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
[ "$DESTDIR" = / ] && DESTDIR=

# PREFIX ends up in the unit (sed replacement) and in paths: keep it plain and absolute.
case $PREFIX in
    /*) ;;
    *) echo "install.sh: PREFIX must be an absolute path, not '$PREFIX'" >&2; exit 2 ;;
esac
case $PREFIX in
    *[!A-Za-z0-9/._-]*)
        echo "install.sh: PREFIX may hold only letters, digits and / . _ - (got '$PREFIX')" >&2
        exit 2
        ;;
esac
PREFIX=${PREFIX%/} # "/" becomes "": binaries in /bin

bin_dir=$DESTDIR$PREFIX/bin
config_dir=$DESTDIR/etc/rmq-namesrv
state_dir=$DESTDIR/var/lib/rmq-namesrv
log_dir=$DESTDIR/var/log/rmq-namesrv
unit_dir=$DESTDIR/etc/systemd/system

# Root is needed only to install onto this machine (system paths, a system user, chown).
if [ -z "$DESTDIR" ] && [ "$(id -u)" -ne 0 ]; then
    echo "install.sh: installing onto this machine ($PREFIX/bin, /etc/rmq-namesrv," \
        "/etc/systemd/system, system user $service_user) needs root: run it with sudo," \
        "or stage the files without root: $0 DESTDIR=/tmp/rmq-stage" >&2
    exit 1
fi

# Where the built binaries are.
if [ -z "${BIN_DIR:-}" ]; then
    for candidate in "${CARGO_TARGET_DIR:-$repo_dir/target}/release" \
                     "${CARGO_HOME:-$HOME/.cargo}/bin"; do
        if [ -x "$candidate/rmq-namesrv" ]; then
            BIN_DIR=$candidate
            break
        fi
    done
fi
if [ -z "${BIN_DIR:-}" ] || [ ! -x "$BIN_DIR/rmq-namesrv" ]; then
    echo "install.sh: no rmq-namesrv binary found; run 'cargo build --release' or set BIN_DIR" >&2
    exit 1
fi

# Ownership only on this machine: a staged tree is owned by whoever stages it.
owner() {
    if [ -z "$DESTDIR" ]; then
        echo "-o $1 -g $2"
    fi
}

echo "installing binaries from $BIN_DIR to $bin_dir"
install -d -m 0755 "$bin_dir"
for binary in rmq-namesrv rmq-admin rmq-bench; do
    if [ -x "$BIN_DIR/$binary" ]; then
        install -m 0755 "$BIN_DIR/$binary" "$bin_dir/$binary"
    fi
done

# A static system user: files in the state and log dirs keep one owner across reinstalls.
if [ -z "$DESTDIR" ]; then
    if ! getent group "$service_user" >/dev/null; then
        groupadd --system "$service_user"
    fi
    if ! getent passwd "$service_user" >/dev/null; then
        nologin=/usr/sbin/nologin
        [ -x "$nologin" ] || nologin=/sbin/nologin
        [ -x "$nologin" ] || nologin=/bin/false
        useradd --system --gid "$service_user" --home-dir /var/lib/rmq-namesrv \
            --no-create-home --shell "$nologin" --comment "rmq-namesrv" "$service_user"
    fi
fi

# systemd also creates the state and log dirs (StateDirectory/LogsDirectory); creating them
# here lets the binary be tried by hand (sudo -u rmq ...) before the first start.
# Group-writable: UPDATE_NAMESRV_CONFIG rewrites namesrv.conf (temp file + rename + .bak).
# shellcheck disable=SC2046 # owner prints options meant to be split
install -d $(owner root "$service_user") -m 0770 "$config_dir"
# shellcheck disable=SC2046
install -d $(owner "$service_user" "$service_user") -m 0750 "$state_dir" "$log_dir"

# shellcheck disable=SC2046
install $(owner root "$service_user") -m 0640 "$repo_dir/deploy/namesrv.conf" \
    "$config_dir/namesrv.conf.example"
if [ -e "$config_dir/namesrv.conf" ]; then
    echo "keeping existing $config_dir/namesrv.conf (new example: namesrv.conf.example)"
else
    # shellcheck disable=SC2046
    install $(owner root "$service_user") -m 0660 "$repo_dir/deploy/namesrv.conf" \
        "$config_dir/namesrv.conf"
    echo "installed $config_dir/namesrv.conf"
fi

# The unit names the binary by its path: follow PREFIX.
install -d -m 0755 "$unit_dir"
sed "s#/usr/local/bin/rmq-namesrv#$PREFIX/bin/rmq-namesrv#g" \
    "$repo_dir/deploy/rmq-namesrv.service" >"$unit_dir/rmq-namesrv.service.tmp"
chmod 0644 "$unit_dir/rmq-namesrv.service.tmp"
mv "$unit_dir/rmq-namesrv.service.tmp" "$unit_dir/rmq-namesrv.service"
echo "installed $unit_dir/rmq-namesrv.service"

if [ -n "$DESTDIR" ]; then
    echo "done: staged under $DESTDIR. On the target, as root: create the system user" \
        "'$service_user', chown root:$service_user /etc/rmq-namesrv and its files," \
        "$service_user:$service_user /var/lib/rmq-namesrv /var/log/rmq-namesrv," \
        "then systemctl daemon-reload"
elif [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl daemon-reload
    echo "done. Start it with: systemctl enable --now rmq-namesrv"
    echo "      after an upgrade: systemctl restart rmq-namesrv"
    echo "      after editing namesrv.conf: systemctl reload rmq-namesrv ([live] keys)"
else
    echo "done (systemd is not running here; run 'systemctl daemon-reload' on the target)"
fi
