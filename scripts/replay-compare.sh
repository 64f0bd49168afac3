#!/usr/bin/env bash
# Replays every scenario in scenarios/ and scenarios/examples/ with the debug binaries and
# compares the result with a baseline made the same way (before a change):
#   json (with the exit status as its last line), table, stderr, and for the services that plot,
#   the SVG byte for byte and the PNG pixel for pixel (PNG bytes may differ with the encoder).
#
#   scripts/replay-compare.sh record DIR   # write a baseline into DIR
#   scripts/replay-compare.sh check DIR    # replay again into a temporary dir and diff with DIR
#
# Build first: cargo build -p plimsoll-hpa-plus -p plimsoll-cron-hpa -p plimsoll-vpa-updater
#              -p plimsoll-vpa-recommender --bins
# Exit status 0 when everything is identical.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:?usage: $0 record|check DIR}
baseline=${2:?usage: $0 record|check DIR}

replay_all() {
  local out=$1
  mkdir -p "$out/plots"
  for f in scenarios/*.yaml scenarios/examples/*.yaml; do
    local name b
    name=$(basename "$f")
    case $name in
      cron-*) b=cron-hpa ;;
      hpa*) b=hpa-plus ;;
      vpa-updater*) b=vpa-updater ;;
      vpa-recommender*) b=vpa-recommender ;;
      *) echo "no service for $f" >&2; return 1 ;;
    esac
    local status=0
    ./target/debug/$b replay "$f" --output json >"$out/$name.json" 2>"$out/$name.err" || status=$?
    echo "$status" >>"$out/$name.json"
    ./target/debug/$b replay "$f" --output table >"$out/$name.table" 2>&1 || true
    case $b in
      hpa-plus | vpa-recommender)
        ./target/debug/$b replay "$f" --plot "$out/plots/$name.svg" >/dev/null 2>&1 || true
        ./target/debug/$b replay "$f" --plot "$out/plots/$name.png" >/dev/null 2>&1 || true
        ;;
    esac
  done
}

# Prints the width, height, colour type and raw pixel rows of a PNG (every filter undone), so
# two encoders' files compare by what they show.
png_pixels() {
  python3 - "$1" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, head = 8, b"", None
while pos < len(data):
    (length,) = struct.unpack(">I", data[pos:pos + 4])
    kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        head = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
width, height, depth, colour = head[:4]
assert (depth, colour) == (8, 2), "8-bit RGB expected"
raw, stride, bpp = zlib.decompress(idat), width * 3, 3
rows, prev = [], bytearray(stride)
for y in range(height):
    line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
    kind, row = line[0], bytearray(line[1:])
    for i in range(stride):
        a = row[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if kind == 1: row[i] = (row[i] + a) & 255
        elif kind == 2: row[i] = (row[i] + b) & 255
        elif kind == 3: row[i] = (row[i] + (a + b) // 2) & 255
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(row))
    prev = row
sys.stdout.write(f"{width}x{height}\n")
for r in rows:
    sys.stdout.write(r.hex() + "\n")
PY
}

case $mode in
  record)
    replay_all "$baseline"
    echo "baseline written to $baseline"
    ;;
  check)
    now=$(mktemp -d)
    trap 'rm -rf "$now"' EXIT
    replay_all "$now"
    failed=0
    # json (+ exit status), table and stderr: byte for byte, for every scenario the baseline has.
    # Scenarios added since the baseline have nothing to compare with; they are listed.
    for old in "$baseline"/*.json "$baseline"/*.table "$baseline"/*.err; do
      cmp -s "$old" "$now/$(basename "$old")" || { echo "differs: $(basename "$old")"; failed=1; }
    done
    for new in "$now"/*.json; do
      [ -e "$baseline/$(basename "$new")" ] || echo "new since the baseline: $(basename "$new" .json)"
    done
    if [ -d "$baseline/plots" ]; then
      for old in "$baseline"/plots/*; do
        new="$now/plots/$(basename "$old")"
        case $old in
          *.svg) cmp -s "$old" "$new" || { echo "SVG differs: $(basename "$old")"; failed=1; } ;;
          *.png)
            if ! cmp -s <(png_pixels "$old") <(png_pixels "$new"); then
              echo "PNG pixels differ: $(basename "$old")"; failed=1
            fi ;;
        esac
      done
      echo "plots compared: $(ls "$baseline"/plots | wc -l)"
    fi
    if [ "$failed" = 0 ]; then
      echo "identical: $(ls "$baseline" | grep -c '\.json$') scenarios (json, exit status, table, stderr)"
    fi
    exit "$failed"
    ;;
  *)
    echo "usage: $0 record|check DIR" >&2
    exit 2
    ;;
esac
