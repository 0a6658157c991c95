#!/usr/bin/env bash
# scripts/gpu-carry.sh: packs what the GPU machine lacks for scripts/gpu-check.sh into
# .carry/rung-carry.tgz (git-ignored; name `.carry` in the device tool's carry list): rung's binaries
# built here, PostgreSQL's server programs, share and module files (Debian's layout under pg/, so its
# relative paths hold), and every shared library they link except glibc's own, with RUNPATHs set by
# patchelf so nothing needs LD_LIBRARY_PATH (the worker's trainer child, CUDA PyTorch, must not load
# these). Staged in .carry-build/. Owns those two folders only. Fails when the archive passes 48 MiB.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=.carry-build
PACK=.carry/rung-carry.tgz
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$PGBIN" ] || { echo "gpu-carry: no PostgreSQL server here (apt-get install postgresql)" >&2; exit 1; }
PGVER=$(basename "$(dirname "$PGBIN")")
for b in bin/rungd bin/rung-worker bin/rungctl bin/sim/nvidia-smi bin/sim/rung-sim-trainer; do
	[ -x "$b" ] || { echo "gpu-carry: $b is missing: run make first" >&2; exit 1; }
done
if ! command -v patchelf >/dev/null; then
	echo "gpu-carry: installing patchelf"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends patchelf >/dev/null
fi

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/pg/usr/lib/postgresql/$PGVER/bin" "$OUT/pg/usr/lib/postgresql/$PGVER/lib" \
	"$OUT/pg/usr/share/postgresql" "$OUT/zoneinfo/Etc"
cp bin/rungd bin/rung-worker bin/rungctl "$OUT/bin/"
cp bin/sim/nvidia-smi bin/sim/rung-sim-trainer "$OUT/bin/"
strip --strip-debug "$OUT"/bin/*
for p in postgres initdb pg_ctl createdb pg_isready; do
	cp "$PGBIN/$p" "$OUT/pg/usr/lib/postgresql/$PGVER/bin/"
done
for m in plpgsql.so dict_snowball.so; do
	cp "/usr/lib/postgresql/$PGVER/lib/$m" "$OUT/pg/usr/lib/postgresql/$PGVER/lib/"
done
cp -r "/usr/share/postgresql/$PGVER" "$OUT/pg/usr/share/postgresql/"
rm -rf "$OUT/pg/usr/share/postgresql/$PGVER/man" "$OUT/pg/usr/share/postgresql/$PGVER/contrib"
# Debian's server reads the system's tzdata; the GPU machine may have none: UTC is enough.
cp /usr/share/zoneinfo/UTC "$OUT/zoneinfo/UTC"
cp /usr/share/zoneinfo/Etc/UTC "$OUT/zoneinfo/Etc/UTC"

# glibc's own libraries stay the GPU machine's (its loader must match them).
is_glibc() {
	case "$1" in
	libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*.so.* | libresolv.so.* | \
		libutil.so.* | libnss_*.so.* | libanl.so.* | libmvec.so.* | libBrokenLocale.so.*) return 0 ;;
	esac
	return 1
}
elfs=("$OUT"/bin/* "$OUT"/pg/usr/lib/postgresql/"$PGVER"/bin/* "$OUT"/pg/usr/lib/postgresql/"$PGVER"/lib/*.so)
for f in "${elfs[@]}"; do
	ldd "$f" | awk '/=> \// { print $1, $3 }' | while read -r name path; do
		is_glibc "$name" && continue
		[ -e "$OUT/lib/$name" ] || cp -L "$path" "$OUT/lib/$name"
	done
done
chmod u+w "$OUT"/lib/* "$OUT"/bin/* "$OUT"/pg/usr/lib/postgresql/"$PGVER"/bin/* "$OUT"/pg/usr/lib/postgresql/"$PGVER"/lib/*
for f in "$OUT"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$OUT"/pg/usr/lib/postgresql/"$PGVER"/bin/* "$OUT"/pg/usr/lib/postgresql/"$PGVER"/lib/*.so; do
	patchelf --set-rpath '$ORIGIN/../../../../../../lib' "$f"
done
for f in "$OUT"/lib/*; do patchelf --set-rpath '$ORIGIN' "$f"; done

# What they were built against, for gpu-check.sh's first look on the GPU machine.
{
	echo "built_on=$(. /etc/os-release && echo "$PRETTY_NAME")"
	echo "glibc=$(ldd --version | head -n 1 | awk '{ print $NF }')"
	echo "postgres=$PGVER"
	echo "rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$OUT/CARRY.txt"

rm -rf .carry
mkdir -p .carry
tar -C "$OUT" -czf "$PACK" .
kib=$(du -sk "$PACK" | cut -f1)
echo "gpu-carry: $PACK: $((kib / 1024)) MiB packed, $(($(du -sk "$OUT" | cut -f1) / 1024)) MiB unpacked," \
	"$(ls "$OUT/lib" | wc -l) libraries; $(tr '\n' ' ' <"$OUT/CARRY.txt")"
if [ "$kib" -gt $((48 * 1024)) ]; then
	echo "gpu-carry: over 48 MiB: the device tool carries 64 MiB with the working tree" >&2
	exit 1
fi
