# Sourced by scripts/_env.sh: the compilers and runtimes of the multi-language code rewards, from Debian's
# packages, and what their sandboxed programs need prebuilt (they cannot build it per program in time).
#
# 1. apt-get installs each package whose command or files are missing (`apt-get update` once, first).
#    A package that still does not give them: with REWARDLAB_CI=1 one line `[setup] FAILED: ...` and exit 1;
#    elsewhere one warning line, and that language's prebuild is skipped.
# 2. Prebuilds, under $REWARDLAB_TOOLCHAINS (default /usr/local/lib/rewardlab-toolchains: under /usr, so the
#    sandbox's read-only root shows it; no folder named node_modules, which the sandbox hides):
#    rust/deps/*.rlib + rust/externs.txt  rand, regex, md5 (and their dependencies) built offline from
#                                         /usr/share/cargo/registry by /usr/bin/cargo with /usr/bin/rustc;
#                                         externs.txt has one `name=/abs/path.rlib` a line, for --extern.
#    go/src, go/pkg/linux_amd64/*.a       testify and its dependencies, `go install`ed in GOPATH mode: with
#                                         GO111MODULE=off GOPATH=<this>/go CGO_ENABLED=1 an empty GOCACHE
#                                         builds only the program's own package (`go test -vet=off -c`:
#                                         ~0.5 s, against ~4 s from /usr/share/gocode's sources).
#    cxx/include/bits/stdc++.h.gch        precompiled <bits/stdc++.h> for `g++ -O2 -std=gnu++17` exactly
#                                         (with -I <this>/cxx/include; other flags fall back to the header).
#    node/js-md5                          the npm package HumanEval-X's JavaScript/162 requires (npm's
#                                         registry, at set-up only; runs find it through NODE_PATH).
#    versions.json                        the tool versions.
#    Skipped while .stamp matches the tool versions and this file; quiet on success.
# (the compile and run commands, environment and limits of each language: verifiers/code/languages.py)

_rl_tc_main() {
    local prefix="${REWARDLAB_TOOLCHAINS:-/usr/local/lib/rewardlab-toolchains}"
    local log="${TMPDIR:-/tmp}/rewardlab-toolchains.log"
    # package -> what it must give (an absolute path: the sandbox's PATH is /usr/local/bin:/usr/bin:/bin,
    # and /usr/bin/rustc is wanted even where a rustup rustc comes first in this PATH)
    local -a want=(
        "gcc /usr/bin/gcc"
        "g++ /usr/bin/g++"
        "openjdk-17-jdk-headless /usr/lib/jvm/java-17-openjdk-amd64/bin/javac"
        "nodejs /usr/bin/node"
        "node-typescript /usr/bin/tsc"
        "node-lodash /usr/share/nodejs/lodash/package.json"
        "golang-go /usr/bin/go"
        "golang-github-stretchr-testify-dev /usr/share/gocode/src/github.com/stretchr/testify/assert"
        "rustc /usr/bin/rustc"
        "cargo /usr/bin/cargo"
        "librust-rand-dev /usr/share/cargo/registry/rand-0.8.5"
        "librust-regex-dev /usr/share/cargo/registry/regex-1.7.1"
        # regex's default features (aho-corasick, memchr) come as a Recommends, which --no-install-recommends skips
        "librust-regex+default-dev /usr/share/cargo/registry/aho-corasick-0.7.19"
        "librust-md5-dev /usr/share/cargo/registry/md5-0.7.0"
        "libboost-dev /usr/include/boost/any.hpp"
        "libssl-dev /usr/include/openssl/md5.h"
    )
    local entry pkg
    local -a missing=()
    for entry in $(_rl_tc_absent "${want[@]}"); do missing+=("${entry%%:*}"); done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "[setup] installing toolchains with apt-get: ${missing[*]} (a few minutes the first time)"
        : > "$log"
        apt-get update -q >> "$log" 2>&1 || true
        # all at once; where that fails (one package unknown), one by one so that the others still come
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >> "$log" 2>&1; then
            for pkg in "${missing[@]}"; do
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$pkg" >> "$log" 2>&1 || true
            done
        fi
        local -a failed=()
        for entry in $(_rl_tc_absent "${want[@]}"); do failed+=("$entry"); done
        if [ "${#failed[@]}" -gt 0 ]; then
            if [ "${REWARDLAB_CI:-}" = 1 ]; then
                echo "[setup] FAILED: apt-get install ${failed[0]%%:*} did not give ${failed[0]#*:}" >&2
                exit 1
            fi
            echo "[setup] warning: apt-get install did not give ${failed[*]} (log: $log); those languages' programs cannot run here" >&2
        fi
    fi
    _rl_tc_prebuild "$prefix" "$log"
}

