#!/bin/sh
# Installs rmq-namesrv as a systemd service. Run as root from a built checkout:
#
#   cargo build --release && sudo deploy/install.sh
#   # or: cargo install --path . && sudo BIN_DIR="$HOME/.cargo/bin" deploy/install.sh
#
# Safe to run again (upgrades the binaries and the unit; never overwrites an existing
# /etc/rmq-namesrv/namesrv.conf, the shipped example is put next to it as namesrv.conf.example).
# BIN_DIR: where the built binaries are; default: $CARGO_TARGET_DIR/release or target/release,
# else ${CARGO_HOME:-$HOME/.cargo}/bin (where `cargo install --path .` puts them).
set -eu

repo_dir=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
service_user=rmq
prefix_bin=/usr/local/bin
config_dir=/etc/rmq-namesrv
state_dir=/var/lib/rmq-namesrv
log_dir=/var/log/rmq-namesrv
unit_path=/etc/systemd/system/rmq-namesrv.service

if [ "$(id -u)" -ne 0 ]; then
    echo "install.sh: run as root (sudo $0)" >&2
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

echo "installing binaries from $BIN_DIR to $prefix_bin"
install -d -m 0755 "$prefix_bin"
for binary in rmq-namesrv rmq-admin rmq-bench; do
    if [ -x "$BIN_DIR/$binary" ]; then
        install -m 0755 "$BIN_DIR/$binary" "$prefix_bin/$binary"
    fi
done

# A static system user: files in the state and log dirs keep one owner across reinstalls.
if ! getent group "$service_user" >/dev/null; then
    groupadd --system "$service_user"
fi
if ! getent passwd "$service_user" >/dev/null; then
    nologin=/usr/sbin/nologin
    [ -x "$nologin" ] || nologin=/sbin/nologin
    [ -x "$nologin" ] || nologin=/bin/false
    useradd --system --gid "$service_user" --home-dir "$state_dir" --no-create-home \
        --shell "$nologin" --comment "rmq-namesrv" "$service_user"
fi

# systemd also creates the state and log dirs (StateDirectory/LogsDirectory); creating them
# here lets the binary be tried by hand (sudo -u rmq ...) before the first start.
# Group-writable: UPDATE_NAMESRV_CONFIG rewrites namesrv.conf (temp file + rename + .bak).
install -d -o root -g "$service_user" -m 0770 "$config_dir"
install -d -o "$service_user" -g "$service_user" -m 0750 "$state_dir" "$log_dir"

install -o root -g "$service_user" -m 0640 "$repo_dir/deploy/namesrv.conf" \
    "$config_dir/namesrv.conf.example"
if [ -e "$config_dir/namesrv.conf" ]; then
    echo "keeping existing $config_dir/namesrv.conf (new example: namesrv.conf.example)"
else
    install -o root -g "$service_user" -m 0660 "$repo_dir/deploy/namesrv.conf" \
        "$config_dir/namesrv.conf"
    echo "installed $config_dir/namesrv.conf"
fi

install -m 0644 "$repo_dir/deploy/rmq-namesrv.service" "$unit_path"
echo "installed $unit_path"

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl daemon-reload
    echo "done. Start it with: systemctl enable --now rmq-namesrv"
    echo "      after an upgrade: systemctl restart rmq-namesrv"
else
    echo "done (systemd is not running here; run 'systemctl daemon-reload' on the target)"
fi
