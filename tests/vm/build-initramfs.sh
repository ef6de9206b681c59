#!/usr/bin/env bash
# Builds the test guests' initramfs: busybox-static, the virtio-net modules of
# the Debian cloud kernel, and tests/vm/init as /init.
#
#   tests/vm/build-initramfs.sh OUT_DIR
#
# Writes OUT_DIR/initramfs.gz and OUT_DIR/kernel (a symlink to the kernel it
# matches). Rebuilds only when the output is missing or the init script, this
# script, busybox or the kernel changed (OUT_DIR/initramfs.stamp).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: build-initramfs.sh OUT_DIR}
mkdir -p "$out"

kernel=$(find /boot -maxdepth 1 -name 'vmlinuz-*-cloud-amd64' | sort -V | tail -n 1)
if [ -z "$kernel" ]; then
    echo "build-initramfs: no /boot/vmlinuz-*-cloud-amd64: apt-get install linux-image-cloud-amd64" >&2
    exit 1
fi
kver=${kernel#/boot/vmlinuz-}
busybox=/bin/busybox
if [ ! -x "$busybox" ] || [[ "$(ldd "$busybox" 2>&1 || true)" != *"not a dynamic"* ]]; then
    echo "build-initramfs: $busybox is not static: apt-get install busybox-static" >&2
    exit 1
fi

stamp=$( { cat "$here/init" "${BASH_SOURCE[0]}"; echo "$kver"; sha256sum "$busybox"; } | sha256sum | cut -d' ' -f1)
if [ -f "$out/initramfs.gz" ] && [ "$(cat "$out/initramfs.stamp" 2>/dev/null)" = "$stamp" ]; then
    ln -sfn "$kernel" "$out/kernel"
    exit 0
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,dev,proc,sys,tmp,lib/modules}
cp "$busybox" "$root/bin/busybox"
cp "$here/init" "$root/init"
chmod 755 "$root/init"
mods=/lib/modules/$kver/kernel
for m in drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev \
         drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci net/core/failover \
         drivers/net/net_failover drivers/net/virtio_net; do
    cp "$mods/$m.ko" "$root/lib/modules/"
done
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out/initramfs.gz.tmp"
mv "$out/initramfs.gz.tmp" "$out/initramfs.gz"
echo "$stamp" > "$out/initramfs.stamp"
ln -sfn "$kernel" "$out/kernel"
echo "build-initramfs: built $out/initramfs.gz ($(du -k "$out/initramfs.gz" | cut -f1) KiB) for $kver" >&2
