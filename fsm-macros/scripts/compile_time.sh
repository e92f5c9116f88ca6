#!/usr/bin/env bash
# Measures the compile time #[derive(OperatorFsm)] adds for a machine of N
# states (default 50). Not a test: run it by hand and read the figures.
#
#   fsm-macros/scripts/compile_time.sh [STATES] [RUNS]
#
# It generates three versions of one crate in a scratch directory:
#   derive - the enum with #[derive(OperatorFsm)] and its handlers;
#   hand   - the same enum, handlers, and the equivalent Fsm impl by hand;
#   none   - the enum alone with its serde derives (the baseline: without
#            an Fsm impl the handlers cannot name Step<'_, Big>);
# builds their dependencies once, then times `cargo build` of the crate
# alone (non-incremental, debug) RUNS times (default 5) and prints the
# median of each. derive - hand is the cost of the macro over writing the
# same impl by hand; derive - none is the machine's whole cost (handlers
# included) over a plain enum.
set -euo pipefail

STATES=${1:-50}
RUNS=${2:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/fsm-compile-time.XXXXXX)
export CARGO_TARGET_DIR="$WORK/target"
export CARGO_INCREMENTAL=0
trap 'rm -rf "$WORK"' EXIT

last=$((STATES - 4)) # states 0..last have handlers; then Done, Failed, Cancelled

# The variant's shape: unit, struct or tuple, in turn.
shape() { echo $(($1 % 3)); }

gen_enum() { # $1 = derive|hand|none
  local mode=$1 i target
  if [ "$mode" = derive ]; then
    echo '#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]'
    echo '#[fsm(resource = u32, context = (), error = AppError, on_failure = Failed)]'
    echo '#[fsm(retry(max_attempts = 5, initial = "1s", factor = 2.0, max = "5m"))]'
  else
    echo '#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]'
  fi
  echo 'pub enum Big {'
  for i in $(seq 0 "$last"); do
    if [ "$i" -lt "$last" ]; then target="S$((i + 1))"; else target=Done; fi
    if [ "$mode" = derive ]; then
      attrs="handler = h$i, next($target, Cancelled)"
      [ "$i" = 0 ] && attrs="initial, $attrs"
      [ $((i % 5)) = 1 ] && attrs="$attrs, timeout = \"10m\", on_timeout = Failed"
      [ $((i % 7)) = 2 ] && attrs="$attrs, retry(max_attempts = 3, jitter = full)"
      [ $((i % 4)) = 3 ] && attrs="$attrs, compensate = c$i"
      echo "    #[fsm($attrs)]"
    fi
    case $(shape "$i") in
      0) echo "    S$i," ;;
      1) echo "    S$i { id: String, n: u32 }," ;;
      2) echo "    S$i(String)," ;;
    esac
  done
  [ "$mode" = derive ] && echo '    #[fsm(final, ready)]'
  echo '    Done,'
  [ "$mode" = derive ] && echo '    #[fsm(failed)]'
  echo '    Failed,'
  [ "$mode" = derive ] && echo '    #[fsm(failed)]'
  echo '    Cancelled,'
  echo '}'
}

next_value() { # the value handler i moves to
  local j=$(($1 + 1))
  if [ "$1" -eq "$last" ]; then echo 'Big::Done'; return; fi
  case $(shape "$j") in
    0) echo "Big::S$j" ;;
    1) echo "Big::S$j { id: \"x\".into(), n: 1 }" ;;
    2) echo "Big::S$j(\"x\".into())" ;;
  esac
}

args() { # the handler's extra parameters
  case $(shape "$1") in
    0) echo '' ;;
    1) echo ', _id: &str, _n: &u32' ;;
    2) echo ', _id: &str' ;;
  esac
}

gen_handlers() {
  local i
  for i in $(seq 0 "$last"); do
    echo "pub async fn h$i(_cx: &mut Step<'_, Big>$(args "$i")) -> Result<Transition<Big>, AppError> {"
    echo "    Ok(Transition::next($(next_value "$i")))"
    echo '}'
    if [ $((i % 4)) = 3 ]; then
      echo "pub async fn c$i(_cx: &mut Step<'_, Big>$(args "$i")) -> Result<(), AppError> { Ok(()) }"
    fi
  done
}

