#!/usr/bin/env bash
# End-to-end test of `trnsim quantize`: usage quantize.sh <trnsim-binary> <source-dir>.
# Runs every rule/axis/layout on the shipped example, checks hand-computed bytes on tiny inputs, and checks
# that every kind of bad input fails with its message, a non-zero exit and no output file left behind.
set -euo pipefail

TRNSIM=$1
SRC=$2
EXAMPLE=$SRC/examples/activations_bf16_256x1024.npy
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
OUT=$T/out
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() {
  failed=$((failed + 1))
  echo "FAIL: $*" >&2
}

# hex of COUNT bytes of FILE at OFFSET, e.g. "7870f8"
bytes() { od -An -v -tx1 -j "$2" -N "$3" "$1" | tr -d ' \n'; }

# npy PATH DESCR SHAPE FORTRAN DATA_PRINTF: a version 1.0 file, header padded to 64 bytes as NumPy does.
npy() {
  local dict="{'descr': '$2', 'fortran_order': $4, 'shape': $3, }"
  local pad=$(((64 - (10 + ${#dict} + 1) % 64) % 64))
  local hlen=$((${#dict} + pad + 1))
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
    printf '%s%*s\n' "$dict" "$pad" ''
    printf "$5"
  } >"$1"
}

# zeros N: printf escapes for N zero bytes
zeros() { printf '\\x00%.0s' $(seq 1 "$1"); }

fresh_out() {
  rm -rf "$OUT"
  mkdir -p "$OUT"
}

# expect_file NAME PATH DESCR SHAPE SIZE: header fields and total size of an output .npy
expect_file() {
  local name=$1 path=$2 descr=$3 shape=$4 size=$5
  if [[ ! -f $path ]]; then
    bad "$name: $path missing"
    return
  fi
  local head
  head=$(head -c 128 "$path" | tr -d '\0')
  if [[ $(bytes "$path" 0 8) == 934e554d50590100 && $head == *"'descr': '$descr'"* &&
    $head == *"'shape': $shape,"* && $(stat -c %s "$path") == "$size" ]]; then
    ok
  else
    bad "$name: $path: header or size (want $descr $shape $size bytes, got $(stat -c %s "$path"): $head)"
  fi
}

# expect_bytes NAME FILE OFFSET HEX
expect_bytes() {
  local got
  got=$(bytes "$2" "$3" $((${#4} / 2)))
  if [[ $got == "$4" ]]; then ok; else bad "$1: bytes at $3 of $2: want $4, got $got"; fi
}

# --- every rule x axis x layout on the shipped example (256 x 1024 BF16) -------------------------------
for rule in trn3 ocp te; do
  for axis in row col; do
    for layout in compact swizzled; do
      name="example $rule $axis $layout"
      fresh_out
      if ! line=$("$TRNSIM" quantize "$EXAMPLE" --format e4m3 --rule $rule --axis $axis --scale-layout $layout \
        --data "$OUT/d.npy" --scales "$OUT/s.npy" --dequant "$OUT/q.npy" --threads 2); then
        bad "$name: exit code"
        continue
      fi
      re="^quantize: shape \(256, 1024\) bf16 -> e4m3 rule=$rule axis=$axis layout=$layout threads=2: "
      re+="[0-9.]+ ms, [0-9.]+ M elements/s, saturated [0-9]+, nan 0$"
      if [[ $line =~ $re ]]; then ok; else bad "$name: summary line '$line'"; fi
      expect_file "$name data" "$OUT/d.npy" '|u1' '(256, 1024)' $((128 + 262144))
      expect_file "$name dequant" "$OUT/q.npy" '<f4' '(256, 1024)' $((128 + 4 * 262144))
      # Row scales: [256, 32] (already multiples of 128 and 4); col scales: [roundup(8, 4), 1024].
      if [[ $layout == compact && $axis == row ]]; then shape='(256, 32)'; fi
      if [[ $layout == compact && $axis == col ]]; then shape='(8, 1024)'; fi
      if [[ $layout == swizzled ]]; then shape='(8192,)'; fi
      expect_file "$name scales" "$OUT/s.npy" '|u1' "$shape" $((128 + 8192))
      cp "$OUT/s.npy" "$T/scales_${rule}_${axis}_${layout}.npy"
      # The saturated count is 0 for trn3 and te (their scales never clip a block maximum).
      if [[ $rule != ocp ]]; then
        if [[ $line == *"saturated 0, nan 0" ]]; then ok; else bad "$name: expected no saturation: $line"; fi
      fi
    done
  done
done

# Swizzled vs compact (docs/facts/mx-numerics.md §5): spot positions worked out by hand, then the whole
# permutation. Rowwise scales [256, 32]: ntx = 8 tiles of 128x4 (512 bytes). Colwise scales [8, 1024] are
# swizzled as the transposed matrix (i = column, j = block-row), ntx = 2.
#   row (1,0): compact 32 -> 16; (32,0): 1024 -> 4; (33,2): 1058 -> 16 + 4 + 2 = 22; (0,4): 4 -> 512;
#   row (130,5): 4165 -> (1*8 + 1)*512 + 2*16 + 0*4 + 1 = 4641;
#   col (rb=1,c=0): 1024 -> 1; (rb=0,c=1): 1 -> 16; (rb=5,c=130): 5250 -> (1*2 + 1)*512 + 2*16 + 1 = 1569.
# swz I J NTX: sets $z to the swizzled index (no subshell: this runs 8192 times per layout)
swz() { z=$(((($1 / 128) * $3 + $2 / 4) * 512 + ($1 % 32) * 16 + (($1 % 128) / 32) * 4 + $2 % 4)); }
for rule in trn3 ocp te; do
  c=$T/scales_${rule}_row_compact.npy
  s=$T/scales_${rule}_row_swizzled.npy
  for pair in 32:16 1024:4 1058:22 4:512 4165:4641 0:0; do
    expect_bytes "$rule row swizzle $pair" "$s" $((128 + ${pair#*:})) "$(bytes "$c" $((128 + ${pair%:*})) 1)"
  done
  mapfile -t cb < <(od -An -v -tx1 -w1 -j128 "$c")
  mapfile -t sb < <(od -An -v -tx1 -w1 -j128 "$s")
  mism=0
  for ((i = 0; i < 256; i++)); do
    for ((j = 0; j < 32; j++)); do
      swz $i $j 8
      [[ ${cb[i * 32 + j]} == "${sb[z]}" ]] || mism=$((mism + 1))
    done
  done
  if [[ $mism -eq 0 ]]; then ok; else bad "$rule row swizzle: $mism scales misplaced"; fi

  c=$T/scales_${rule}_col_compact.npy
  s=$T/scales_${rule}_col_swizzled.npy
  for pair in 1024:1 1:16 5250:1569 0:0; do
    expect_bytes "$rule col swizzle $pair" "$s" $((128 + ${pair#*:})) "$(bytes "$c" $((128 + ${pair%:*})) 1)"
  done
  mapfile -t cb < <(od -An -v -tx1 -w1 -j128 "$c")
  mapfile -t sb < <(od -An -v -tx1 -w1 -j128 "$s")
  mism=0
  for ((rb = 0; rb < 8; rb++)); do
    for ((col = 0; col < 1024; col++)); do
      swz $col $rb 2
      [[ ${cb[rb * 1024 + col]} == "${sb[z]}" ]] || mism=$((mism + 1))
    done
  done
  if [[ $mism -eq 0 ]]; then ok; else bad "$rule col swizzle: $mism scales misplaced"; fi
done

# Thread count does not change a byte.
fresh_out
"$TRNSIM" quantize "$EXAMPLE" --format e5m2 --rule te --axis col --data "$OUT/d1.npy" --scales "$OUT/s1.npy" \
  --threads 1 >/dev/null
"$TRNSIM" quantize "$EXAMPLE" --format e5m2 --rule te --axis col --data "$OUT/d2.npy" --scales "$OUT/s2.npy" \
  --threads 2 >/dev/null
if cmp -s "$OUT/d1.npy" "$OUT/d2.npy" && cmp -s "$OUT/s1.npy" "$OUT/s2.npy"; then ok; else bad "threads 1 vs 2"; fi

# --- hand-computed bytes --------------------------------------------------------------------------------
# A 32 x 32 float32 array, zero but for one block [1.0, -2.0, 0.5, 3.5, 0 x 28] (float32 LE: 0000803f
# 000000c0 0000003f 00006040): along row 0 for --axis row, down column 0 for --axis col. amax = 3.5.
#   E4M3 ocp: floor(log2 3.5) - 8 = -7 -> E8M0 0x78; x * 2^7 = 128, -256, 64, 448 -> 0x70 0xf8 0x68 0x7e.
#   E4M3 te:  3.5 * fl(1/448) = 2^-7 exactly -> 0x78, same elements.
#   E4M3 trn3: floor(log2 3.5) - 7 = -6 -> 0x79; x * 2^6 = 64, -128, 32, 224 -> 0x68 0xf0 0x60 0x76.
#   E5M2 ocp and te: 1 - 15 = -14 -> 0x71; x * 2^14 = 2^14, -2^15, 2^13, 1.75 * 2^15 -> 0x74 0xf8 0x70 0x7b.
# Every other block is all zero: scale 0x00 and elements 0x00 under every rule.
vals=('\x00\x00\x80\x3f' '\x00\x00\x00\xc0' '\x00\x00\x00\x3f' '\x00\x00\x60\x40')
npy "$T/row.npy" '<f4' '(32, 32)' False "${vals[0]}${vals[1]}${vals[2]}${vals[3]}$(zeros $((4096 - 16)))"
colblock=''
for r in 0 1 2 3; do colblock+="${vals[r]}$(zeros 124)"; done
npy "$T/col.npy" '<f4' '(32, 32)' False "$colblock$(zeros $((4096 - 512)))"
z() { printf '00%.0s' $(seq 1 "$1"); }
for c in "e4m3 ocp 78 70 f8 68 7e" "e4m3 te 78 70 f8 68 7e" "e4m3 trn3 79 68 f0 60 76" "e5m2 ocp 71 74 f8 70 7b" \
  "e5m2 te 71 74 f8 70 7b"; do
  read -r fmt rule scale e0 e1 e2 e3 <<<"$c"
  for axis in row col; do
    name="hand $fmt $rule $axis"
    fresh_out
    "$TRNSIM" quantize "$T/$axis.npy" --format "$fmt" --rule "$rule" --axis $axis --data "$OUT/d.npy" \
      --scales "$OUT/s.npy" --dequant "$OUT/q.npy" >/dev/null
    expect_file "$name data" "$OUT/d.npy" '|u1' '(32, 32)' $((128 + 1024))
    # Row: scales [roundup(32, 128), roundup(1, 4)] = (128, 4); col: [roundup(1, 4), roundup(32, 128)] = (4, 128).
    # Either way 512 bytes, the block's scale first and every other byte 0x00.
    [[ $axis == row ]] && shape='(128, 4)' || shape='(4, 128)'
    expect_file "$name scales" "$OUT/s.npy" '|u1' "$shape" $((128 + 512))
    expect_bytes "$name scale" "$OUT/s.npy" 128 "$scale$(z 511)"
    if [[ $axis == row ]]; then
      expect_bytes "$name data" "$OUT/d.npy" 128 "$e0$e1$e2$e3$(z 1020)"
      # Dequantized values are exact here: 1.0, -2.0, 0.5, 3.5.
      expect_bytes "$name dequant" "$OUT/q.npy" 128 0000803f000000c00000003f00006040
    else
      expect_bytes "$name data" "$OUT/d.npy" 128 "$e0$(z 31)$e1$(z 31)$e2$(z 31)$e3$(z 927)"
      expect_bytes "$name dequant" "$OUT/q.npy" $((128 + 3 * 128)) 00006040
    fi
  done
done

# --- errors: message, exit code != 0, nothing written ---------------------------------------------------
# expect_error NAME MESSAGE-SUBSTRING ARGS...: runs trnsim with ARGS, outputs in a fresh $OUT.
expect_error() {
  local name=$1 want=$2
  shift 2
  fresh_out
  local err rc=0
  err=$("$TRNSIM" "$@" 2>&1 >/dev/null) || rc=$?
  if [[ $rc -eq 0 ]]; then
    bad "$name: exit code 0"
  elif [[ $err != *"$want"* ]]; then
    bad "$name: message '$err' lacks '$want'"
  elif [[ -n $(ls -A "$OUT") ]]; then
    bad "$name: left files behind: $(ls -A "$OUT")"
  else
    ok
  fi
}
q() { echo quantize "$1" --format e4m3 --rule te --axis "${2:-row}" --data "$OUT/d.npy" --scales "$OUT/s.npy" \
  --dequant "$OUT/q.npy"; }

expect_error "missing file" "trnsim: error: $T/missing.npy: cannot open: No such file or directory" \
  $(q "$T/missing.npy")
printf 'this is not an array' >"$T/magic.npy"
expect_error "bad magic" "trnsim: error: $T/magic.npy: not a .npy file (bad magic" $(q "$T/magic.npy")
head -c 1000 "$EXAMPLE" >"$T/trunc.npy"
expect_error "truncated" \
  "$T/trunc.npy: truncated data: shape (256, 1024) of uint16 needs 524288 bytes of data, found 872" \
  $(q "$T/trunc.npy")
npy "$T/fortran.npy" '<f4' '(32, 32)' True "$(zeros 4096)"
expect_error "fortran order" "$T/fortran.npy: Fortran-order arrays are not supported (shape (32, 32))" \
  $(q "$T/fortran.npy")
npy "$T/f64.npy" '<f8' '(1, 32)' False "$(zeros 256)"
expect_error "float64" "$T/f64.npy: quantize input: unsupported dtype float64 (expected float32 or uint16)" \
  $(q "$T/f64.npy")
npy "$T/i32.npy" '<i4' '(1, 32)' False "$(zeros 128)"
expect_error "int32" "$T/i32.npy: quantize input: unsupported dtype int32 (expected float32 or uint16)" \
  $(q "$T/i32.npy")
npy "$T/be.npy" '>f4' '(1, 32)' False "$(zeros 128)"
expect_error "big-endian" "$T/be.npy: unsupported dtype '>f4' (supported: '<f4' float32" $(q "$T/be.npy")
npy "$T/1d.npy" '<f4' '(32,)' False "$(zeros 128)"
expect_error "1-D" "$T/1d.npy: quantize input: expected a 2-D [rows, cols] array (a 3-D [E, rows, cols] stack only with --layout x4 or bf16-swizzled), found shape (32,)" $(q "$T/1d.npy")
npy "$T/3d.npy" '<f4' '(1, 1, 32)' False "$(zeros 128)"
expect_error "3-D" "$T/3d.npy: quantize input: expected a 2-D [rows, cols] array (a 3-D [E, rows, cols] stack only with --layout x4 or bf16-swizzled), found shape (1, 1, 32)" $(q "$T/3d.npy")
npy "$T/c48.npy" '<f4' '(32, 48)' False "$(zeros 6144)"
expect_error "cols % 32" \
  "$T/c48.npy: --axis row puts MX blocks of 32 along the columns, but shape (32, 48) has 48 columns (not a multiple of 32)" \
  $(q "$T/c48.npy" row)
npy "$T/r48.npy" '<f4' '(48, 32)' False "$(zeros 6144)"
expect_error "rows % 32" \
  "$T/r48.npy: --axis col puts MX blocks of 32 along the rows, but shape (48, 32) has 48 rows (not a multiple of 32)" \
  $(q "$T/r48.npy" col)
npy "$T/r1.npy" '<f4' '(1, 32)' False "$(zeros 128)"
expect_error "rows % 32 (row axis)" \
  "$T/r1.npy: the TE scale layouts need both dims to be multiples of 32 (as TransformerEngine's MXFP8 tensors), but shape (1, 32) has 1 rows" \
  $(q "$T/r1.npy" row)
npy "$T/empty.npy" '<f4' '(0, 32)' False ""
expect_error "empty" "$T/empty.npy: quantize input: the array is empty (shape (0, 32))" $(q "$T/empty.npy")
expect_error "unknown rule" "--rule: xyz not in {trn3,ocp,te}" \
  quantize "$EXAMPLE" --format e4m3 --rule xyz --axis row --data "$OUT/d.npy" --scales "$OUT/s.npy"
expect_error "unknown format" "--format: e3m4 not in {e4m3,e5m2}" \
  quantize "$EXAMPLE" --format e3m4 --rule te --axis row --data "$OUT/d.npy" --scales "$OUT/s.npy"
expect_error "bad threads" "--threads" \
  quantize "$EXAMPLE" --format e4m3 --rule te --axis row --data "$OUT/d.npy" --scales "$OUT/s.npy" --threads 0
expect_error "missing --scales" "--scales is required" \
  quantize "$EXAMPLE" --format e4m3 --rule te --axis row --data "$OUT/d.npy"
# The data output's directory is missing: the scales and dequant outputs (valid paths) must not appear.
expect_error "output directory missing" \
  "trnsim: error: $OUT/nope/d.npy: cannot write: directory '$OUT/nope' does not exist" \
  quantize "$EXAMPLE" --format e4m3 --rule te --axis row --data "$OUT/nope/d.npy" --scales "$OUT/s.npy" \
  --dequant "$OUT/q.npy"
expect_error "same output twice" "--data and --scales are the same file ($OUT/d.npy)" \
  quantize "$EXAMPLE" --format e4m3 --rule te --axis row --data "$OUT/d.npy" --scales "$OUT/d.npy"

# An output path that is the input would destroy the input: refused before anything is written.
cp "$EXAMPLE" "$T/in.npy"
expect_error "output is the input" "$T/in.npy: is the input file; choose another output path" \
  quantize "$T/in.npy" --format e4m3 --rule te --axis row --data "$T/in.npy" --scales "$OUT/s.npy"
if cmp -s "$EXAMPLE" "$T/in.npy"; then ok; else bad "output is the input: the input changed"; fi

# Command-line errors exit 1 with the same "trnsim: error:" prefix as any other bad input.
for args in "quantize $EXAMPLE --format e4m3 --rule bogus --axis row --data $OUT/d.npy --scales $OUT/s.npy" \
  "quantize $EXAMPLE --format e4m3 --rule te --axis row --scales $OUT/s.npy" "quantize --no-such-flag" ""; do
  rc=0
  err=$("$TRNSIM" $args 2>&1 >/dev/null) || rc=$?
  if [[ $rc -eq 1 && $err == "trnsim: error: "* ]]; then ok; else bad "cli error '$args': rc $rc, '$err'"; fi
done
rc=0
help=$("$TRNSIM" quantize --help) || rc=$?
if [[ $rc -eq 0 ]]; then ok; else bad "quantize --help: rc $rc"; fi
# The command's line and its input's name the 3-D stacks x4 and bf16-swizzled take (both said "2-D" only:
# tester22j).
line=$(head -1 <<<"$help")
input=$(grep -E '^ +input ' <<<"$help")
if [[ $line == *"3-D [E, rows, cols]"* && $input == *"3-D [E, rows, cols]"* ]]; then ok; else
  bad "quantize --help does not name 3-D stacks: '$line' / '$input'"
fi

# --- --layout x4: the Trainium kernels' pre-quantized inputs -------------------------------------------
# A float32 [128, 32] array, zero but for x[32][0] = 1.0, quantized along its rows (--axis col: K = 128,
# F = 32), E4M3, rule trn3: the block's scale is floor(log2 1) - 7 = -7 -> E8M0 0x78, its element 1.0 * 2^7
# -> E4M3 0x70; every other block is zero (scale 0x00, elements 0x00). Data [K/4, F] = (32, 32) int32, i.e.
# byte (partition P, 4 f + j):
#   wrapX: K = 128 is one 128-row sub-tile, its quarters 32 rows apart: row 32 is partition 0, slot 1 ->
#          byte 1; group 0 (partitions 0..7) -> scale row (0/4)*32 + 0%4 = 0: scale byte 0.
#   1x32:  partition P holds rows 4P..4P+3: row 32 is partition 8, slot 0 -> byte 8 * 128 = 1024; group 1
#          -> scale row 1: scale byte 32.
# Scale tiles: unpacked [K/4, F] = (32, 32), packed [ceil(128/2048)*128, F] = (128, 32); the 4 group rows
# 0..3 hold scales (0x00 but for the one above), every other byte is 0x7F.
npy "$T/k128.npy" '<f4' '(128, 32)' False "$(zeros $((32 * 128)))\x00\x00\x80\x3f$(zeros $((96 * 128 - 4)))"
for c in "wrapX 1 0" "1x32 1024 32"; do
  read -r scheme dpos spos <<<"$c"
  for packed in "" --use-scale-packing; do
    name="x4 $scheme${packed:+ packed}"
    fresh_out
    if ! line=$("$TRNSIM" quantize "$T/k128.npy" --format e4m3 --rule trn3 --axis col --layout x4 \
      --quant-scheme "$scheme" $packed --data "$OUT/d.npy" --scales "$OUT/s.npy" --dequant "$OUT/q.npy"); then
      bad "$name: exit code"
      continue
    fi
    re="^quantize: shape \(128, 32\) float32 -> e4m3 rule=trn3 axis=col layout=x4 quant_scheme=$scheme "
    re+="scales=$([[ -n $packed ]] && echo packed || echo unpacked): data \(32, 32\) x4, [0-9.]+ ms, "
    re+="[0-9.]+ M elements/s, saturated 0, nan 0$"
    if [[ $line =~ $re ]]; then ok; else bad "$name: summary line '$line'"; fi
    expect_file "$name data" "$OUT/d.npy" '<i4' '(32, 32)' $((128 + 4096))
    expect_bytes "$name data" "$OUT/d.npy" $((128 + dpos)) 70
    if [[ $(od -An -v -tx1 -j128 "$OUT/d.npy" | tr -d ' \n' | tr -d 0) == 7 ]]; then ok; else bad "$name: other bytes"; fi
    rows=$([[ -n $packed ]] && echo 128 || echo 32)
    expect_file "$name scales" "$OUT/s.npy" '|u1' "($rows, 32)" $((128 + rows * 32))
    expect_bytes "$name scale" "$OUT/s.npy" $((128 + spos)) 78
    # Group rows 0..3: 0x00 but the one scale; rows 4..: 0x7F.
    want=$(printf '00%.0s' $(seq 1 128))
    want="${want:0:$((2 * spos))}78${want:$((2 * spos + 2))}$(printf '7f%.0s' $(seq 1 $(((rows - 4) * 32))))"
    expect_bytes "$name scale tile" "$OUT/s.npy" 128 "$want"
    # Dequantized in the input's layout: 1.0 at element 32 * 32 = 1024 (byte 4096).
    expect_bytes "$name dequant" "$OUT/q.npy" $((128 + 4096)) 0000803f
  done
done
# --axis row reads the array as [F = rows, K = cols]: the transposed input gives the same bytes.
npy "$T/k128t.npy" '<f4' '(32, 128)' False "$(zeros 128)\x00\x00\x80\x3f$(zeros $((32 * 512 - 132)))"
fresh_out
"$TRNSIM" quantize "$T/k128.npy" --format e4m3 --rule trn3 --axis col --layout x4 --data "$OUT/d1.npy" \
  --scales "$OUT/s1.npy" >/dev/null
"$TRNSIM" quantize "$T/k128t.npy" --format e4m3 --rule trn3 --axis row --layout x4 --data "$OUT/d2.npy" \
  --scales "$OUT/s2.npy" >/dev/null
if cmp -s "$OUT/d1.npy" "$OUT/d2.npy" && cmp -s "$OUT/s1.npy" "$OUT/s2.npy"; then ok; else bad "x4 axis row = transposed axis col"; fi
expect_error "x4 K alignment" \
  "$T/row.npy: --layout x4 --quant-scheme wrapX interleaves K = 32 (the rows of shape (32, 32)) in groups of 128: K must be a multiple of 128" \
  quantize "$T/row.npy" --format e4m3 --rule trn3 --axis col --layout x4 --data "$OUT/d.npy" --scales "$OUT/s.npy"
expect_error "x4 with a TE scale layout" \
  "--scale-layout swizzled is a TransformerEngine layout; --layout x4 takes --use-scale-packing instead" \
  quantize "$T/k128.npy" --format e4m3 --rule trn3 --axis col --layout x4 --scale-layout swizzled \
  --data "$OUT/d.npy" --scales "$OUT/s.npy"
expect_error "packing with the TE layout" \
  "--use-scale-packing applies to --layout x4 or bf16-swizzled (the Trainium kernels' layouts), not to --layout te" \
  quantize "$T/k128.npy" --format e4m3 --rule trn3 --axis col --use-scale-packing --data "$OUT/d.npy" \
  --scales "$OUT/s.npy"

# --- --layout bf16-swizzled: the kernels' BF16 pre-swizzled inputs [K/4, 4F] --------------------------
# A float32 [128, 2] array (--axis col: K = 128, F = 2), zero but for x[33][1] = 1.0 (BF16 0x3F80) and
# x[0][0] = 1 + 2^-8 (a tie: BF16 rounds it to even, 0x3F80). Output uint16 [K/4, 4F] = (32, 8), element
# (P, 4 f + j) at byte 2 (8 P + 4 f + j):
#   wrapX: K = 128 is one sub-tile, quarters 32 rows apart: row 33 -> P 1, j 1: element 8 + 4 + 1 = 13
#          (byte 26); row 0 -> element 0.
#   1x32:  row 33 -> P 8, j 1: element 64 + 4 + 1 = 69 (byte 138); row 0 -> element 0.
npy "$T/sw.npy" '<f4' '(128, 2)' False "\x00\x80\x80\x3f$(zeros $((33 * 8 + 4 - 4)))\x00\x00\x80\x3f$(zeros $((94 * 8)))"
for c in "wrapX 26" "1x32 138"; do
  read -r scheme pos <<<"$c"
  name="bf16-swizzled $scheme"
  fresh_out
  if ! line=$("$TRNSIM" quantize "$T/sw.npy" --axis col --layout bf16-swizzled --quant-scheme "$scheme" \
    --data "$OUT/d.npy"); then
    bad "$name: exit code"
    continue
  fi
  want="quantize: shape (128, 2) float32 -> bf16 axis=col layout=bf16-swizzled quant_scheme=$scheme: data "
  want+="(32, 8) (BF16 bits), rounded to BF16 1"
  if [[ $line == "$want" ]]; then ok; else bad "$name: summary line '$line'"; fi
  expect_file "$name data" "$OUT/d.npy" '<u2' '(32, 8)' $((128 + 512))
  want=$(printf '00%.0s' $(seq 1 512))
  want="803f${want:4:$((2 * pos - 4))}803f${want:$((2 * pos + 4))}"
  expect_bytes "$name bytes" "$OUT/d.npy" 128 "$want"
  if [[ -e $OUT/s.npy ]]; then bad "$name: wrote scales"; else ok; fi
done
# --axis row reads [F, K]: the transposed array gives the same bytes; a 3-D [E, rows, cols] stack gives
# each operand's bytes in turn ([2, 128, 2] -> (2, 32, 8), the second from byte 512 of the data).
npy "$T/swt.npy" '<f4' '(2, 128)' False "\x00\x80\x80\x3f$(zeros $((128 * 4 + 33 * 4 - 4)))\x00\x00\x80\x3f$(zeros $((94 * 4)))"
npy "$T/sw3.npy" '<f4' '(2, 128, 2)' False "$(zeros 1024)\x00\x80\x80\x3f$(zeros $((33 * 8 + 4 - 4)))\x00\x00\x80\x3f$(zeros $((94 * 8)))"
fresh_out
"$TRNSIM" quantize "$T/sw.npy" --axis col --layout bf16-swizzled --data "$OUT/a.npy" >/dev/null
"$TRNSIM" quantize "$T/swt.npy" --axis row --layout bf16-swizzled --data "$OUT/b.npy" >/dev/null
"$TRNSIM" quantize "$T/sw3.npy" --axis col --layout bf16-swizzled --data "$OUT/c.npy" >/dev/null
if cmp -s "$OUT/a.npy" "$OUT/b.npy"; then ok; else bad "bf16-swizzled axis row = transposed axis col"; fi
expect_file "bf16-swizzled stack" "$OUT/c.npy" '<u2' '(2, 32, 8)' $((128 + 1024))
if [[ $(bytes "$OUT/c.npy" 128 512 | tr -d 0) == "" && $(bytes "$OUT/c.npy" 640 512) == $(bytes "$OUT/a.npy" 128 512) ]]; then
  ok
else
  bad "bf16-swizzled stack: operand bytes"
fi
expect_error "bf16-swizzled takes no format" \
  "--format does not apply to --layout bf16-swizzled: it writes the BF16 values pre-swizzled, not quantized (use --layout x4 for pre-quantized inputs)" \
  quantize "$T/sw.npy" --format e4m3 --axis col --layout bf16-swizzled --data "$OUT/d.npy"
expect_error "x4 needs scales" "--scales is required with --layout x4 (only --layout bf16-swizzled, which writes BF16, takes none)" \
  quantize "$T/k128.npy" --format e4m3 --rule trn3 --axis col --layout x4 --data "$OUT/d.npy"
expect_error "te takes no stack" \
  "$T/sw3.npy: quantize input: expected a 2-D [rows, cols] array (a 3-D [E, rows, cols] stack only with --layout x4 or bf16-swizzled), found shape (2, 128, 2)" \
  quantize "$T/sw3.npy" --format e4m3 --rule trn3 --axis col --data "$OUT/d.npy" --scales "$OUT/s.npy"
# A 4-D array: the message names both shapes x4 and bf16-swizzled take (tester22i: it said "expected a 2-D
# array" although they take 3-D stacks).
npy "$T/sw4.npy" '<f4' '(1, 2, 128, 2)' False "$(zeros 2048)"
for layout in x4 bf16-swizzled; do
  expect_error "$layout 4-D" \
    "$T/sw4.npy: quantize input: expected a 2-D [rows, cols] array or a 3-D [E, rows, cols] stack, found shape (1, 2, 128, 2)" \
    quantize "$T/sw4.npy" $([[ $layout == x4 ]] && echo --format e4m3 --rule trn3 --scales "$OUT/s.npy") --axis col \
    --layout $layout --data "$OUT/d.npy"
done

# Round trips (what a user with [K, N] / [M, K] arrays does): matmul_mxfp8 under its defaults (x and w
# BF16 pre-swizzled, E5M2, nki_library), its operands laid out by --layout bf16-swizzled from x [M, K]
# (--axis row) and w [K, N] (--axis col), in both interleaves; and pre-quantized by --layout x4. Numerics
# PASS against the reference, and y is the bytes of the run that reads the unswizzled BF16 arrays.
MM=$SRC/configs/workloads/llama3_8b_mlp_down_fwd_mxfp8.json
mm=(--set params.M=256 --set params.K=512 --set params.N=1024 --set params.float8_dtype=float8_e5m2)
"$TRNSIM" run "$MM" --out "$T/mm_un" "${mm[@]}" --set params.w_is_f_by_k=false --dump-inputs >/dev/null 2>&1
"$TRNSIM" run "$MM" --out "$T/mm_un32" "${mm[@]}" --set params.w_is_f_by_k=false --set params.quant_scheme=1x32 \
  --set params.schedule=trnsim_optimized >/dev/null 2>&1
for scheme in wrapX 1x32; do
  extra=()
  base=$T/mm_un
  if [[ $scheme == 1x32 ]]; then
    extra=(--set params.quant_scheme=1x32 --set params.schedule=trnsim_optimized)
    base=$T/mm_un32
  fi
  "$TRNSIM" quantize "$T/mm_un/inputs/x.npy" --axis row --layout bf16-swizzled --quant-scheme $scheme \
    --data "$T/xs_$scheme.npy" >/dev/null
  "$TRNSIM" quantize "$T/mm_un/inputs/w.npy" --axis col --layout bf16-swizzled --quant-scheme $scheme \
    --data "$T/ws_$scheme.npy" >/dev/null
  rc=0
  "$TRNSIM" run "$MM" --out "$T/mm_sw_$scheme" "${mm[@]}" "${extra[@]}" --set params.x_is_swizzled=true \
    --set params.w_is_swizzled=true --set inputs.x="$T/xs_$scheme.npy" --set inputs.w="$T/ws_$scheme.npy" \
    >"$T/mm.txt" 2>&1 || rc=$?
  if [[ $rc -eq 0 && $(grep -c '"pass": true' "$T/mm_sw_$scheme/stats.json") == 1 ]]; then
    ok
  else
    bad "matmul_mxfp8 pre-swizzled $scheme run: rc $rc $(cat "$T/mm.txt")"
  fi
  if cmp -s "$base/y.npy" "$T/mm_sw_$scheme/y.npy"; then ok; else bad "matmul_mxfp8 pre-swizzled $scheme: y differs"; fi
done
"$TRNSIM" quantize "$T/mm_un/inputs/x.npy" --format e5m2 --rule trn3 --axis row --layout x4 --data "$T/xq.npy" \
  --scales "$T/xq_s.npy" >/dev/null
"$TRNSIM" quantize "$T/mm_un/inputs/w.npy" --format e5m2 --rule trn3 --axis col --layout x4 --data "$T/wq.npy" \
  --scales "$T/wq_s.npy" >/dev/null
rc=0
"$TRNSIM" run "$MM" --out "$T/mm_q" "${mm[@]}" --set 'params.x_scales=[128, 256]' --set 'params.w_scales=[128, 1024]' \
  --set inputs.x="$T/xq.npy" --set inputs.x_scales="$T/xq_s.npy" --set inputs.w="$T/wq.npy" \
  --set inputs.w_scales="$T/wq_s.npy" >"$T/mm.txt" 2>&1 || rc=$?
if [[ $rc -eq 0 && $(grep -c '"pass": true' "$T/mm_q/stats.json") == 1 ]]; then ok; else bad "matmul_mxfp8 pre-quantized run: rc $rc $(cat "$T/mm.txt")"; fi
if cmp -s "$T/mm_un/y.npy" "$T/mm_q/y.npy"; then ok; else bad "matmul_mxfp8 pre-quantized: y differs"; fi

# A user's array in another layout than the parameters say gets the shared shape error plus the kernel's
# hint (KernelPackage::input_hint): the parameters that read it as it is, and the quantize command that
# makes the declared form, which, run as printed, gives a file the kernel takes.
x=$T/mm_un/inputs/x.npy
wkn=$T/mm_un/inputs/w.npy
rc=0
err=$("$TRNSIM" run "$MM" --out "$T/mm_h" "${mm[@]}" --set params.x_is_swizzled=true --set params.w_is_swizzled=true \
  --set inputs.x="$T/xs_wrapX.npy" --set inputs.w="$wkn" 2>&1) || rc=$?
want="trnsim: error: $MM: inputs.w.npy: $wkn: shape (512, 1024) does not match kernel input 'w' bfloat16 [128, 4096]; "
want+="it has the shape of the BF16 w [K, N], K = 512 the contraction; set \"w_is_swizzled\": false and "
want+="\"w_is_f_by_k\": false to read it as it is, or, as the kernel reads 'w' pre-swizzled [K/4, 4N] = [128, 4096]: "
want+="make it with \`trnsim quantize $wkn --axis col --layout bf16-swizzled --data OUT.npy\` (docs/kernels.md)"
if [[ $rc -eq 1 && $err == "$want" ]]; then ok; else bad "hint for an unswizzled w: rc $rc '$err'"; fi
cmd=$(sed -n 's/.*`trnsim \(quantize [^`]*\)`.*/\1/p' <<<"$err")
$TRNSIM ${cmd/OUT.npy/$T/w_hint.npy} >/dev/null
if "$TRNSIM" run "$MM" --out "$T/mm_h" "${mm[@]}" --set params.x_is_swizzled=true --set params.w_is_swizzled=true \
  --set inputs.x="$T/xs_wrapX.npy" --set inputs.w="$T/w_hint.npy" >/dev/null 2>&1 && cmp -s "$T/mm_h/y.npy" "$T/mm_un/y.npy"; then
  ok
else
  bad "the hint's quantize command: its output is not the kernel's input"
fi
expect_error "hint: orientation" \
  "$wkn: shape (512, 1024) does not match kernel input 'w' bfloat16 [1024, 512]; it has the shape of the BF16 w [K, N], K = 512 the contraction: set \"w_is_f_by_k\": false to read it as it is" \
  run "$MM" --out "$T/mm_h2" "${mm[@]}" --set inputs.w="$wkn"
expect_error "hint: pre-swizzled given" \
  "$T/xs_wrapX.npy: shape (128, 1024) does not match kernel input 'x' bfloat16 [256, 512]; it has the shape of the BF16 pre-swizzled [K/4, 4M]: set \"x_is_swizzled\": true to read it as it is" \
  run "$MM" --out "$T/mm_h2" "${mm[@]}" --set inputs.x="$T/xs_wrapX.npy"
expect_error "hint: BF16 where x4 data is read" \
  "$x: shape (256, 512) does not match kernel input 'x' float8_e5m2_x4 [128, 256]; it has the shape of the BF16 x [M, K], K = 512 the contraction; 'x_scales' is set, so 'x' holds x4 data [K/4, M]: make it and the scales with \`trnsim quantize $x --format e5m2 --rule trn3 --axis row --layout x4 --use-scale-packing --data DATA.npy --scales SCALES.npy\`, or leave 'x_scales' unset to give BF16 (docs/kernels.md)" \
  run "$MM" --out "$T/mm_h2" "${mm[@]}" --set 'params.x_scales=[128, 256]' --set params.use_scale_packing=true \
  --set inputs.x="$x" --set inputs.x_scales="$T/xq_s.npy"

# matmul_mxfp8_backward: a BF16 dY [M, N] = [256, 512] (x above) where output_grad_scales makes it x4 data.
expect_error "hint: backward dY" \
  "$x: shape (256, 512) does not match kernel input 'output_grad' float8_e5m2_x4 [128, 256]; it has the shape of the BF16 output_grad [M, N], N = 512 the contraction; 'output_grad_scales' is set, so 'output_grad' holds x4 data [N/4, M]: make it and the scales with \`trnsim quantize $x --format e5m2 --rule trn3 --axis row --layout x4 --data DATA.npy --scales SCALES.npy\`, or leave 'output_grad_scales' unset to give BF16 (docs/kernels.md)" \
  run "$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json" --out "$T/bw_h" --set params.M=256 \
  --set 'params.output_grad_scales=[128, 256]' --set 'params.output_grad_columnwise_scales=[64, 512]' \
  --set inputs.output_grad="$x"

# blockwise_mm_fwd_mxfp8 (trnsim_optimized: the library takes neither pre-swizzled nor pre-quantized forward
# weights) from its BF16 weights [E, 2, I_TP, H] (saved as the stack [E, 2*I_TP, H]) and [E, H, I_TP], both
# F-by-K (--axis row): pre-swizzled, and pre-quantized with packed scales; the outputs are the bytes of the
# BF16-weight run and every check passes.
MF=$SRC/configs/workloads/moe/mixtral_8x7b_fwd_mxfp8.json
mf=(--set params.T=256 --set params.H=512 --set params.I_TP=256 --set params.E=4 --set params.block_size=128
  --set params.gate_up_config.tile_n=null --set params.down_config.tile_n=null --set params.schedule=trnsim_optimized)
"$TRNSIM" run "$MF" --out "$T/mf" "${mf[@]}" --dump-inputs >/dev/null 2>&1
# [4, 2, 256, 512] uint16 -> [4, 512, 512]: the same bytes under another header (the header is padded to 128).
gu=$T/mf/inputs/gate_up_proj_weight.npy
npy "$T/gu3.npy" '<u2' '(4, 512, 512)' False ""
tail -c +129 "$gu" >>"$T/gu3.npy"
dn=$T/mf/inputs/down_proj_weight.npy
"$TRNSIM" quantize "$T/gu3.npy" --axis row --layout bf16-swizzled --data "$T/gus.npy" >/dev/null
"$TRNSIM" quantize "$dn" --axis row --layout bf16-swizzled --data "$T/dns.npy" >/dev/null
for f in gu3:gu dn:dn; do
  src=${f%%:*}
  [[ $src == dn ]] && src=$dn || src=$T/gu3.npy
  "$TRNSIM" quantize "$src" --format e4m3 --rule trn3 --axis row --layout x4 --use-scale-packing \
    --data "$T/${f##*:}q.npy" --scales "$T/${f##*:}q_s.npy" >/dev/null
done
for form in swizzled quantized; do
  if [[ $form == swizzled ]]; then
    set_w=(--set params.gate_up_weight_is_swizzled=true --set params.down_weight_is_swizzled=true
      --set inputs.gate_up_proj_weight="$T/gus.npy" --set inputs.down_proj_weight="$T/dns.npy")
  else
    set_w=(--set 'params.gate_up_weight_scales=[4, 128, 512]' --set 'params.down_weight_scales=[4, 128, 512]'
      --set inputs.gate_up_proj_weight="$T/guq.npy" --set inputs.gate_up_weight_scales="$T/guq_s.npy"
      --set inputs.down_proj_weight="$T/dnq.npy" --set inputs.down_weight_scales="$T/dnq_s.npy")
  fi
  rc=0
  "$TRNSIM" run "$MF" --out "$T/mf_$form" "${mf[@]}" "${set_w[@]}" >"$T/mf.txt" 2>&1 || rc=$?
  if [[ $rc -eq 0 && $(grep -c '"pass": true' "$T/mf_$form/stats.json") == 3 ]]; then ok; else bad "moe fwd $form: rc $rc $(cat "$T/mf.txt")"; fi
  for o in output_hidden_states gate_up_proj_act_checkpoint_T scaled_intermediate_checkpoint_T; do
    if cmp -s "$T/mf/$o.npy" "$T/mf_$form/$o.npy"; then ok; else bad "moe fwd $form: $o differs"; fi
  done
done

# A pre-quantized matmul_mxfp8_backward run: dY [M, N] quantized rowwise (along N, output_grad_scales) and
# columnwise (along M, the output_grad_columnwise extension) by trnsim quantize in the kernel's layout and
# scheme: the host checks pass on the dequantized values and the gradients are the bytes of the BF16 run.
W=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
"$TRNSIM" run "$W" --out "$T/bf" --dump-inputs >/dev/null 2>&1
for axis in row col; do
  "$TRNSIM" quantize "$T/bf/inputs/output_grad.npy" --format e5m2 --rule trn3 --axis $axis --layout x4 \
    --use-scale-packing --data "$T/og_$axis.npy" --scales "$T/og_${axis}_s.npy" >/dev/null
done
rc=0
"$TRNSIM" run "$W" --out "$T/pq" --set params.use_scale_packing=true \
  --set 'params.output_grad_scales=[128, 512]' --set 'params.output_grad_columnwise_scales=[128, 512]' \
  --set inputs.output_grad="$T/og_row.npy" --set inputs.output_grad_scales="$T/og_row_s.npy" \
  --set inputs.output_grad_columnwise="$T/og_col.npy" \
  --set inputs.output_grad_columnwise_scales="$T/og_col_s.npy" >"$T/pq.txt" 2>&1 || rc=$?
if [[ $rc -eq 0 && $(grep -c '"pass": true' "$T/pq/stats.json") == 2 ]]; then ok; else bad "pre-quantized run: rc $rc $(cat "$T/pq.txt")"; fi
if cmp -s "$T/bf/input_grad.npy" "$T/pq/input_grad.npy" && cmp -s "$T/bf/weight_grad.npy" "$T/pq/weight_grad.npy"; then
  ok
else
  bad "pre-quantized run: gradients differ from the BF16 run"
fi

# matmul_mxfp8_backward's weights [N, K] and input_activation [M, K], each contracted along its rows (N, M):
# --layout bf16-swizzled --axis col gives weights_is_swizzled's [N/4, 4K] and input_is_swizzled's [M/4, 4K];
# the gradients are the bytes of the BF16 run.
for x in weights input_activation; do
  "$TRNSIM" quantize "$T/bf/inputs/$x.npy" --axis col --layout bf16-swizzled --data "$T/${x}_sw.npy" >/dev/null
done
rc=0
"$TRNSIM" run "$W" --out "$T/bsw" --set params.weights_is_swizzled=true --set params.input_is_swizzled=true \
  --set inputs.weights="$T/weights_sw.npy" --set inputs.input_activation="$T/input_activation_sw.npy" \
  >"$T/bsw.txt" 2>&1 || rc=$?
if [[ $rc -eq 0 && $(grep -c '"pass": true' "$T/bsw/stats.json") == 2 ]]; then ok; else bad "pre-swizzled backward run: rc $rc $(cat "$T/bsw.txt")"; fi
if cmp -s "$T/bf/input_grad.npy" "$T/bsw/input_grad.npy" && cmp -s "$T/bf/weight_grad.npy" "$T/bsw/weight_grad.npy"; then
  ok
else
  bad "pre-swizzled backward run: gradients differ from the BF16 run"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
