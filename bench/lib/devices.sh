# shellcheck shell=bash
# Emulated devices for the benchmark scripts (sourced by bench/tiered.sh and bench/adoc.sh, not
# run): loop devices over sparse files, throttled by the kernel through cgroup v1's root blkio
# group, with ext4 on some for RocksDB and raw ones for shale; their teardown; fio's figures;
# and a child process run so that a signal to the script reaches it.
#
# Why loop devices throttled through blkio (see ../shared/DESIGN.md, "Benchmarks"): both engines
# then reach the same emulated device through the same block layer, and the kernel's throttle
# (blkio.throttle.{read,write}_{bps,iops}_device) holds direct and buffered I/O alike,
# writeback included. A throttle belongs to a device number, not to the device: it is removed
# before the device is freed, or the next user of that loop device would inherit it.
#
# The caller needs root, sets `work` (a canonical directory under which its backing files
# live; teardown_dir finds its devices by that prefix) and `bg_pid` (empty; run_child sets
# it while a child runs, for the caller's EXIT trap to kill). Messages name the calling script.

BLKIO=/sys/fs/cgroup/blkio
THROTTLE_FILES=(read_bps_device write_bps_device read_iops_device write_iops_device)

# Tears down everything made under work directory $1: for each loop device over a file there,
# its mount, its throttles (before the device is freed), the WAL tails of shale stores on it,
# the device; then the directory. By discovery, so that a `cleanup` after a SIGKILL and the
# EXIT trap are one path.
teardown_dir() {
  local dir=$1 dev file mm f target
  while read -r dev file; do
    case $file in "$dir"/*) ;; *) continue ;; esac
    while read -r target; do
      [ -n "$target" ] || continue
      umount "$target" 2>/dev/null || { sleep 1; umount "$target"; } || umount -l "$target" || true
    done < <(findmnt -nr -S "$dev" -o TARGET 2>/dev/null || true)
    mm=$(cat "/sys/block/${dev#/dev/}/dev" 2>/dev/null || true)
    if [ -n "$mm" ]; then
      for f in "${THROTTLE_FILES[@]}"; do
        if grep -q "^$mm " "$BLKIO/blkio.throttle.$f" 2>/dev/null; then
          echo "$mm 0" >"$BLKIO/blkio.throttle.$f" || echo "${0##*/}: could not remove the $f throttle of $dev" >&2
        fi
      done
    fi
    forget_shale_store "$dev" 2>/dev/null || true
    losetup -d "$dev" || echo "${0##*/}: could not detach $dev" >&2
  done < <(losetup -nl -O NAME,BACK-FILE 2>/dev/null || true)
  rm -rf "$dir"
}

# Removes the WAL tail in /dev/shm of the shale store on device $1, if it holds one: shale
# names it after the volume id (crates/lsm/src/wal/tail.rs) and removes it when the store is
# destroyed, which a discarded device never is. The id is bytes 24..40 of the volume header,
# after the magic "SHALEVOL" (crates/space/src/header.rs).
forget_shale_store() {
  local hex
  hex=$(dd if="$1" bs=4096 count=1 iflag=direct status=none | od -An -tx1 -N40 | tr -d ' \n')
  if [ "${hex:0:16}" = 5348414c45564f4c ]; then
    rm -f "/dev/shm/shale-${hex:48:32}.tail"
  fi
}

# Runs a command in the background and waits for it, so that a signal to the script is taken
# at once (a foreground child would be waited for first) and the EXIT trap can kill it.
# Returns the command's status.
run_child() { # log command...
  local log=$1 rc=0
  shift
  "$@" >"$log" 2>&1 &
  bg_pid=$!
  wait "$bg_pid" || rc=$?
  bg_pid=
  return "$rc"
}

# A loop device (direct I/O on its backing file, so the host's page cache holds nothing twice)
# over the sparse file $work/NAME.img of BYTES; prints the device.
loop_dev() { # name bytes
  # shellcheck disable=SC2154 # the caller's
  truncate -s "$2" "$work/$1.img"
  losetup --direct-io=on --find --show "$work/$1.img"
}

# Throttles a device's reads and writes to BPS bytes/s and IOPS operations/s each; 0 removes
# that limit (the kernel's "MAJ:MIN 0"). A new value replaces the old one.
throttle_device() { # device bps iops
  local mm
  mm=$(cat "/sys/block/${1#/dev/}/dev")
  echo "$mm $2" >"$BLKIO/blkio.throttle.read_bps_device"
  echo "$mm $2" >"$BLKIO/blkio.throttle.write_bps_device"
  echo "$mm $3" >"$BLKIO/blkio.throttle.read_iops_device"
  echo "$mm $3" >"$BLKIO/blkio.throttle.write_iops_device"
}

# ext4 without lazy initialisation, so no background zeroing spends a throttle during a run.
make_ext4() { # device mountpoint
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0,nodiscard "$1"
  mkdir -p "$2"
  mount -o noatime "$1" "$2"
}

# Bytes the kernel counted written to device $1 so far (/sys/block/DEV/stat, field 7: sectors).
device_write_bytes() {
  echo $(($(awk '{print $7}' "/sys/block/${1#/dev/}/stat") * 512))
}

# fio's figure from its terse (v3) output: write bandwidth in bytes/s, or read or write IOPS.
fio_run() { # log fio-args...
  local log=$1
  shift
  fio --output-format=terse --terse-version=3 "$@" >"$log"
}
terse_write_bps() { awk -F';' '{printf "%d", $48 * 1024}' "$1"; }
terse_write_iops() { awk -F';' '{printf "%d", $49}' "$1"; }
terse_read_iops() { awk -F';' '{printf "%d", $8}' "$1"; }