gen_hand_impl() {
  local i target
  echo 'const fn policy(attempts: u32, jitter: Jitter) -> RetryPolicy {'
  echo '    match RetryPolicy::new(attempts, Duration::from_secs(1), 2.0, Duration::from_secs(300)) {'
  echo '        Ok(p) => p.with_jitter(jitter),'
  echo '        Err(_) => panic!("valid"),'
  echo '    }'
  echo '}'
  echo "static STATES: [StateMeta; $STATES] = ["
  for i in $(seq 0 "$last"); do
    if [ "$i" -lt "$last" ]; then target="S$((i + 1))"; else target=Done; fi
    line="StateMeta::new(\"S$i\")"
    [ "$i" = 0 ] && line="$line.initial()"
    line="$line.with_handler()"
    [ "$(shape "$i")" != 0 ] && line="$line.with_data()"
    [ $((i % 4)) = 3 ] && line="$line.with_compensation()"
    line="$line.next(&[\"$target\", \"Cancelled\"])"
    [ $((i % 7)) = 2 ] && line="$line.retry(policy(3, Jitter::Full))"
    [ $((i % 5)) = 1 ] && line="$line.timeout(Duration::from_secs(600)).on_timeout(\"Failed\")"
    echo "    $line,"
  done
  echo '    StateMeta::new("Done").ready().final_state(),'
  echo '    StateMeta::new("Failed").failed(),'
  echo '    StateMeta::new("Cancelled").failed(),'
  echo '];'
  echo 'static MACHINE: Machine = Machine::new("Big", &STATES).retry(policy(5, Jitter::None)).on_failure("Failed");'
  echo 'impl Fsm for Big {'
  echo '    type Resource = u32;'
  echo '    type Context = ();'
  echo '    type Error = AppError;'
  echo '    fn machine() -> &'"'"'static Machine { &MACHINE }'
  echo '    fn state_name(&self) -> &'"'"'static str {'
  echo '        match self {'
  for i in $(seq 0 "$last"); do
    case $(shape "$i") in
      0) echo "            Big::S$i => \"S$i\"," ;;
      1) echo "            Big::S$i { .. } => \"S$i\"," ;;
      2) echo "            Big::S$i(..) => \"S$i\"," ;;
    esac
  done
  echo '            Big::Done => "Done", Big::Failed => "Failed", Big::Cancelled => "Cancelled",'
  echo '        }'
  echo '    }'
  echo '    fn unit_state(name: &str) -> Option<Self> {'
  echo '        match name {'
  for i in $(seq 0 "$last"); do
    [ "$(shape "$i")" = 0 ] && echo "            \"S$i\" => Some(Big::S$i),"
  done
  echo '            "Done" => Some(Big::Done), "Failed" => Some(Big::Failed), "Cancelled" => Some(Big::Cancelled),'
  echo '            _ => None,'
  echo '        }'
  echo '    }'
  echo '    fn handle<'"'"'a>(&'"'"'a self, cx: &'"'"'a mut Step<'"'"'_, Self>) -> BoxFuture<'"'"'a, Result<Transition<Self>, AppError>> {'
  echo '        match self {'
  for i in $(seq 0 "$last"); do
    case $(shape "$i") in
      0) echo "            Big::S$i => Box::pin(h$i(cx))," ;;
      1) echo "            Big::S$i { id, n } => Box::pin(h$i(cx, id, n))," ;;
      2) echo "            Big::S$i(id) => Box::pin(h$i(cx, id))," ;;
    esac
  done
  echo '            Big::Done | Big::Failed | Big::Cancelled => Box::pin(async { Ok(Transition::Stay) }),'
  echo '        }'
  echo '    }'
  echo '    fn compensate<'"'"'a>(&'"'"'a self, cx: &'"'"'a mut Step<'"'"'_, Self>) -> BoxFuture<'"'"'a, Result<(), AppError>> {'
  echo '        match self {'
  for i in $(seq 0 "$last"); do
    [ $((i % 4)) = 3 ] || continue
    case $(shape "$i") in
      0) echo "            Big::S$i => Box::pin(c$i(cx))," ;;
      1) echo "            Big::S$i { id, n } => Box::pin(c$i(cx, id, n))," ;;
      2) echo "            Big::S$i(id) => Box::pin(c$i(cx, id))," ;;
    esac
  done
  echo '            _ => Box::pin(async { Ok(()) }),'
  echo '        }'
  echo '    }'
  echo '}'
}

gen_crate() { # $1 = mode
  local dir="$WORK/$1"
  mkdir -p "$dir/src"
  cat > "$dir/Cargo.toml" <<TOML
[package]
name = "fixture-$1"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
fsm-core = { path = "$ROOT/fsm-core" }
serde = { version = "1", features = ["derive"] }

[workspace]
TOML
  {
    echo '#![allow(clippy::all, missing_docs, dead_code)]'
    echo 'use std::time::Duration;'
    echo 'use fsm_core::prelude::*;'
    echo 'use fsm_core::Jitter;'
    echo '#[derive(Debug)]'
    echo 'pub struct AppError;'
    echo 'impl std::fmt::Display for AppError { fn fmt(&self, f: &mut std::fmt::Formatter<'"'"'_>) -> std::fmt::Result { f.write_str("e") } }'
    echo 'impl std::error::Error for AppError {}'
    echo 'impl Classify for AppError {}'
    echo 'const _: Option<Duration> = None;'
    echo 'const _: Option<Jitter> = None;'
    gen_enum "$1"
    # The baseline has no Fsm impl, so its handlers could not name
    # Step<'_, Big>: it is the enum (with its serde derives) alone.
    if [ "$1" != none ]; then gen_handlers; fi
    if [ "$1" = hand ]; then gen_hand_impl; fi
    if [ "$1" = derive ]; then
      echo 'pub fn check() { assert_eq!(Big::machine().validate(), Ok(())); }'
    fi
  } > "$dir/src/lib.rs"
  # The workspace's lock file: the fixtures build the versions it builds.
  cp "$ROOT/Cargo.lock" "$dir/Cargo.lock"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for mode in derive hand none; do gen_crate "$mode"; done

for mode in derive hand none; do
  (cd "$WORK/$mode" && cargo build -q)           # dependencies and a first build
done
for mode in derive hand none; do
  times=()
  for _ in $(seq "$RUNS"); do
    touch "$WORK/$mode/src/lib.rs"
    start=$(date +%s%N)
    (cd "$WORK/$mode" && cargo build -q)
    end=$(date +%s%N)
    times+=($(((end - start) / 1000000)))
  done
  echo "$mode: median $(printf '%s\n' "${times[@]}" | median) ms over $RUNS builds (${times[*]})"
done
echo "($STATES states; fixtures were in $WORK)"