_rl_tc_absent() {  # "package:path" for each "package path" whose path is not there
    local entry path
    for entry in "$@"; do
        path="${entry#* }"
        # the crates' folders carry their version: any version of the crate will do
        case "$path" in /usr/share/cargo/registry/*) compgen -G "${path%-*}-*" > /dev/null && continue ;; esac
        [ -e "$path" ] || echo "${entry%% *}:$path"
    done
    return 0
}

_rl_tc_packages() {  # the packages' versions: the stamp hashes them with this file (cheap: no tool runs)
    dpkg-query -W -f '${Package}=${Version}\n' gcc g++ openjdk-17-jdk-headless nodejs node-typescript \
        node-lodash golang-go golang-github-stretchr-testify-dev rustc cargo librust-rand-dev librust-regex-dev \
        librust-regex+default-dev librust-md5-dev libboost-dev libssl-dev 2> /dev/null || true
}

_rl_tc_versions() {  # what each tool says it is, for versions.json
    [ -x /usr/bin/gcc ] && echo "gcc=$(/usr/bin/gcc -dumpfullversion)"
    [ -x /usr/bin/g++ ] && echo "g++=$(/usr/bin/g++ -dumpfullversion)"
    [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ] &&
        echo "java=$(/usr/lib/jvm/java-17-openjdk-amd64/bin/java -XX:+UseSerialGC -version 2>&1 | head -n 1)"
    [ -x /usr/bin/node ] && echo "node=$(/usr/bin/node --version)"
    [ -x /usr/bin/tsc ] && echo "tsc=$(/usr/bin/node /usr/bin/tsc --version)"
    [ -x /usr/bin/go ] && echo "go=$(GO111MODULE=off /usr/bin/go version)"
    [ -x /usr/bin/rustc ] && echo "rustc=$(/usr/bin/rustc --version)"
    [ -x /usr/bin/cargo ] && echo "cargo=$(RUSTC=/usr/bin/rustc /usr/bin/cargo --version)"
    _rl_tc_packages | sed 's/^/deb:/'
    return 0
}

_rl_tc_prebuild() {
    local prefix="$1" log="$2" self want_stamp tmp
    self="${BASH_SOURCE[0]}"
    want_stamp="$({ _rl_tc_packages; cat "$self"; } | sha256sum | cut -d' ' -f1)"
    if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$want_stamp" ]; then
        return 0
    fi
    if ! mkdir -p "$prefix" 2> /dev/null || [ ! -w "$prefix" ]; then
        echo "[setup] warning: cannot write $prefix: toolchain prebuild skipped" >&2
        return 0
    fi
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/rewardlab-toolchains.XXXXXX")"
    : > "$log"
    local ok=1
    [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ] && { _rl_tc_rust "$prefix" "$tmp" >> "$log" 2>&1 || ok=0; }
    [ -x /usr/bin/go ] && [ -d /usr/share/gocode/src/github.com/stretchr/testify ] && {
        _rl_tc_go "$prefix" "$tmp" >> "$log" 2>&1 || ok=0
    }
    [ -x /usr/bin/g++ ] && { _rl_tc_cxx "$prefix" "$tmp" >> "$log" 2>&1 || ok=0; }
    command -v npm > /dev/null && { _rl_tc_node "$prefix" "$tmp" >> "$log" 2>&1 || ok=0; }
    rm -rf "$tmp"
    if [ "$ok" != 1 ]; then
        tail -n 30 "$log" >&2
        if [ "${REWARDLAB_CI:-}" = 1 ]; then
            echo "[setup] FAILED: toolchain prebuild into $prefix (log: $log)" >&2
            exit 1
        fi
        echo "[setup] warning: toolchain prebuild into $prefix failed (log: $log)" >&2
        return 0
    fi
    _rl_tc_versions | python3 -c '
import json, sys
print(json.dumps(dict(l.rstrip("\n").split("=", 1) for l in sys.stdin if "=" in l), indent=1, sort_keys=True))
' > "$prefix/versions.json"
    chmod -R a+rX "$prefix"
    echo "$want_stamp" > "$prefix/.stamp"
}

# Each builder runs in a subshell of its own (its exports stay there) and stops at its first failing
# command: `set -e` does not apply inside a function called as `f || ok=0`, hence the `|| return 1`.
_rl_tc_rust() (  # rlibs of rand, regex, md5, offline from Debian's registry
    prefix="$1" tmp="$2"
    mkdir -p "$tmp/cargo-home" "$tmp/rs/src" || return 1
    printf '%s\n' '[source.crates-io]' 'replace-with = "debian"' '[source.debian]' \
        'directory = "/usr/share/cargo/registry"' '[net]' 'offline = true' > "$tmp/cargo-home/config.toml"
    printf '%s\n' '[package]' 'name = "rewardlab-prebuilt"' 'version = "0.0.0"' 'edition = "2021"' \
        '[lib]' 'path = "src/lib.rs"' '[dependencies]' 'rand = "0.8"' 'regex = "1"' 'md5 = "0.7"' \
        '[profile.release]' 'codegen-units = 1' > "$tmp/rs/Cargo.toml"
    : > "$tmp/rs/src/lib.rs"
    # RUSTC: cargo would otherwise run the first rustc of PATH (a rustup one, whose rlibs /usr/bin/rustc
    # cannot read)
    (cd "$tmp/rs" && CARGO_HOME="$tmp/cargo-home" RUSTC=/usr/bin/rustc CARGO_TARGET_DIR="$tmp/rs/target" \
        RUSTFLAGS= /usr/bin/cargo build --release --offline --quiet) || return 1
    rm -rf "$prefix/rust.new" && mkdir -p "$prefix/rust.new/deps" || return 1
    for rlib in "$tmp"/rs/target/release/deps/lib*.rlib; do
        case "$rlib" in */librewardlab_prebuilt-*) continue ;; esac
        cp "$rlib" "$prefix/rust.new/deps/" || return 1
    done
    : > "$prefix/rust.new/externs.txt"
    for crate in rand regex md5; do
        rlib="$(compgen -G "$prefix/rust.new/deps/lib${crate}-*.rlib" | head -n 1)"
        [ -n "$rlib" ] || { echo "no rlib for $crate"; return 1; }
        echo "$crate=$prefix/rust/deps/$(basename "$rlib")" >> "$prefix/rust.new/externs.txt"
    done
    rm -rf "$prefix/rust" && mv "$prefix/rust.new" "$prefix/rust"
)

