#!/usr/bin/env bash
# `mpirun -np N latte ...` from the command line (docs/scale-out.md): the logits of `latte eval`
# on 2 ranks equal one process's byte for byte; a rank killed or stopped mid-generation ends the
# job with an error within 30 s; ranks given different options or different files, and a command
# that does not run across ranks, end it at start with a one-line error; `latte chat` on 2 ranks
# replies as one process does; --ep-split by an importance matrix's routing counts gives the same
# logits.
#   mpi_command_line.sh LATTE MPIRUN SHARED_DIR
set -uo pipefail
latte=$(realpath "$1") mpirun=$2 shared=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
mpi() { "$mpirun" --allow-run-as-root --oversubscribe "$@"; }

fixture=$shared/fixtures/ds2-v2-tiny-q8_0.gguf
tokens=$shared/fixtures/ds2-v2-tiny-q8_0.tokens.txt
[[ -f $fixture ]] || { echo "FAIL: no $fixture (set LATTE_SHARED_DIR)"; exit 1; }

# 1. The same logits through the command line.
"$latte" eval -m "$fixture" --tokens "$tokens" --logits-out "$work/one.f32" -t 1 --deterministic ||
  fail "latte eval alone"
mpi -np 2 "$latte" eval -m "$fixture" --tokens "$tokens" --logits-out "$work/two.f32" -t 1 --deterministic ||
  fail "latte eval on 2 ranks"
cmp -s "$work/one.f32" "$work/two.f32" || fail "2 ranks' logits differ from one process's"

# The pid of rank $2 of the job that mpirun $1 started.
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
  done
}

# 2, 3. A long generation on 2 ranks; rank 1 is sent a signal once it runs. The job must end, with
# an error, within 30 s of the signal.
model=$(realpath "$(dirname "$0")/../../../models/tiny-mla-stories-f32.gguf")
end_after_signal() {
  local signal=$1 expect=$2
  "$mpirun" --allow-run-as-root --oversubscribe -np 2 "$latte" run -m "$model" -p "Once upon a time" -n 200000 \
    --ignore-eos -c 200000 -t 1 --mpi-timeout 5 > "$work/out.txt" 2> "$work/err.txt" &
  local job=$! victim="" i
  for i in $(seq 100); do
    victim=$(rank_pid "$job" 1)
    [[ -n $victim ]] && [[ -s $work/out.txt ]] && break
    sleep 0.1
  done
  [[ -n $victim ]] || { fail "$signal: no rank 1 found"; pkill -9 -P "$job"; kill -9 "$job"; return; }
  kill "-$signal" "$victim"
  local start=$SECONDS
  while kill -0 "$job" 2>/dev/null && (( SECONDS - start < 40 )); do sleep 0.2; done
  if kill -0 "$job" 2>/dev/null; then
    fail "$signal: the job still runs 40 s after rank 1 was sent SIG$signal"
    pkill -9 -P "$job"; kill -9 "$job"
    return
  fi
  wait "$job"
  local code=$? took=$((SECONDS - start))
  (( code != 0 )) || fail "$signal: the job ended with exit code 0"
  (( took <= 30 )) || fail "$signal: the job took $took s to end"
  grep -q -- "$expect" "$work/err.txt" || { fail "$signal: no '$expect' on stderr:"; cat "$work/err.txt"; }
  echo "SIG$signal to rank 1: the job ended in ${took} s, exit code $code"
}
end_after_signal KILL "rank 1"
end_after_signal STOP "nothing from rank 1 within 5 s"

# 4. Different options on the two ranks.
mpi -np 1 "$latte" eval -m "$fixture" --tokens "$tokens" --logits-out "$work/x.f32" -t 1 : \
  -np 1 "$latte" eval -m "$fixture" --tokens "$tokens" --logits-out "$work/x.f32" -t 2 2> "$work/err.txt" &&
  fail "different options ran"