_rl_tc_go() (  # testify's packages, installed as .a files in a GOPATH of ours
    prefix="$1" tmp="$2" gp="$2/go"
    pkgs=()
    unset GOROOT GOBIN GOENV GOOS GOARCH CC
    export GO111MODULE=off GOFLAGS= GOCACHE="$tmp/gocache" CGO_ENABLED=1
    # the non-standard packages that testify's packages use: each one's folder, its files only
    GOPATH=/usr/share/gocode /usr/bin/go list -deps -f '{{if not .Standard}}{{.Dir}}{{end}}' \
        github.com/stretchr/testify/... > "$tmp/go-dirs" || return 1
    while read -r dir; do
        [ -n "$dir" ] || continue
        rel="${dir#/usr/share/gocode/src/}"
        mkdir -p "$gp/src/$rel" || return 1
        find "$dir" -maxdepth 1 -type f ! -name '*_test.go' -exec cp {} "$gp/src/$rel/" \; || return 1
        pkgs+=("$rel")
    done < <(sort -u "$tmp/go-dirs")
    # built where they will stay (the .a files record their sources' folder)
    rm -rf "$prefix/go.new" && mkdir -p "$prefix/go.new" && cp -r "$gp/src" "$prefix/go.new/" || return 1
    rm -rf "$prefix/go" && mv "$prefix/go.new" "$prefix/go" || return 1
    GOPATH="$prefix/go" /usr/bin/go install "${pkgs[@]}" || return 1
    # an empty cache must find them up to date (else every program would compile them again)
    stale="$(GOPATH="$prefix/go" GOCACHE="$tmp/gocache-empty" /usr/bin/go list -f '{{.Stale}} {{.StaleReason}}' \
        github.com/stretchr/testify/assert)" || return 1
    [ "$stale" = "false " ] || { echo "testify/assert is stale with an empty cache: $stale"; return 1; }
)

_rl_tc_cxx() (  # <bits/stdc++.h> precompiled for g++ -O2 -std=gnu++17
    prefix="$1" tmp="$2"
    header="$(echo '#include <bits/stdc++.h>' | /usr/bin/g++ -std=gnu++17 -x c++ -E -H - 2>&1 > /dev/null |
        awk '/bits\/stdc\+\+\.h$/ && !f {f = 1; print $2}')"
    [ -f "$header" ] || { echo "no bits/stdc++.h"; return 1; }
    mkdir -p "$tmp/pch/bits" || return 1
    /usr/bin/g++ -O2 -std=gnu++17 -x c++-header "$header" -o "$tmp/pch/bits/stdc++.h.gch" || return 1
    rm -rf "$prefix/cxx" && mkdir -p "$prefix/cxx/include/bits" || return 1
    mv "$tmp/pch/bits/stdc++.h.gch" "$prefix/cxx/include/bits/"
)

_rl_tc_node() (  # js-md5, which HumanEval-X's JavaScript/162 requires (npm's registry; not in Debian)
    prefix="$1" tmp="$2"
    (cd "$tmp" && npm pack --silent js-md5@0.7.3 > /dev/null) || return 1
    rm -rf "$prefix/node.new" && mkdir -p "$prefix/node.new/js-md5" || return 1
    tar -xzf "$tmp"/js-md5-0.7.3.tgz -C "$prefix/node.new/js-md5" --strip-components=1 || return 1
    rm -rf "$prefix/node" && mv "$prefix/node.new" "$prefix/node"
)

_rl_tc_main
unset -f _rl_tc_main _rl_tc_absent _rl_tc_packages _rl_tc_versions _rl_tc_prebuild _rl_tc_rust _rl_tc_go _rl_tc_cxx _rl_tc_node