grep -q "rank 1 was given a command line other than rank 0's" "$work/err.txt" || { fail "options:"; cat "$work/err.txt"; }

# 5. The same command line, but another file on rank 1 (its own working directory).
mkdir -p "$work/a" "$work/b"
cp "$fixture" "$work/a/m.gguf"
cp "$shared/fixtures/ds2-v2-tiny-q4_0.gguf" "$work/b/m.gguf"
mpi -np 1 -wdir "$work/a" "$latte" eval -m m.gguf --tokens "$tokens" --logits-out x.f32 -t 1 : \
  -np 1 -wdir "$work/b" "$latte" eval -m m.gguf --tokens "$tokens" --logits-out x.f32 -t 1 2> "$work/err.txt" &&
  fail "different files ran"
grep -q "rank 1 was given a model file other than rank 0's" "$work/err.txt" || { fail "files:"; cat "$work/err.txt"; }

# 6. A command that does not run across ranks.
mpi -np 2 "$latte" imatrix -m "$fixture" -f "$tokens" 2> "$work/err.txt" && fail "imatrix ran on 2 ranks"
grep -q "latte imatrix does not run across the ranks" "$work/err.txt" || { fail "imatrix:"; cat "$work/err.txt"; }

# 7. chat on 2 ranks: rank 0 reads the input (mpirun gives it stdin) and shares each line; the
# replies are one process's, byte for byte.
printf 'Once upon a time\n/reset\nThe little dog\n' > "$work/chat.txt"
"$latte" chat -m "$model" -n 12 -s 3 -t 1 --deterministic < "$work/chat.txt" > "$work/chat-one.txt" ||
  fail "chat alone"
mpi -np 2 "$latte" chat -m "$model" -n 12 -s 3 -t 1 --deterministic < "$work/chat.txt" > "$work/chat-two.txt" ||
  fail "chat on 2 ranks"
[[ -s $work/chat-one.txt ]] || fail "chat alone wrote nothing"
cmp -s "$work/chat-one.txt" "$work/chat-two.txt" || { fail "chat on 2 ranks replied otherwise:"; diff "$work/chat-one.txt" "$work/chat-two.txt"; }

# 8. --ep-split by the routing counts of an importance matrix (latte imatrix): the same logits; a
# file that is not one is a one-line error.
for i in $(seq 300); do printf 'the little dog saw a big tree and the cat ran home with her friend '; done > "$work/text.txt"
"$latte" imatrix -m "$model" -f "$work/text.txt" -o "$work/imatrix.gguf" -c 128 -t 1 --no-progress 2> /dev/null ||
  fail "latte imatrix"
story=(run -m "$model" -p "Once upon a time" -n 32 -s 1 -t 1 --deterministic)
"$latte" "${story[@]}" > "$work/run-one.txt" 2> /dev/null || fail "run alone"
mpi -np 2 "$latte" "${story[@]}" --ep-split "$work/imatrix.gguf" > "$work/run-split.txt" 2> "$work/err.txt" ||
  { fail "run --ep-split on 2 ranks"; cat "$work/err.txt"; }
grep -q "balanced by routing counts" "$work/err.txt" || { fail "no split by counts:"; cat "$work/err.txt"; }
[[ -s $work/run-one.txt ]] || fail "run alone wrote nothing"
cmp -s "$work/run-one.txt" "$work/run-split.txt" || fail "2 ranks split by routing counts wrote another story"
mpi -np 2 "$latte" "${story[@]}" --ep-split "$work/text.txt" 2> "$work/err.txt" && fail "--ep-split with a text file ran"
(( $(grep -c "ep-split '.*text.txt': not 'contiguous' nor an importance matrix" "$work/err.txt") == 1 )) ||
  { fail "--ep-split text: not one error line:"; cat "$work/err.txt"; }

(( failures == 0 )) && echo "all passed"
exit $((failures > 0))
